"""The answers pages open like the chapters: their first code cell is ``gma_teach.colab.first_cell_source()``, so a
reader who opens one in Colab gets the same install-if-missing cell and environment report (no stale copy)."""
import json
from pathlib import Path

import pytest

from gma_teach import colab

ROOT = Path(__file__).resolve().parent.parent
ANSWERS = sorted((ROOT / "book" / "answers").glob("[0-9][0-9]*_answers.ipynb"))


def test_every_chapter_with_exercises_has_its_answers_page():
    assert [path.name[:2] for path in ANSWERS] == [f"{n:02d}" for n in range(1, 13)]


@pytest.mark.parametrize("path", ANSWERS, ids=lambda p: p.name)
def test_every_answers_page_starts_with_the_first_cell(path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    first = next(c for c in cells if c["cell_type"] == "code")
    assert "".join(first["source"]) == colab.first_cell_source(), (
        f"{path.name}: run `python tools/sync_first_cells.py {path.relative_to(ROOT)}`")
    assert "hide-input" in first["metadata"].get("tags", []) and not first.get("outputs")
