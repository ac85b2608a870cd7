"""Chapter 8's equal-state section reads its numbers from the block record, never types them.

The record ``profiling_block_cpu.json`` (``python -m gma_teach.profiling --block``) holds the interleaved run of GMA,
its operator path, linear attention and SDPA. The chapter prints the ratios and the verdicts with
:func:`gma_teach.profiling.block_ratios` and :func:`gma_teach.profiling.block_verdicts` of that file; its prose in
that section states no decimal number but the targets. A changed record changes what the chapter prints, and a
ratio typed into the prose fails here.
"""
import re
from pathlib import Path

import nbformat
import pytest

from gma_teach import measure, profiling

CHAPTER = Path(__file__).resolve().parents[1] / "book" / "08_systems_profiling.ipynb"
RECORD = "profiling_block_cpu.json"


@pytest.fixture(scope="module")
def record():
    return profiling.load_recorded(measure.results_folder() / RECORD)


def _section():
    cells = nbformat.read(CHAPTER, as_version=4).cells
    start = next(i for i, c in enumerate(cells) if c.source.startswith("(equal-state)="))
    end = next(i for i, c in enumerate(cells) if i > start and c.source.startswith("## Exercises"))
    return cells[start:end]


def test_the_record_covers_the_issue_and_states_its_provenance(record):
    assert {"hardware", "threads", "load", "load_after", "date", "commit", "command"} <= set(record)
    assert record["command"].startswith("python -m gma_teach.profiling --block")
    config = record["config"]
    assert (config["d_model"], config["n_heads"], config["n_components"]) == (256, 4, 64)
    ratios = profiling.block_ratios(record)
    assert {(r["form"], r["seq_len"]) for r in ratios} == {
        (form, n) for form in ("bidirectional", "causal") for n in (1024, 2048, 4096, 8192, 16384)}
    assert all(r["sdpa_speed_ratio"] is not None and r["operators_memory_ratio"] is not None for r in ratios)


def test_the_chapter_prints_the_ratios_and_verdicts_from_the_record():
    code = "\n".join(c.source for c in _section() if c.cell_type == "code")
    assert RECORD in code
    assert "profiling.block_ratios(block_record)" in code and "profiling.block_verdicts(block_record)" in code


def test_the_prose_types_no_number_from_the_record(record):
    prose = "\n".join(c.source for c in _section() if c.cell_type == "markdown")
    decimals = set(re.findall(r"(?<![\w.])\d+\.\d+(?![\w.])", prose))
    assert decimals <= {str(value) for value in profiling.TARGETS.values()}, decimals


def test_the_verdicts_follow_the_record(record):
    lines = profiling.block_verdicts(record)
    ratios = profiling.block_ratios(record)
    for r, line in zip(ratios, lines):
        assert f"memory {r['memory_ratio']:.2f}x" in line and f"speed {r['speed_ratio']:.2f}x" in line
        assert ("memory" in line and "(met)" in line.split(";")[0]) == r["memory_ok"]
        assert ("(met)" in line.split(";")[1]) == r["speed_ok"]
    assert all(len(line) <= 75 for line in lines)
    assert len(lines) == len(ratios) + 2 * len({r["form"] for r in ratios if not r["speed_ok"]})
