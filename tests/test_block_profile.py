"""Chapter 8's equal-state block run: what a block saves for backward, the interleaved run's ratios, the record."""
import json

import pytest
import torch

from gma_teach import measure, profiling


def _saved(label, causal, n=256, d_model=32, n_heads=2):
    torch.manual_seed(0)
    mixer = profiling.block_mixer(label, d_model=d_model, n_heads=n_heads, causal=causal)
    return profiling.saved_for_backward(mixer, torch.randn(1, n, d_model, requires_grad=True))


@pytest.mark.parametrize("causal", [False, True])
def test_the_lean_block_saves_less_than_the_operator_path_and_than_linear_attention(causal):
    lean, operators, linear = (_saved(label, causal) for label in ("gma", "gma (operators)", "linear"))
    total = {name: sum(r["bytes"] for r in rows) for name, rows in
             (("lean", lean), ("operators", operators), ("linear", linear))}
    projection = 256 * 32 * 4  # one (B, N, D) float32 tensor
    # the lean form keeps q, k, v (three projections) and the output projection's input, little else
    assert 4 * projection <= total["lean"] < 5 * projection
    assert total["lean"] < total["linear"] < total["operators"]
    # the operator path's largest saving line is the GEMM form's [x*x, x] operand of q and k
    assert operators[0]["where"].startswith("gmm._gemm_logits") and "torch.cat([x * x, x]" in operators[0]["code"]
    assert any(r["where"].startswith("_gma_autograd.") for r in lean)


def test_saved_bytes_count_a_storage_once_and_leave_out_the_input_and_parameters():
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.randn(8, 8))

        def forward(self, x):
            y = x @ self.weight  # saves x and the weight: both exist before, neither is counted
            return (y * y).sum(-1) + y.exp().sum(-1)  # y saved twice, counted once; exp's output counted

    rows = profiling.saved_for_backward(Block(), torch.randn(5, 8, requires_grad=True))
    assert sum(r["bytes"] for r in rows) == 2 * 5 * 8 * 4
    assert sum(r["tensors"] for r in rows) == 2


def test_time_by_operator_shares_sum_to_one():
    mixer = profiling.block_mixer("gma", d_model=16, n_heads=2)
    rows = profiling.time_by_operator(mixer, torch.randn(1, 32, 16, requires_grad=True), repeat=1, top=3)
    assert len(rows) == 4 and rows[-1]["op"] == "other"
    assert sum(r["share"] for r in rows) == pytest.approx(1.0)
    assert all(r["seconds"] >= 0 for r in rows)


def _row(label, causal, n, memory, speed):
    return {"label": label, "causal": causal, "seq_len": n, "peak_memory_bytes": memory, "tokens_per_second": speed}


def test_block_ratios_divide_by_linear_attention_and_judge_the_targets():
    record = {"results": [_row("gma", False, 1024, 105, 95), _row("gma (operators)", False, 1024, 140, 80),
                          _row("linear", False, 1024, 100, 100), _row("sdpa", False, 1024, 60, 30),
                          _row("gma", True, 1024, 120, 85), _row("linear", True, 1024, 100, 100)]}
    bidirectional, causal = profiling.block_ratios(record)
    assert bidirectional["memory_ratio"] == pytest.approx(1.05) and bidirectional["speed_ratio"] == pytest.approx(0.95)
    assert bidirectional["memory_ok"] and bidirectional["speed_ok"]
    assert bidirectional["sdpa_memory_ratio"] == pytest.approx(0.6)
    assert bidirectional["operators_speed_ratio"] == pytest.approx(0.8)
    assert not causal["memory_ok"] and not causal["speed_ok"] and causal["sdpa_speed_ratio"] is None
    text = profiling.format_block_table([bidirectional, causal])
    assert all(len(line) <= 75 for line in text.splitlines())
    assert "1.05" in text and "0.95" in text and "   -" in text


def test_format_breakdown_keeps_lines_short():
    text = profiling.format_breakdown(_saved("gma (operators)", False), top=3)
    assert all(len(line) <= 75 for line in text.splitlines())
    assert text.splitlines()[-1].endswith("MiB in all")


@pytest.mark.slow
def test_block_command_line_records_provenance_and_the_load_after(tmp_path):
    out = tmp_path / "block.json"
    profiling.main(["--block", "--threads", "1", "--seq-lens", "64", "--repeat", "1", "--long-repeat", "1",
                    "--breakdown-len", "64", "--out", str(out)])
    record = json.loads(out.read_text())
    assert set(measure.PROVENANCE_KEYS) <= set(record) and "load_after" in record
    assert record["command"].startswith("python -m gma_teach.profiling --block")
    assert {(r["label"], r["causal"]) for r in record["results"]} == {
        (label, causal) for label in profiling.BLOCK_MIXERS for causal in (False, True)}
    assert set(record["breakdown"]) == {f"{form}/{label}" for form in ("bidirectional", "causal")
                                        for label in ("gma", "gma (operators)", "linear")}
    assert len(profiling.block_ratios(record)) == 2


@pytest.mark.parametrize("argv, message", [
    (["--block", "--repeat", "0"], "--repeat"),
    (["--block", "--device", "cuda"], "CPU path"),
])
def test_bad_block_options_are_refused(argv, message, tmp_path, capsys):
    with pytest.raises(SystemExit):
        profiling.main([*argv, "--out", str(tmp_path / "x.json")])
    assert message in capsys.readouterr().err


def test_an_unknown_block_label_is_refused():
    with pytest.raises(ValueError, match="unknown block label"):
        profiling.block_mixer("flash")
