"""The GPU record command on a CPU: its plan, its refusal without CUDA, and the kernel benchmark at tiny sizes."""
from pathlib import Path

import pytest
import torch

from gma_teach import record_gpu
from gma_teach.gmm import random_gma_inputs
from gma_teach.runs import record_gpu as runner  # the code behind gma_teach.record_gpu, patched here


def test_dry_run_prints_every_stage_within_ten_minutes(tmp_path, capsys):
    assert record_gpu.main(["--out", str(tmp_path), "--dry-run"]) == 0
    printed = capsys.readouterr().out
    for stage in record_gpu.STAGES:
        assert stage in printed
    assert "gma_teach.profiling --scale full" in printed and str(tmp_path) in printed
    stages = record_gpu.plan(tmp_path, slug="GPU")
    assert [s["stage"] for s in stages] == list(record_gpu.STAGES)
    assert sum(s["budget_s"] for s in stages) <= 600 - 30  # start-up of four processes within 10 minutes
    assert all(Path(s["file"]).parent == tmp_path and "GPU" in Path(s["file"]).name for s in stages)
    assert len({s["file"] for s in stages}) == len(stages)


def test_the_default_folder_is_the_packaged_results(capsys):
    from gma_teach import measure

    assert record_gpu.main(["--dry-run", "--only", "kernels"]) == 0
    printed = capsys.readouterr().out
    assert str(measure.results_folder().resolve()) in printed and "profiling" not in printed


def test_quick_plan_uses_small_sizes_and_its_own_files(tmp_path):
    quick = record_gpu.plan(tmp_path, quick=True, slug="GPU")
    full = record_gpu.plan(tmp_path, slug="GPU")
    assert all(q["budget_s"] <= f["budget_s"] for q, f in zip(quick, full))
    assert not {q["file"] for q in quick} & {f["file"] for f in full}
    assert "--quick" in quick[1]["command"] and "tiny" in quick[2]["command"]


def test_without_the_test_folder_the_gpu_tests_are_skipped_with_a_note(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "GPU_TESTS", tmp_path / "missing" / "test_kernels_gpu.py")
    gpu_tests = record_gpu.plan(tmp_path, slug="GPU")[0]
    assert gpu_tests["command"] is None and "skipped" in gpu_tests["note"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without CUDA")
def test_without_cuda_it_stops_with_a_clear_message(tmp_path):
    with pytest.raises(SystemExit, match="needs a CUDA GPU"):
        record_gpu.main(["--out", str(tmp_path)])
    assert not any(tmp_path.iterdir())


def test_roofline_model():
    def flops(impl, n, causal, backward):
        return record_gpu.model_flops(impl, 1, 1, n, 128, 64, 64, causal, backward)

    assert flops("triton", 1024, True, False) > flops("triton", 1024, False, False)
    assert flops("triton", 1024, False, True) > 3 * flops("triton", 1024, False, False)
    assert flops("triton", 2048, False, False) == 2 * flops("triton", 1024, False, False)
    assert flops("sdpa", 2048, False, False) == 4 * flops("sdpa", 1024, False, False)
    assert record_gpu.floor_seconds(1e12, 1, 1, 1024, 64, 64, torch.bfloat16, False, None) is None
    floor = record_gpu.floor_seconds(790e12, 1, 1, 1024, 64, 64, torch.bfloat16, False, (790.0, 4.3))
    assert floor == pytest.approx(1.0)


@pytest.mark.parametrize("causal", [False, True])
def test_the_benchmarked_forms_compute_the_same_attention(causal):
    inputs = random_gma_inputs(1, 2, 33, 33, 8, 8, 5, spread=0.5)  # the benchmark's inputs, as record_gpu draws them
    reference = record_gpu.run_torch(*inputs, causal)
    torch.testing.assert_close(record_gpu.run_paper(*inputs, causal), reference, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(record_gpu.run_triton(*inputs, causal), reference, atol=1e-5, rtol=1e-4)


def test_kernel_benchmark_at_tiny_sizes_writes_rows_with_provenance():
    saved = []
    record = record_gpu.benchmark_kernels(seq_lens=(32,), components=(8,), dtypes=("float32",),
                                          impls=("torch", "paper", "sdpa", "fla"), modes=("causal",), batch_size=1,
                                          n_heads=2, dim=16, repeat=1, device="cpu", command="test",
                                          on_row=lambda r: saved.append(len(r["rows"])))
    assert {"hardware", "date", "commit", "command"} <= set(record) and record["command"] == "test"
    assert record["roofline"] is None and "triton" in record["hardware"]
    assert saved == list(range(1, 9))  # 4 forms x (forward, forward+backward), saved after each
    timed = [row for row in record["rows"] if "ms" in row]
    assert {row["impl"] for row in timed} == {"torch", "paper", "sdpa"}
    assert all(row["ms"] > 0 and row["tokens_per_s"] > 0 and row["roofline_percent"] is None for row in timed)
    assert all(row["skipped"] == "fla needs CUDA" for row in record["rows"] if row["impl"] == "fla")
    assert "skipped" in record_gpu.format_row(record["rows"][-1])


def test_an_unknown_stage_is_refused(tmp_path):
    with pytest.raises(ValueError, match="stage must be one of"):
        runner._run_stage("profiling", tmp_path, quick=True)
