"""The measurement helpers: fits see only the points that ran, a sweep point that does not fit is skipped, timings
are interleaved and fixed in threads, a slope outside what the cost allows becomes a note, and every record carries
one provenance schema. Timing logic is tested with fake callables and a fake clock, never by timing anything."""
import json
import math
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from gma_teach import measure, records


def least_squares_slope(xs, ys):
    """The slow spec: slope of log y on log x by the closed form cov / var, in float64 Python arithmetic."""
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)


# ------------------------------------------------------------------------------------------------- loglog_slope
def test_loglog_slope_matches_the_closed_form_on_noisy_random_data():
    rng = np.random.default_rng(1)
    for _ in range(5):
        sizes = np.sort(rng.uniform(10, 5000, size=int(rng.integers(3, 9))))
        values = rng.uniform(0.1, 10) * sizes ** rng.uniform(-1, 3) * rng.lognormal(0, 0.2, sizes.size)
        assert measure.loglog_slope(sizes, values) == pytest.approx(least_squares_slope(sizes, values), abs=1e-9)


@pytest.mark.parametrize("missing", [float("nan"), None, float("inf")])
def test_loglog_slope_leaves_out_points_that_did_not_run(missing):
    sizes = [64, 128, 256, 512, 1024]
    values = [3.0 * n**1.3 for n in sizes]
    values[2] = missing
    kept = [(n, v) for n, v in zip(sizes, values) if n != 256]
    expected = least_squares_slope(*zip(*kept))
    assert measure.loglog_slope(sizes, values) == pytest.approx(expected, abs=1e-12)
    as_tensor = torch.tensor([math.nan if v is None else v for v in values], dtype=torch.float64)
    assert measure.loglog_slope(torch.tensor(sizes), as_tensor) == pytest.approx(expected, abs=1e-12)


def test_no_nan_reaches_the_fit(monkeypatch):
    seen = []
    real_polyfit = np.polyfit

    def checking_polyfit(x, y, degree):
        seen.append((np.asarray(x), np.asarray(y)))
        assert np.isfinite(x).all() and np.isfinite(y).all(), "a non-finite point reached the fit"
        return real_polyfit(x, y, degree)

    monkeypatch.setattr(measure.np, "polyfit", checking_polyfit)
    measure.loglog_slope([1, 2, 4, 8], [1.0, math.nan, 16.0, 64.0])
    assert len(seen) == 1 and seen[0][0].size == 3


@pytest.mark.parametrize("sizes, values, error, message", [
    ([1.0], [1.0], ValueError, "at least 2"),
    ([1.0, 2.0, 4.0], [1.0, math.nan, None], ValueError, "at least 2 points that ran to fit a slope, got 1"),
    ([1.0, 2.0], [1.0], ValueError, "same length"),
    ([1.0, 2.0], [1.0, 0.0], ValueError, "positive"),
    ([1.0, math.nan], [1.0, 2.0], ValueError, "sizes must be finite"),
    ([1.0, 2.0], "ab", TypeError, "sequence of numbers"),
    ([1.0, 2.0], [1.0, "x"], TypeError, "sequence of numbers"),
])
def test_loglog_slope_rejects_bad_input(sizes, values, error, message):
    with pytest.raises(error, match=message):
        measure.loglog_slope(sizes, values)


def test_plots_reexport_the_same_fit():
    from gma_teach import plots

    assert plots.loglog_slope is measure.loglog_slope


# ---------------------------------------------------------------------------------------------------- crossover
def test_crossover_finds_where_a_linear_cost_meets_a_quadratic_one():
    rng = np.random.default_rng(2)
    for _ in range(5):
        n_star = float(rng.uniform(100, 3000))
        sizes = [2.0**i for i in range(5, 14)]
        linear = [n_star * n for n in sizes]  # c N with c = n_star ...
        quadratic = [n * n for n in sizes]  # ... equals N^2 at N = n_star
        assert measure.crossover(sizes, linear, quadratic) == pytest.approx(n_star, rel=1e-9)


def test_crossover_skips_missing_points_and_reports_the_edges():
    sizes = [32, 64, 128, 256, 512]
    linear = [150.0 * n for n in sizes]
    quadratic = [n * n for n in sizes]
    quadratic[-1] = math.nan  # ran out of memory
    linear[0] = None  # skipped
    assert measure.crossover(sizes, linear, quadratic) == pytest.approx(150.0, rel=1e-9)
    assert measure.crossover(sizes, [1.0] * 5, [2.0] * 5) == 32  # already faster at the smallest size
    assert measure.crossover(sizes, [2.0] * 5, [1.0] * 5) is None  # never faster
    with pytest.raises(ValueError, match="at least 2 sizes where both"):
        measure.crossover([1, 2, 3], [1.0, math.nan, 1.0], [math.nan, 1.0, math.nan])
    with pytest.raises(ValueError, match="same length"):
        measure.crossover([1, 2, 3], [1.0, 1.0], [1.0, 1.0, 1.0])


# ---------------------------------------------------------------------------------------------------- run_point
@pytest.mark.parametrize("error", [
    torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 GiB"),
    MemoryError(),
    RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory: you tried to "
                 "allocate 1099511627776 bytes. Error code 12 (Cannot allocate memory)"),
])
def test_run_point_skips_a_point_that_runs_out_of_memory(error, capsys):
    def too_big():
        raise error

    assert measure.run_point(too_big, label="softmax at N=16384") is None
    note = capsys.readouterr().out
    assert "skipped softmax at N=16384" in note and "out of memory" in note


def test_run_point_lets_every_other_error_through():
    def buggy():
        raise RuntimeError("mat1 and mat2 shapes cannot be multiplied")

    with pytest.raises(RuntimeError, match="shapes"):
        measure.run_point(buggy)
    with pytest.raises(ValueError, match="bad"):
        measure.run_point(lambda: (_ for _ in ()).throw(ValueError("bad")))


def test_run_point_asks_the_cost_model_first(capsys):
    calls = []
    assert measure.run_point(lambda: calls.append(1) or 7, fits=True) == 7
    assert measure.run_point(lambda: calls.append(1) or 7, fits=lambda: False, label="naive at N=65536") is None
    assert measure.run_point(lambda: calls.append(1) or 7, fits=np.bool_(False), printer=None) is None
    assert calls == [1], "a point predicted not to fit must not run"
    assert "skipped naive at N=65536: predicted not to fit" in capsys.readouterr().out
    with pytest.raises(TypeError, match="fits must be a bool"):
        measure.run_point(lambda: 1, fits=lambda: "yes")
    with pytest.raises(TypeError, match="fn must be callable"):
        measure.run_point(3)


def test_a_sweep_with_an_out_of_memory_point_fits_the_points_that_ran(capsys):
    sizes = [256, 512, 1024, 2048, 4096]

    def point(n):
        if n == 4096:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory")
        return 5e-9 * n**2

    seconds = [measure.run_point(lambda n=n: point(n), label=f"N={n}") for n in sizes]
    assert seconds[-1] is None and "skipped N=4096" in capsys.readouterr().out
    assert measure.loglog_slope(sizes, seconds) == pytest.approx(2.0, abs=1e-12)


# ---------------------------------------------------------------------------------------------- compare_timings
class FakeClock:
    """A clock that only moves when a fake form runs: each form advances it by its next scripted duration."""

    def __init__(self):
        self.now = 0.0
        self.calls = []

    def __call__(self):
        return self.now

    def form(self, name, durations):
        durations = iter(durations)

        def run():
            self.calls.append(name)
            self.now += next(durations)
        return run


def test_compare_timings_interleaves_warms_up_and_keeps_the_minimum():
    clock = FakeClock()
    fns = {"a": clock.form("a", [9.0, 9.0, 3.0, 1.0, 2.0]), "b": clock.form("b", [9.0, 9.0, 5.0, 6.0, 4.0])}
    seconds = measure.compare_timings(fns, repeat=3, warmup=2, threads=None, timer=clock)
    assert clock.calls == ["a", "b"] * 5, "warm-up and repeats must alternate the forms"
    assert seconds == {"a": 1.0, "b": 4.0}  # the warm-up calls (9.0) are not timed; the fastest repeat is kept
    assert list(seconds) == ["a", "b"]


def test_compare_timings_fixes_the_threads_and_restores_them(monkeypatch):
    before = torch.get_num_threads()
    seen = []
    measure.compare_timings({"a": lambda: seen.append(torch.get_num_threads())}, repeat=2, warmup=1, threads=1)
    assert seen == [1, 1, 1] and torch.get_num_threads() == before

    def failing():
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        measure.compare_timings({"a": failing}, threads=1)
    assert torch.get_num_threads() == before, "the thread count must be restored after an error too"
    seen.clear()
    measure.compare_timings({"a": lambda: seen.append(torch.get_num_threads())}, repeat=1, warmup=0, threads=None)
    assert seen == [before]


def test_compare_timings_of_no_forms_is_empty():
    before = torch.get_num_threads()
    assert measure.compare_timings({}, threads=1) == {} and torch.get_num_threads() == before


@pytest.mark.parametrize("kwargs, error, message", [
    ({"fns": [lambda: 0]}, TypeError, "must be a mapping"),
    ({"fns": {"a": 3}}, TypeError, r"fns\['a'\] must be callable"),
    ({"fns": {"a": lambda: 0}, "repeat": 0}, ValueError, "repeat must be >= 1"),
    ({"fns": {"a": lambda: 0}, "warmup": -1}, ValueError, "warmup must be >= 0"),
    ({"fns": {"a": lambda: 0}, "warmup": 1.5}, TypeError, "warmup must be an int"),
    ({"fns": {"a": lambda: 0}, "threads": 0}, ValueError, "threads must be >= 1"),
])
def test_compare_timings_rejects_bad_arguments(kwargs, error, message):
    with pytest.raises(error, match=message):
        measure.compare_timings(**kwargs)


# -------------------------------------------------------------------------------- check_slope, checked_slopes
def test_check_slope_passes_a_plausible_slope_and_explains_an_implausible_one():
    assert measure.check_slope(1.02, (0.7, 1.3)) is None
    assert measure.check_slope(0.7, (0.7, 1.3)) is None  # inclusive
    note = measure.check_slope(0.02, (0.7, 1.3), label="gma")
    assert note.startswith("gma:") and "0.02" in note and "0.7..1.3" in note
    assert "-2.68" in measure.check_slope(-2.68, (0.7, 1.3), label="bidirectional linear")
    assert "too few sizes" in measure.check_slope(math.nan, (0.7, 1.3))
    with pytest.raises(ValueError, match="low <= high"):
        measure.check_slope(1.0, (2.0, 1.0))
    with pytest.raises(TypeError, match="pair"):
        measure.check_slope(1.0, 1.0)
    with pytest.raises(TypeError, match="slope must be a number"):
        measure.check_slope("1.0", (0.5, 1.5))


def scripted_measure(*runs):
    """A fake sweep: each call returns the next scripted ``{name: values}``."""
    runs = iter(runs)
    calls = []

    def measure_once():
        calls.append(1)
        return next(runs)
    return measure_once, calls


SIZES = [512, 1024, 2048, 4096]
GOOD = {"gma": [1e-3 * n for n in SIZES], "softmax": [1e-6 * n**2 for n in SIZES]}
NOISY = {"gma": [0.4, 0.6, 1.0, 0.42], "softmax": [1e-6 * n**2 for n in SIZES]}
EXPECTED = {"gma": (0.7, 1.3), "softmax": (1.5, 2.5)}


def test_checked_slopes_measures_once_when_the_slopes_are_plausible():
    sweep, calls = scripted_measure(GOOD)
    found = measure.checked_slopes(sweep, SIZES, EXPECTED)
    assert len(calls) == 1 and not found.remeasured and found.notes == {}
    assert found.slopes == pytest.approx({"gma": 1.0, "softmax": 2.0})


def test_checked_slopes_remeasures_once_and_keeps_the_second_run():
    sweep, calls = scripted_measure(NOISY, GOOD)
    found = measure.checked_slopes(sweep, SIZES, EXPECTED)
    assert len(calls) == 2 and found.remeasured and found.notes == {}
    assert found.values == GOOD and found.slopes["gma"] == pytest.approx(1.0)


def test_checked_slopes_gives_a_note_instead_of_a_wrong_claim():
    sweep, calls = scripted_measure(NOISY, NOISY, GOOD)
    found = measure.checked_slopes(sweep, SIZES, EXPECTED)
    assert len(calls) == 2, "re-measure once, not until the numbers please"
    assert set(found.notes) == {"gma"} and "gma:" in found.notes["gma"]
    assert found.slopes["softmax"] == pytest.approx(2.0)


def test_checked_slopes_fits_the_last_sizes_and_survives_gaps():
    overhead = {"gma": [5.0, 1e-3 * 1024, 1e-3 * 2048, math.nan], "softmax": GOOD["softmax"]}
    sweep, _ = scripted_measure(overhead)
    found = measure.checked_slopes(sweep, SIZES, EXPECTED, fit_last=3)
    assert found.slopes["gma"] == pytest.approx(1.0) and found.notes == {}
    lonely = {"gma": [math.nan, math.nan, math.nan, 1.0], "softmax": GOOD["softmax"]}
    sweep, _ = scripted_measure(lonely, lonely)
    found = measure.checked_slopes(sweep, SIZES, EXPECTED)
    assert math.isnan(found.slopes["gma"]) and "too few sizes" in found.notes["gma"]
    sweep, _ = scripted_measure({"softmax": GOOD["softmax"]})
    with pytest.raises(ValueError, match="no values for"):
        measure.checked_slopes(sweep, SIZES, EXPECTED)


def test_format_note_fits_every_line_to_the_page_and_keeps_every_word():
    # the note chapter 1 printed on a busy machine: 217 characters on one line before it was wrapped
    note = measure.check_slope(2.93, (1.48057, 2.48057), label="softmax")
    assert "1.48..2.48" in note and "1.48057" not in note
    for width in (75, 40):
        text = measure.format_note(note, width=width)
        lines = text.split("\n")
        assert len(lines) > 1 and all(len(line) <= width for line in lines)
        assert lines[0].startswith("note: softmax:") and all(line.startswith("    ") for line in lines[1:])
        assert text.split() == f"note: {note}".split()  # the same words in the same order, only wrapped
    assert measure.format_note("softmax: fine") == "note: softmax: fine"
    with pytest.raises(TypeError, match="note must be a str"):
        measure.format_note(None)
    with pytest.raises(ValueError, match="width must be >= 20"):
        measure.format_note("x", width=5)


# --------------------------------------------------------------------------------------------------- provenance
def test_provenance_has_one_schema():
    record = measure.provenance("python -m something --flag")
    assert tuple(record) == measure.PROVENANCE_KEYS
    assert isinstance(record["hardware"], dict) and record["hardware"]["device"] == "cpu"
    assert record["threads"] == torch.get_num_threads()
    assert record["load"] is None or (len(record["load"]) == 3 and all(value >= 0 for value in record["load"]))
    assert record["command"] == "python -m something --flag" and record["date"][:2] == "20"
    json.dumps(record)


def test_load_average_is_three_non_negative_numbers_or_none(monkeypatch):
    load = measure.load_average()
    assert load is None or (len(load) == 3 and all(value >= 0 for value in load))

    def no_load_average():
        raise OSError("not available")

    monkeypatch.setattr(records.os, "getloadavg", no_load_average)
    assert measure.load_average() is None and measure.provenance("x")["load"] is None


def test_results_folder_is_the_clone_s_book_results_else_the_installed_package_s(tmp_path, monkeypatch):
    root = Path(__file__).resolve().parents[1]
    if Path(measure.__file__).resolve().parents[1] == root:  # the tests import this clone's package
        assert measure.results_folder() == root / "book" / "results"
    assert any(measure.results_folder().glob("*.json"))
    # an installed package (site-packages/gma_teach/results), then a clone beside it (book/results) that wins
    monkeypatch.setattr(records, "__file__", str(tmp_path / "gma_teach" / "records.py"))
    (tmp_path / "gma_teach" / "results").mkdir(parents=True)
    assert measure.results_folder() == tmp_path / "gma_teach" / "results"
    (tmp_path / "book" / "results").mkdir(parents=True)
    assert measure.results_folder() == tmp_path / "book" / "results"


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_git_commit_marks_changed_code_dirty_but_not_a_new_record(tmp_path, monkeypatch):
    def git(*args):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path, check=True,
                       capture_output=True)

    (tmp_path / "gma_teach").mkdir()
    (tmp_path / "gma_teach" / "layer.py").write_text("K = 64\n")
    (tmp_path / "book" / "results").mkdir(parents=True)
    (tmp_path / "book" / "results" / "run.json").write_text("{}\n")
    git("init", "-q")
    git("add", ".")
    git("commit", "-q", "-m", "first")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True).stdout.strip()
    monkeypatch.setattr(records, "__file__", str(tmp_path / "gma_teach" / "records.py"))
    assert measure.git_commit() == head
    (tmp_path / "book" / "results" / "run.json").write_text('{"seed": 0}\n')  # a study saved a seed
    assert measure.git_commit() == head
    (tmp_path / "gma_teach" / "layer.py").write_text("K = 32\n")  # the code changed
    assert measure.git_commit() == head + "+dirty"
    monkeypatch.setattr(records, "__file__", str(tmp_path.parent / "elsewhere" / "records.py"))
    assert measure.git_commit() == "unknown"


@pytest.mark.parametrize("kwargs, error, message", [
    ({"repeat": 0}, ValueError, "repeat must be >= 1, got 0"),
    ({"repeat": 2.0}, TypeError, "repeat must be an int, got float"),
    ({"warmup": -1}, ValueError, "warmup must be >= 0, got -1"),
])
def test_time_call_rejects_bad_counts(kwargs, error, message):
    with pytest.raises(error, match=message):
        measure.time_call(lambda: 0, **kwargs)


def test_checked_slopes_rejects_a_fractional_fit_last():
    with pytest.raises(TypeError, match="fit_last must be an int, got float"):
        measure.checked_slopes(lambda: {"a": [1.0, 2.0]}, [1, 2], {}, fit_last=2.0)
