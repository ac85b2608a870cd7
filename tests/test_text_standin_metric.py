"""The Text stand-in is read at its declared metric, the last epoch's test accuracy, everywhere chapter 9 reads it.

Its validation split is its test split, so the record's ``test.accuracy`` (the epoch with the best validation
accuracy) is an epoch chosen on the test set. ``gma_teach.study.metric_by_seed`` reads an arm's declared metric;
chapter 9's record cells are executed here and their printed numbers and drawn bars compared with the last epoch's
accuracies taken straight from the JSON records.
"""
import contextlib
import io
import json
import re
import statistics
from pathlib import Path

import matplotlib
import nbformat
import pytest

from gma_teach import designs, study
from gma_teach.stats import mean_interval

matplotlib.use("Agg")

BOOK = Path(__file__).resolve().parents[1] / "book"
CHAPTER = BOOK / "09_long_range_arena.ipynb"


def _last_epoch(record: dict) -> dict:
    """``{seed: accuracy}`` after the last epoch, read from the record without the package's accessor."""
    return {run["seed"]: run["history"]["val_metric"][-1] for run in record["runs"]}


def _best_epoch(record: dict) -> dict:
    return {run["seed"]: run["test"]["accuracy"] for run in record["runs"]}


def _text_records() -> dict:
    records = {arm: study.load_arm(designs.TEXT_STUDY, arm) for arm in designs.TEXT_STUDY["arms"]}
    records = {arm: record for arm, record in records.items() if record is not None}
    if not records:
        pytest.skip("the Text stand-in is not recorded")
    return records


def test_the_text_standin_declares_the_last_epoch():
    assert designs.TEXT_STUDY["metric"] == "last_epoch_test_accuracy"
    assert study.declared_metrics(designs.TEXT_STUDY) == ("last_epoch_test_accuracy",)
    assert study.METRIC_PATHS["last_epoch_test_accuracy"] == ("history", "val_metric")


def test_metric_by_seed_reads_the_declared_metric():
    for arm, record in _text_records().items():
        assert study.metric_by_seed(designs.TEXT_STUDY, record) == _last_epoch(record), arm
        assert study.metric_by_seed(designs.TEXT_STUDY, record, "test_accuracy") == _best_epoch(record), arm
    listops = study.load_arm(designs.LISTOPS_LRA_STUDY, "gma")
    if listops is not None:  # ListOps has its own validation split: its declared metric is the record's test
        assert study.metric_by_seed(designs.LISTOPS_LRA_STUDY, listops) == _best_epoch(listops)
    with pytest.raises(ValueError, match="validation split is its test split"):
        study.metric_by_seed(designs.LISTOPS_LRA_STUDY, {"runs": []}, "last_epoch_test_accuracy")


def test_left_plateau_reads_the_declared_metric(tmp_path):
    text = {**designs.TEXT_STUDY, "name": "plateau_text", "arms": {"gma": {"mixer": "gma"}, "linear": {}}}
    # best epochs all above the majority class (0.5), last epochs not: only the last epoch may be counted
    for arm, last in (("gma", [0.4, 0.6, 0.4]), ("linear", [0.6, 0.6, 0.6])):
        runs = [{"seed": seed, "test": {"accuracy": 0.7}, "history": {"val_metric": [0.7, value]}}
                for seed, value in enumerate(last)]
        study.record_path(text, arm, tmp_path).write_text(json.dumps({"runs": runs,
                                                                      "summary": {"majority_baseline": 0.5}}))
    assert study.left_plateau(text, tmp_path)["counts"] == {"gma": [1, 3], "linear": [3, 3]}


@pytest.fixture(scope="module")
def chapter_outputs():
    """Chapter 9's imports and every code cell that reads the recorded studies (``lra_studies``), executed in one
    namespace: ``({cell id: printed text}, namespace)``."""
    cells = [cell for cell in nbformat.read(CHAPTER, as_version=4).cells if cell.cell_type == "code"]
    setup = [cell for cell in cells if 'preset("ch09")' in cell.source or "PAPER_TABLE_2 = " in cell.source]
    reading = [cell for cell in cells if "lra_studies" in cell.source]
    assert len(setup) == 2 and len(reading) >= 3, "chapter 9's cells moved: update this test"
    namespace, printed = {}, {}
    for cell in setup + reading:
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            exec(compile(cell.source, f"{CHAPTER.name}:{cell.get('id')}", "exec"), namespace)
        printed[cell.get("id")] = buffer.getvalue()
    return [printed[cell.get("id")] for cell in reading], namespace


def _section(text: str, start: str) -> list[str]:
    """The lines of ``text`` from the first that starts with ``start`` to the next blank line."""
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith(start))
    end = next((i for i in range(first, len(lines)) if not lines[i].strip()), len(lines))
    return lines[first:end]


def test_the_records_tell_the_two_epochs_apart():
    """Without a difference between the best and the last epoch the tests below could not fail."""
    differ = [arm for arm, record in _text_records().items()
              if f"{100 * statistics.fmean(_best_epoch(record).values()):.1f}"
              != f"{100 * statistics.fmean(_last_epoch(record).values()):.1f}"]
    assert differ


def test_chapter_9_prints_the_text_standins_last_epoch_means(chapter_outputs):
    table = _section(chapter_outputs[0][0], "python -m gma_teach.study text")
    printed = {match[1]: match for line in table
               if (match := re.fullmatch(r"(\w+)\s+(\d+)\s+([\d.]+)(?: ± ([\d.]+))?", line))}
    records = _text_records()
    assert set(printed) == set(records)
    for arm, record in records.items():
        summary = mean_interval([100 * value for value in _last_epoch(record).values()])
        assert printed[arm][3] == f"{summary['mean']:.1f}", arm
        assert int(printed[arm][2]) == summary["n"]


def test_chapter_9_prints_each_text_seeds_last_epoch_accuracy(chapter_outputs):
    verdicts = _section(chapter_outputs[0][1], "text: majority class")
    records = _text_records()
    for arm, record in records.items():
        index = next(i for i, line in enumerate(verdicts) if line.startswith(f"  {arm}: "))
        seeds = verdicts[index + 1].split("(")[0].split()
        assert seeds == [f"{100 * value:.1f}" for value in _last_epoch(record).values()], arm


def test_chapter_9_draws_the_text_standins_last_epoch_means(chapter_outputs):
    ax = chapter_outputs[1]["fig"].axes[1]  # the Text stand-in's panel
    assert ax.get_ylabel().startswith("last-epoch test accuracy")
    solid = sorted(round(patch.get_height(), 6) for patch in ax.patches if patch.get_alpha() is None)
    expected = sorted(round(100 * statistics.fmean(_last_epoch(record).values()), 6)
                      for record in _text_records().values())
    assert solid == expected
