"""Chapter 8 states where the paper's Table 1 crosses eager softmax's memory, and the numbers are the paper's.

The prose quotes the crossing as ``$K \\approx 0.47\\,N$`` at N = 1K and ``$K \\approx 0.49\\,N$`` at N = 2K and 4K;
each must be :func:`gma_teach.profiling.paper_memory_crossing` of the paper's Table 1, rounded as printed.
"""
import re
from pathlib import Path

import nbformat

from gma_teach import profiling

CHAPTER = Path(__file__).resolve().parents[1] / "book" / "08_systems_profiling.ipynb"
QUOTED = re.compile(r"\$K \\approx (\d+\.\d+)\\,N\$")


def _prose_on_the_papers_crossing() -> str:
    cells = [cell.source for cell in nbformat.read(CHAPTER, as_version=4).cells
             if cell.cell_type == "markdown" and "Table 1 crosses at" in cell.source]
    assert len(cells) == 1, "chapter 8 should state the paper's crossing in one cell"
    return cells[0]


def _computed(n: int) -> str:
    return f"{profiling.paper_memory_crossing(n)['fraction']:.2f}"


def test_the_quoted_crossings_are_the_papers_table_1():
    quoted = QUOTED.findall(_prose_on_the_papers_crossing())
    assert _computed(2000) == _computed(4000), "the prose gives one number for N = 2K and 4K"
    assert quoted == [_computed(1000), _computed(2000)]


def test_the_quoted_rows_bracket_the_crossing_at_1k():
    text = _prose_on_the_papers_crossing()
    low, high = profiling.paper_memory_crossing(1000)["between"]
    assert f"$K = {high}$ (${high / 1000:.2f}\\,N$)" in text and f"$K = {low}$ (${low / 1000:.2f}\\,N$)" in text


def test_the_prose_no_longer_claims_the_same_crossing():
    text = "\n".join(cell.source for cell in nbformat.read(CHAPTER, as_version=4).cells
                     if cell.cell_type == "markdown")
    assert "the same crossing" not in text
