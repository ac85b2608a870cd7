"""Every number README.md quotes under "Measured results" is in the record it cites.

The convention (README's results section keeps it):

* the section runs from the heading ``## Measured results`` to the next ``## `` heading;
* it is read as *items*: a paragraph, with any table right below it, is one item;
* an item names its records as backticked file names or glob patterns ending in ``.json`` (``bench_core_cpu.json``,
  ``lm_*_small.json``), found in :func:`gma_teach.measure.results_folder`; an item that names none is checked
  against every record;
* every number written in the item outside backticks (and outside names: ``chapter 10``, ``GPT-2``, ``Table 3``,
  ``section 4.2``, ``Eq. (7)``) must equal, at the precision written, some number in the
  cited records: a value ``x`` of any field (configuration, metric, provenance, the paper's quoted numbers), or
  ``100 x`` for a percentage. ``1,091`` reads as 1091; ``37.4`` matches 0.37412 as a percentage or 37.42 as is. A
  sign is not read (a difference is written "lower by 0.0187", or with a minus the pattern leaves out), so a
  quoted number matches ``|x|`` too.

So a README number that no record holds, or a record that changes under a quoted number, fails this test.
"""
import json
import re
from pathlib import Path

import pytest

from gma_teach import measure

README = Path(__file__).resolve().parents[1] / "README.md"
NAMES = re.compile(r"\b(?:[Cc]hapters?|[Ss]ections?|[Tt]ables?|[Ff]igures?|[Pp]arts?)\s+[\d.,\s\-and]*\d|"
                   r"\bGPT-2\b|\bEqs?\.\s*\(\d+\)")
NUMBER = re.compile(r"(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w])|(?<![\w.])\d+(?:\.\d+)?(?![\w.]\d)")


def results_items(text: str) -> list[str]:
    """The items of README's "Measured results" section (a paragraph and the table right below it)."""
    match = re.search(r"^## Measured results\n(.*?)(?=^## )", text, flags=re.S | re.M)
    if match is None:
        raise AssertionError("README.md has no '## Measured results' section")
    items: list[str] = []
    for block in re.split(r"\n\s*\n", match.group(1).strip()):
        if block.lstrip().startswith("|") and items:
            items[-1] += "\n" + block
        else:
            items.append(block)
    return items


def cited_records(item: str, folder: Path) -> list[Path]:
    """The record files an item names (``.json`` names and patterns in backticks); all records if none."""
    patterns = re.findall(r"`([^`\s]*\.json)`", item)
    if not patterns:
        return sorted(folder.glob("*.json"))
    paths = []
    for pattern in patterns:
        found = sorted(folder.glob(Path(pattern).name))
        assert found, f"README cites `{pattern}`, which matches no record in {folder}"
        paths.extend(found)
    return paths


def quoted_numbers(item: str) -> list[str]:
    """The numbers written in an item, outside backtick spans and link targets."""
    prose = re.sub(r"`[^`]*`", " ", item)
    prose = re.sub(r"\]\([^)]*\)", "]", prose)
    prose = NAMES.sub(" ", prose)
    return NUMBER.findall(prose)


def numeric_leaves(value) -> list[float]:
    """Every number in a JSON value (bools excluded), and every number written inside its strings."""
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, (int, float)):
        return [float(value)]
    if isinstance(value, str):
        return [float(n.replace(",", "")) for n in NUMBER.findall(value)]
    if isinstance(value, dict):
        return [x for item in value.values() for x in numeric_leaves(item)]
    if isinstance(value, (list, tuple)):
        return [x for item in value for x in numeric_leaves(item)]
    return []


def supported(quoted: str, values: list[float]) -> bool:
    """Whether ``quoted`` equals some ``|x|`` or ``100 |x|`` of ``values`` at its written precision."""
    number = float(quoted.replace(",", ""))
    decimals = len(quoted.split(".")[1]) if "." in quoted else 0
    tolerance = 0.5 * 10 ** -decimals + 1e-9
    return any(abs(abs(x) - number) <= tolerance or abs(100 * abs(x) - number) <= tolerance for x in values)


def test_results_section_is_read():
    items = results_items(README.read_text(encoding="utf-8"))
    assert items and any(quoted_numbers(item) for item in items)


@pytest.mark.parametrize("index", range(len(results_items(README.read_text(encoding="utf-8")))))
def test_every_quoted_number_is_in_its_record(index):
    item = results_items(README.read_text(encoding="utf-8"))[index]
    folder = measure.results_folder()
    values = [x for path in cited_records(item, folder) for x in numeric_leaves(json.loads(path.read_text()))]
    missing = [number for number in quoted_numbers(item) if not supported(number, values)]
    assert not missing, f"README numbers {missing} are in none of the records this item cites:\n{item}"


def test_the_checker_catches_a_wrong_number(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({"val": {"perplexity": 389.93, "accuracy": 0.3741},
                                                   "config": {"n_steps": 600}}))
    item = "**LM** (`run.json`, chapter 10, GPT-2 BPE): perplexity 389.9 after 600 steps, accuracy 37.4%, 1,091 sd."
    values = [x for path in cited_records(item, tmp_path) for x in numeric_leaves(json.loads(path.read_text()))]
    assert quoted_numbers(item) == ["389.9", "600", "37.4", "1,091"]
    assert [supported(n, values) for n in quoted_numbers(item)] == [True, True, True, False]
    assert not supported("389.8", values) and supported("390", values)
    assert quoted_numbers("(chapter 9; 3 seeds), chapters 9 and 10, Table 2") == ["3"]  # one-digit names too
    assert supported("0.0187", [-0.01869]) and not supported("0.0188", [-0.01869])
    with pytest.raises(AssertionError, match="matches no record"):
        cited_records("see `missing_*.json`", tmp_path)
