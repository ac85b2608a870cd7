"""Chapter 11's Table 4 and pictures read the remedy's router, not chapter 10's default one, which may collapse.

The chapter checks chapter 10's model first (a collapsed router has nothing to read), then reads the same model
trained with ``gma_teach.LM_ROUTING_REMEDY``: every cell that computes the table or draws a picture of the
routing must come after the cell that points ``resp`` and ``gamma_q`` at the remedy's read, and no later cell may
point them elsewhere.
"""
import re
from pathlib import Path

import nbformat

CHAPTER = Path(__file__).resolve().parents[1] / "book" / "11_reading_the_routing.ipynb"
READERS = ("routing_report(resp", "plot_responsibility_heatmap", "plot_component_categories", "plot_component_usage",
           "component_summary(resp", "plot_token_strip", "plot_responsibility_pca", "routing_explorer(gamma_q")
ASSIGNS = re.compile(r"^\s*(?:ids, )?(?:gamma_q|resp)\b[^=\n]*=(?!=)", re.M)


def _code_cells() -> list[str]:
    return [cell.source for cell in nbformat.read(CHAPTER, as_version=4).cells if cell.cell_type == "code"]


def test_the_table_and_the_pictures_read_the_remedys_router():
    cells = _code_cells()
    remedy = [i for i, source in enumerate(cells) if re.search(r"gma_options=gma_teach\.LM_ROUTING_REMEDY", source)]
    assert len(remedy) == 1, "one cell trains or loads the remedy's model"
    start = remedy[0]
    assert re.search(r'^ids, gamma_q, resp = remedy_read\["ids"\], remedy_read\["gamma_q"\], remedy_read\["resp"\]',
                     cells[start], re.M)
    for reader in READERS:
        where = [i for i, source in enumerate(cells) if reader in source]
        assert where, f"no cell calls {reader}"
        assert all(i > start for i in where), f"{reader} reads a router before the remedy's"
    later = [i for i, source in enumerate(cells) if i > start and ASSIGNS.search(source)]
    assert not later, f"code cells {later} point resp or gamma_q at another router"


def test_chapter_10s_model_is_judged_before_the_remedy_is_read():
    cells = _code_cells()
    verdict = next(i for i, source in enumerate(cells) if "usage_verdict(default_metrics)" in source)
    remedy = next(i for i, source in enumerate(cells) if "LM_ROUTING_REMEDY" in source)
    assert verdict < remedy
    assert "diagnostics.routing_metrics(resp, categories)" in cells[verdict]
