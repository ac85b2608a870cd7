"""The book's notebooks are clean sources and the table of contents is complete.

* every notebook under book/ (chapters and answers) is valid nbformat 4, committed without outputs or execution
  counts, opens with prose and imports gma_teach; every chapter sizes its work from its preset;
* every file that _toc.yml lists exists, the numbered chapters (01 to 12, with any lettered companion such as 07b)
  are listed in order, and every notebook under book/ is listed.

The first code cell of every notebook is tests/test_colab.py's subject; running the notebooks is nbval's job (see
the README and .github/workflows).
"""
import re
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"

NOTEBOOKS = sorted(path for path in BOOK.rglob("*.ipynb") if ".ipynb_checkpoints" not in path.parts)
CHAPTERS = [path for path in NOTEBOOKS if path.parent == BOOK and re.match(r"\d\d", path.stem)]


def _entry(path: Path) -> str:
    """The _toc.yml entry of a notebook: its path from the repository root, without the suffix."""
    return path.relative_to(ROOT).with_suffix("").as_posix()


def _toc_files(node) -> list[str]:
    """Every ``file:`` entry of a sphinx-external-toc tree (root, parts, chapters, sections)."""
    found = []
    if isinstance(node, dict):
        if "file" in node:
            found.append(node["file"])
        for key in ("parts", "chapters", "sections"):
            for child in node.get(key, []):
                found.extend(_toc_files(child))
    return found


def _toc() -> dict:
    return yaml.safe_load((ROOT / "_toc.yml").read_text())


def _listed() -> list[str]:
    toc = _toc()
    return [toc["root"]] + _toc_files(toc)


def _source_file(entry: str) -> Path | None:
    for suffix in (".ipynb", ".md"):
        path = ROOT / f"{entry}{suffix}"
        if path.exists():
            return path
    return None


def test_toc_lists_every_numbered_chapter_in_order():
    listed = [entry for entry in _listed() if re.fullmatch(r"book/\d\d[^/]*", entry)]
    assert listed == sorted(_entry(path) for path in CHAPTERS)
    assert sorted({entry[5:7] for entry in listed}) == [f"{number:02d}" for number in range(1, 13)]


@pytest.mark.parametrize("entry", _listed())
def test_every_toc_entry_exists(entry):
    assert _source_file(entry) is not None, f"_toc.yml lists {entry!r} but neither {entry}.ipynb nor {entry}.md exists"


def test_every_notebook_is_in_the_toc():
    listed = set(_listed())
    missing = [str(path.relative_to(ROOT)) for path in NOTEBOOKS if _entry(path) not in listed]
    assert not missing, f"notebooks not listed in _toc.yml: {missing}"


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks under book/"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_notebook_is_clean_nbformat4(path):
    notebook = nbformat.read(path, as_version=nbformat.NO_CONVERT)
    assert notebook.nbformat == 4, f"{path.name}: nbformat {notebook.nbformat}, expected 4"
    nbformat.validate(notebook)
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        assert cell.outputs == [], f"{path.name}: code cell {index} has stored outputs; clear them before committing"
        assert cell.execution_count is None, f"{path.name}: code cell {index} has an execution count"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_notebook_opens_with_prose_and_has_code(path):
    notebook = nbformat.read(path, as_version=4)
    assert notebook.cells and notebook.cells[0].cell_type == "markdown", \
        f"{path.name}: should open with prose (title and goals)"
    assert any(cell.cell_type == "code" for cell in notebook.cells), f"{path.name}: no code cells"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_notebook_imports_gma_teach_and_sizes_from_its_preset(path):
    notebook = nbformat.read(path, as_version=4)
    source = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "code")
    assert "import gma_teach" in source
    if path in CHAPTERS:
        pattern = r"preset\(\s*[\"']ch" + path.stem[:2]
        assert re.search(pattern, source), f"{path.name}: sizes must come from gma_teach.preset('ch{path.stem[:2]}')"


def _book_texts():
    for path in sorted(BOOK.glob("*.md")):
        yield path, path.read_text()
    for path in NOTEBOOKS:
        notebook = nbformat.read(path, as_version=4)
        yield path, "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "markdown")


def test_every_citation_is_in_the_bibliography():
    keys = set(re.findall(r"^@\w+\{([^,\s]+),", (BOOK / "references.bib").read_text(), flags=re.M))
    for path, text in _book_texts():
        for group in re.findall(r"\{cite(?::\w+)?\}`([^`]+)`", text):
            for key in group.split(","):
                assert key.strip() in keys, f"{path.name} cites {key.strip()!r}, which book/references.bib lacks"


def test_api_reference_modules_import():
    import importlib

    modules = re.findall(r"\.\. automodule:: (\S+)", (BOOK / "api.md").read_text())
    assert "gma_teach" in modules
    for module in modules:
        importlib.import_module(module)
