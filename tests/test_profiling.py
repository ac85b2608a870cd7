"""Tests for the Table 1 protocol: the sweep runs, slopes are fitted correctly, the record says where it ran."""
import json
import math

import pytest
import torch

from gma_teach import measure, profiling
from gma_teach.plots import plot_paper_table, plot_profile
from gma_teach.runs import profiling as runner  # the code behind gma_teach.profiling, patched here


@pytest.fixture(scope="module")
def tiny_rows():  # about a minute on a busy 2-core CPU: the tests that use it are marked slow
    return profiling.sweep(seq_lens=[64, 128, 256], d_model=16, n_heads=2, n_components=8, k_values=[4, 16],
                           k_sweep_len=128, n_features=8, linformer_k=8, repeat=1)


@pytest.mark.slow
def test_tiny_sweep_measures_every_mixer(tiny_rows):
    labels = {row["label"] for row in tiny_rows}
    assert labels == {"softmax", "sdpa", "linear", "performer", "linformer", "mamba", "gma (K=8)", "gma (K=4)",
                      "gma (K=16)"}
    assert len(tiny_rows) == 7 * 3 + 2
    for row in tiny_rows:
        assert row["peak_memory_bytes"] > 0 and row["seconds"] > 0
        assert row["tokens_per_second"] == pytest.approx(row["seq_len"] / row["seconds"])
    linformer = {r["seq_len"]: r["params"] for r in tiny_rows if r["mixer"] == "linformer"}
    assert linformer[256] - linformer[128] == 2 * 8 * 128  # E and F grow with N = max_seq_len
    sdpa = [r["params"] for r in tiny_rows if r["mixer"] == "sdpa"]
    assert sdpa == [4 * (16 * 16 + 16)] * 3


@pytest.mark.slow
def test_measured_memory_is_quadratic_for_eager_softmax_and_linear_for_gma(tiny_rows):
    slopes = profiling.fit_slopes(profiling.n_sweep(tiny_rows))
    assert slopes["softmax"] > 1.7, slopes
    assert 0.8 < slopes["gma (K=8)"] < 1.2, slopes
    k_memory = {r["n_components"]: r["peak_memory_bytes"] for r in tiny_rows
                if r["mixer"] == "gma" and r["seq_len"] == 128}
    assert k_memory[4] < k_memory[8] < k_memory[16]


def test_fit_slopes_recovers_known_exponents():
    rows = [{"label": label, "seq_len": n, "peak_memory_bytes": c * n ** p, "n_components": None}
            for label, c, p in (("a", 3.0, 1.0), ("b", 0.5, 2.0), ("c", 7.0, 1.37)) for n in (100, 300, 1000, 5000)]
    rows.append({"label": "c", "seq_len": 10, "peak_memory_bytes": 1e9, "n_components": None})  # an outlier below min_x
    slopes = profiling.fit_slopes(rows, min_x=100)
    assert slopes == pytest.approx({"a": 1.0, "b": 2.0, "c": 1.37})
    assert profiling.fit_slopes(rows)["c"] < 1.0  # the outlier counts without min_x
    assert profiling.fit_slopes(rows, where={"label": "a"}) == pytest.approx({"a": 1.0})


def test_paper_table_slopes_match_the_papers_reading():
    table = profiling.PAPER_TABLE_1
    rows = [{"label": label, "seq_len": n, "peak_memory_bytes": gb} for label, points in table.items()
            for n, (gb, _, _) in points.items()]
    slopes = profiling.fit_slopes(rows)
    assert slopes["softmax (eager)"] == pytest.approx(math.log(23.07 / 1.47, 2) / 2, rel=0.05)
    assert abs(slopes["gma (K=256)"] - 1.0) < 0.05
    assert len(plot_paper_table(table).axes[0].lines) == len(table)


@pytest.mark.slow
def test_plot_profile_labels_slopes(tiny_rows):
    fig = plot_profile(tiny_rows)
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any(text.startswith("softmax (slope") for text in legend)
    assert len(fig.axes[2].lines) == 1 and len(fig.axes[2].lines[0].get_xdata()) == 3


@pytest.mark.slow
def test_format_table_lists_every_row(tiny_rows):
    text = profiling.format_table(tiny_rows)
    assert len(text.splitlines()) == len(tiny_rows) + 1 and "MiB" in text


@pytest.mark.slow
def test_command_line_records_provenance(tmp_path, capsys):
    out = tmp_path / "profile.json"
    profiling.main(["--scale", "tiny", "--out", str(out), "--mixers", "gma", "--device", "cpu"])
    record = profiling.load_recorded(out)
    assert record["command"].startswith("python -m gma_teach.profiling --scale tiny")
    assert record["hardware"]["device"] == "cpu" and record["scale"] == "tiny"
    assert set(measure.PROVENANCE_KEYS) <= set(record)
    assert record["commit"] != "" and record["date"][:2] == "20"
    assert {r["mixer"] for r in record["results"]} == {"gma"}
    assert "gma (K=16)" in record["memory_slopes"]
    json.dumps(record)


@pytest.mark.parametrize("call, message", [
    (lambda: profiling.sweep(mixers=["flash"], seq_lens=[8], d_model=8, n_heads=2), "known names"),
    (lambda: profiling.sweep(seq_lens=[], d_model=8, n_heads=2), "seq_lens"),
    (lambda: profiling.sweep(mixers=["gma"], seq_lens=[8], d_model=8, n_heads=2, k_values=[4]), "k_sweep_len"),
    (lambda: profiling.profile_mixer("flash", d_model=8, n_heads=2, seq_len=8), "known names"),
])
def test_bad_arguments_raise_clear_errors(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_load_recorded_rejects_other_files(tmp_path):
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"results": []}))
    with pytest.raises(ValueError, match="missing"):
        profiling.load_recorded(path)


@pytest.mark.parametrize("error", [torch.cuda.OutOfMemoryError("CUDA out of memory"),
                                   RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate")])
def test_a_size_that_runs_out_of_memory_is_recorded_as_a_gap(monkeypatch, capsys, error):
    real = profiling.profile_mixer

    def profile_or_oom(name, **kw):
        if kw["seq_len"] == 64 and name == "softmax":
            raise error
        return real(name, **kw)

    monkeypatch.setattr(runner, "profile_mixer", profile_or_oom)
    rows = profiling.sweep(mixers=["softmax"], seq_lens=[16, 32, 64], d_model=8, n_heads=2, repeat=1)
    assert rows[-1]["error"] == "out of memory" and rows[-1]["peak_memory_bytes"] is None
    assert "skipped softmax at N=64: out of memory" in capsys.readouterr().out
    assert set(profiling.fit_slopes(rows)) == {"softmax"}
    assert "-" in profiling.format_table(rows).splitlines()[-1]


def test_a_point_the_cost_model_rules_out_is_not_run(monkeypatch, capsys):
    ran, asked = [], []
    monkeypatch.setattr(runner, "profile_mixer", lambda name, **kw: ran.append((name, kw["seq_len"])) or {
        "mixer": name, "label": name, "seq_len": kw["seq_len"], "n_components": None,
        "peak_memory_bytes": kw["seq_len"] ** 2, "seconds": 1.0, "tokens_per_second": kw["seq_len"]})

    def fits(point):
        asked.append(point)
        return point["seq_len"] < 64

    rows = profiling.sweep(mixers=["softmax", "sdpa"], seq_lens=[16, 32, 64], d_model=8, n_heads=2, repeat=1,
                           fits=fits)
    assert ("softmax", 64) not in ran and ("sdpa", 64) not in ran and len(ran) == 4
    assert {row["error"] for row in rows if "error" in row} == {"predicted not to fit"}
    assert {"mixer", "seq_len", "n_components", "batch_size", "d_model", "n_heads", "dtype", "device"} <= set(asked[0])
    assert "skipped softmax at N=64: predicted not to fit" in capsys.readouterr().out
    assert profiling.fit_slopes(rows) == pytest.approx({"softmax": 2.0, "sdpa": 2.0})
    with pytest.raises(TypeError, match="fits must be None or a callable"):
        profiling.sweep(seq_lens=[8], d_model=8, n_heads=2, fits=True)


def test_the_cost_model_rules_out_a_quadratic_block_long_before_a_linear_one():
    def point(mixer, seq_len):
        return {"mixer": mixer, "seq_len": seq_len, "n_components": 64 if mixer == "gma" else None,
                "batch_size": 1, "d_model": 256, "n_heads": 8}

    assert profiling.block_fits(point("softmax", 512)) and profiling.block_fits(point("gma", 512))
    assert not profiling.block_fits(point("softmax", 2**20))  # (8, 2^20, 2^20) float32 scores: 32 TiB
    assert profiling.block_fits(point("gma", 2**14))


def test_default_mixers_are_the_papers_table_in_the_packages_order():
    from gma_teach.baselines import MIXER_NAMES

    assert set(profiling.DEFAULT_MIXERS) == {label.split()[0] for label in profiling.PAPER_TABLE_1}
    assert list(profiling.DEFAULT_MIXERS) == [name for name in MIXER_NAMES if name in profiling.DEFAULT_MIXERS]


def test_memory_crossing_interpolates_between_rows_and_says_when_it_extrapolates():
    gma = {64: 1.0, 128: 2.0, 256: 4.0}
    inside = profiling.memory_crossing(gma, 3.0, 400)
    assert inside == {"k": 192.0, "fraction": 0.48, "between": (128, 256), "interpolated": True}
    beyond = profiling.memory_crossing(gma, 6.0, 1000)
    assert beyond["k"] == 384.0 and beyond["interpolated"] is False and beyond["between"] == (128, 256)
    below = profiling.memory_crossing(gma, 0.5, 100)
    assert below["k"] == 32.0 and below["between"] == (64, 128) and not below["interpolated"]
    assert profiling.memory_crossing({64: 2.0, 128: 2.0}, 3.0, 100) is None
    with pytest.raises(ValueError, match="two values of K"):
        profiling.memory_crossing({64: 1.0}, 3.0, 100)


def test_the_papers_table_1_crosses_eager_softmax_below_half_of_n():
    """At N = 1K the paper's GMA K = 512 block (0.51 N) already uses more memory than eager softmax's and K = 256
    (0.26 N) less: the crossing, linear in K between those rows, is 470.5 = 0.47 N."""
    crossing = profiling.paper_memory_crossing(1000)
    assert crossing["between"] == (256, 512) and crossing["interpolated"]
    assert crossing["k"] == pytest.approx(256 + (1.47 - 0.85) / (1.59 - 0.85) * 256)
    for n in (2000, 4000):  # every row of the table below softmax: extrapolated past K = 512
        assert not profiling.paper_memory_crossing(n)["interpolated"]
