"""Chapter 11 teaches the routing information before it uses it, judges chapter 10's router by it, and reads the
router that the remedy study's declared rule picks, head by head, in Table 4 and the pictures.

The chapter first computes the information of hand-made routers (one component, near uniform, two halves, a
K-way split), then judges chapter 10's model with ``read_router`` (its information against the untrained model and
the shuffle), reads the rule and the pick from the study (``study.study_selection``), trains the picked arm, and
reads it. Every cell that computes the table or draws a picture of the routing comes after the cell that points
``resp``, ``gamma_q`` and ``heads`` at the chosen router's read, and no later cell points them elsewhere. Every
table and picture reads each head on its own (``heads``, ``head=``), never the head-averaged ``resp``. No cell
calls a router "in use" from an argmax count.
"""
import re
from pathlib import Path

import nbformat

CHAPTER = Path(__file__).resolve().parents[1] / "book" / "11_reading_the_routing.ipynb"
READERS = ("head_routing_report(heads", "plot_responsibility_heatmap", "plot_component_categories",
           "plot_component_usage", "head_component_summary(heads", "plot_token_strip", "plot_responsibility_pca",
           "routing_explorer(gamma_q", "identity_information(assignments")
FIGURES = ("plot_responsibility_heatmap", "plot_component_categories", "plot_component_usage", "plot_token_strip",
           "plot_responsibility_pca", "routing_explorer(")
ASSIGNS = re.compile(r"^\s*(?:ids, )?(?:gamma_q|resp|heads)\b(?:\s*,\s*\w+)*\s*=(?!=)", re.M)


def _code_cells() -> list[str]:
    return [cell.source for cell in nbformat.read(CHAPTER, as_version=4).cells if cell.cell_type == "code"]


def _first(cells, needle) -> int:
    return next(i for i, source in enumerate(cells) if needle in source)


def test_the_table_and_the_pictures_read_the_chosen_router():
    cells = _code_cells()
    start = _first(cells, 'ids, gamma_q, resp = chosen.read["ids"], chosen.read["gamma_q"], chosen.read["resp"]')
    assert "reading = picked_arm" in cells[start]  # chosen by the declared rule, not by what is read
    rule = _first(cells, 'selection = choice.get("selection") or on_its_own')
    assert "choice = study.follow_on_choice(designs.REMEDY_STUDY, slot_lm, slot_arm" in cells[rule]
    assert 'picked_arm = selection["arm"]' in cells[rule] and rule < start
    trained = [i for i, source in enumerate(cells) if "load_or_train_lm(lm_scale, gma_options=" in source]
    assert trained and all(i < start for i in trained), "every live router is read before one is chosen"
    for reader in READERS:
        where = [i for i, source in enumerate(cells) if reader in source]
        assert where, f"no cell calls {reader}"
        assert all(i > start for i in where), f"{reader} reads a router before the chosen one"
    later = [i for i, source in enumerate(cells) if i > start and ASSIGNS.search(source)]
    assert not later, f"code cells {later} point resp or gamma_q at another router"


def test_information_is_taught_before_chapter_10s_router_is_judged_by_it():
    cells = _code_cells()
    taught = _first(cells, "diagnostics.routing_information(rows)")
    judged = _first(cells, 'routers = {"default (chapter 10)": read_router(run)}')
    assert taught < judged < _first(cells, "load_or_train_lm(lm_scale, gma_options=")
    assert "diagnostics.information_report(" in cells[_first(cells, "def read_router")]
    assert not any("usage_verdict" in source for source in cells), "an argmax count is no verdict of use"


def test_every_table_and_picture_reads_one_head_at_a_time():
    cells = _code_cells()
    for figure in FIGURES:
        for source in (source for source in cells if figure in source):
            assert "head=shown_head" in source, f"{figure} is drawn without head=: it would average the heads"
    assert not any("routing_report(resp" in source or "component_summary(resp" in source for source in cells)


def test_every_figure_is_followed_by_a_computed_reading():
    cells = _code_cells()
    for figure in FIGURES[:-1]:
        where = _first(cells, figure)
        following = cells[where + 1]
        assert "print(" in following and "plots." not in following, f"no computed sentence after {figure}"
    prompts = [source for source in cells if "look for horizontal bands" in source]
    assert prompts and all('prompts.checked_prompt(' in source and '{"bands": bands["banded"]}' in source
                           for source in prompts), "a band prompt not checked against its measurement"
