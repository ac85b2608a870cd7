"""A figure's prompt names a structure only where its data were measured to hold it (``gma_teach.plots.prompts``):
the check on hand-made prompts, Part IV's claims figure read from its claims and from the figure drawn, and no
hand-written prompt in the book's prose that no measurement stands behind."""
import re
from pathlib import Path

import matplotlib
import nbformat
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from gma_teach import study  # noqa: E402
from gma_teach.plots import prompts, study_figures  # noqa: E402

BOOK = Path(__file__).resolve().parents[1] / "book"


def test_a_prompt_that_names_a_structure_its_data_lack_fails():
    with pytest.raises(ValueError, match="bands"):
        prompts.checked_prompt("Look for horizontal bands.", {"bands": False})
    with pytest.raises(ValueError, match="bands"):
        prompts.checked_prompt("Look for horizontal bands.", {})  # not measured at all
    with pytest.raises(ValueError, match="diamonds"):
        prompts.checked_prompt("A diamond is a single run; the filled circles are told apart.",
                               {"filled circles": True, "diamonds": False})
    assert prompts.checked_prompt("Look for horizontal bands.", {"bands": True}) == "Look for horizontal bands."
    assert prompts.checked_prompt("The routing jumps from component to component.", {}) == (
        "The routing jumps from component to component.")
    assert prompts.named_structures("Banded rows, a DIAGONAL, hollow markers") == ["bands", "diagonal",
                                                                                    "hollow circles"]
    with pytest.raises(ValueError, match="outside STRUCTURES"):
        prompts.checked_prompt("plain", {"spirals": True})


def _drawn(claims):
    fig = study_figures.plot_claims(claims)
    try:
        return prompts.drawn_claims_markers(fig)
    finally:
        plt.close(fig)


def test_part_iv_s_figure_reading_names_what_the_figure_draws():
    claims = study.gma_claims()
    measured = prompts.claims_figure_measured(claims)
    assert measured == _drawn(claims)  # the claims' count is the figure's
    reading = prompts.claims_figure_reading(claims)
    named = set(prompts.named_structures(reading))
    assert named == {name for name, n in measured.items() if n}, (named, measured)
    for name, n in measured.items():
        if n:  # "30 filled circles", "1 exact property": the count the figure draws
            assert f"{n} {name.split()[0][:6]}" in reading, (name, n, reading)


def test_a_figure_with_no_told_apart_row_is_not_read_as_having_one():
    """Only the rows with no comparison told apart: the reading must not name filled circles, and the drawn figure
    holds none."""
    claims = [c for c in study.gma_claims() if not any(b.get("told_apart") for b in c["basis"])]
    assert claims
    assert _drawn(claims)["filled circles"] == 0
    reading = prompts.claims_figure_reading(claims)
    assert "filled circle" not in reading
    only_text = [c for c in study.gma_claims() if c["record"] == "text_standin_tables.json"]
    assert "diamond" not in prompts.claims_figure_reading(only_text)
    assert "hollow" not in prompts.claims_figure_reading(only_text)


def test_no_hand_written_prompt_in_the_book_names_a_structure():
    """A prompt in a markdown cell ("look for bands") is written before the data are read, so nothing can tie it to
    a measurement: a prompt that names a structure is printed by a cell, from its measurement."""
    prompt = re.compile(r"(?i)\b(?:look for|you will see|you should see|watch for|notice)\b[^.\n]*")
    found = []
    for path in sorted(BOOK.glob("*.ipynb")):
        for index, cell in enumerate(nbformat.read(path, as_version=4).cells):
            if cell.cell_type != "markdown":
                continue
            for match in prompt.finditer(cell.source):
                if prompts.named_structures(match.group(0)):
                    found.append(f"{path.name} cell {index}: {match.group(0)!r}")
    assert not found, "\n".join(found)
    planted = "Look for bands in the heatmap below."
    assert prompts.named_structures(prompt.search(planted).group(0)) == ["bands"]
