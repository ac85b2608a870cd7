"""tools/time_chapters.py times every chapter, the lettered companion 07b included."""
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import time_chapters  # noqa: E402  (tools/ is not a package)


def test_every_chapter_notebook_is_timed_in_reading_order():
    names = [time_chapters.chapter_name(path) for path in time_chapters.chapter_notebooks()]
    expected = sorted(f"ch{path.name.split('_')[0]}" for path in (ROOT / "book").glob("[0-9]*.ipynb"))
    assert names == expected
    assert "ch07b" in names and names.index("ch07") < names.index("ch07b") < names.index("ch08")


def test_an_unknown_chapter_is_named(tmp_path):
    with pytest.raises(SystemExit):
        time_chapters.main(["--chapters", "99", "--out", str(tmp_path / "out.json")])
