"""The Colab first cell (gma_teach.colab): install only when missing, a clear message and no hang without network."""
import json
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

import gma_teach
from gma_teach import colab

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "book").glob("[0-9][0-9]*.ipynb"))  # the chapters, 07b included


class FakeImporter:
    """Raises ImportError for the first ``missing`` calls, then returns a module."""

    def __init__(self, missing):
        self.missing, self.calls, self.module = missing, 0, types.ModuleType("gma_teach")

    def __call__(self, name):
        self.calls += 1
        if self.calls <= self.missing:
            raise ImportError(f"No module named {name!r}")
        return self.module


def never_install(spec, timeout):
    raise AssertionError("installed although the package is present")


def test_a_present_package_is_imported_and_nothing_installed():
    importer = FakeImporter(missing=0)
    assert colab.ensure_installed(importer=importer, installer=never_install) is importer.module
    assert colab.ensure_installed() is gma_teach  # the real importer, the real package


def test_a_missing_package_is_installed_from_the_one_spec_then_imported():
    importer, installs = FakeImporter(missing=1), []
    module = colab.ensure_installed(importer=importer, installer=lambda spec, timeout: installs.append((spec, timeout)))
    assert module is importer.module and importer.calls == 2
    assert installs == [(colab.INSTALL_SPEC, colab.INSTALL_TIMEOUT_SECONDS)]


def test_no_network_gives_a_clear_message():
    def offline(spec, timeout):
        raise subprocess.CalledProcessError(1, ["pip"], stderr="ERROR: Could not resolve host: github.com")

    with pytest.raises(RuntimeError, match=r"pip could not install 'gma_teach @ git\+https.*no network.*"
                                           r"Could not resolve host.*by hand"):
        colab.ensure_installed(importer=FakeImporter(missing=1), installer=offline)


def test_a_stalled_install_stops_at_the_timeout_with_a_message():
    def stalled(spec, timeout):
        raise subprocess.TimeoutExpired(["pip"], timeout)

    with pytest.raises(RuntimeError, match="within 7 s: is the network reachable"):
        colab.ensure_installed(importer=FakeImporter(missing=1), installer=stalled, timeout=7)


def test_a_package_still_missing_after_pip_says_so():
    with pytest.raises(RuntimeError, match="gma_teach is still missing after installing"):
        colab.ensure_installed(importer=FakeImporter(missing=2), installer=lambda spec, timeout: None)


@pytest.mark.skipif(shutil.which("git") is None, reason="pip needs git for a git+ spec")
def test_real_pip_with_an_unreachable_source_fails_fast_and_clearly():
    unreachable = "gma_teach @ git+https://127.0.0.1:9/nowhere.git"  # a refused connection: no network needed
    with pytest.raises(RuntimeError, match="pip could not install 'gma_teach @ git\\+https://127.0.0.1:9"):
        colab.ensure_installed(unreachable, importer=FakeImporter(missing=1), timeout=120)


def test_the_first_cell_embeds_the_spec_and_the_tested_logic(capsys):
    source = colab.first_cell_source()
    assert source.count(repr(colab.INSTALL_SPEC)) == 1 and "torch" not in source.split("\n", 2)[2]
    assert all(len(line) <= 120 for line in source.splitlines())
    namespace = {}
    exec(compile(source, "<first cell>", "exec"), namespace)  # the package is present: imports, then reports
    assert namespace["gma_teach"] is gma_teach
    assert "scale " in capsys.readouterr().out
    importer, installs = FakeImporter(missing=1), []
    namespace["ensure_installed"](importer=importer, installer=lambda spec, timeout: installs.append(spec))
    assert installs == [colab.INSTALL_SPEC]
    with pytest.raises(ValueError, match="spec must be a non-empty pip requirement"):
        colab.first_cell_source("  ")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_notebook_starts_with_the_first_cell(path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    first = next(c for c in cells if c["cell_type"] == "code")
    assert "".join(first["source"]) == colab.first_cell_source(), (
        f"{path.name}: run `python tools/sync_first_cells.py` to write gma_teach.colab.first_cell_source()")


def test_the_sync_tool_writes_the_first_cell_and_nothing_else(tmp_path):
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import sync_first_cells
    finally:
        sys.path.remove(str(ROOT / "tools"))
    notebook = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": ["# title"]},
                          {"cell_type": "code", "execution_count": 3, "metadata": {}, "outputs": [{"x": 1}],
                           "source": ["import gma_teach\n", "print(1)"]},
                          {"cell_type": "code", "execution_count": 4, "metadata": {}, "outputs": [],
                           "source": ["x = 1"]}],
                "metadata": {"kernelspec": {"name": "python3"}}, "nbformat": 4, "nbformat_minor": 4}
    path = tmp_path / "01_x.ipynb"
    path.write_text(json.dumps(notebook))
    assert sync_first_cells.main(["--check", str(path)]) == 1
    assert sync_first_cells.main([str(path)]) == 0
    written = json.loads(path.read_text())
    first = written["cells"][1]
    assert "".join(first["source"]) == colab.first_cell_source()
    assert first["outputs"] == [] and first["execution_count"] is None and first["metadata"]["tags"] == ["hide-input"]
    assert written["cells"][0] == notebook["cells"][0] and written["cells"][2] == notebook["cells"][2]
    assert written["metadata"] == notebook["metadata"]
    assert sync_first_cells.main(["--check", str(path)]) == 0


def test_a_notebook_opened_alone_finds_the_recorded_results(tmp_path):
    # Colab opens one notebook with no repository beside it: the records must come with the package
    chapter = next(p for p in NOTEBOOKS if p.name.startswith("10_"))
    alone = tmp_path / "colab"
    alone.mkdir()
    shutil.copy(chapter, alone / chapter.name)
    loader = ("import json, gma_teach\n"
              "from gma_teach import experiments, measure\n"
              "p = gma_teach.preset('ch10', 'small')\n"
              "records = [r for pattern in p.recorded_runs for r in experiments.load_results(pattern)]\n"
              "print(json.dumps({'folder': str(measure.results_folder()), 'n': len(records),\n"
              "                  'experiments': sorted({r['experiment'] for r in records})}))\n")
    result = subprocess.run([sys.executable, "-c", loader], cwd=alone, capture_output=True, text=True, timeout=300,
                            check=True, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                                             "HF_HUB_OFFLINE": "1", "GMA_TEACH_SCALE": "tiny"})
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert found["n"] >= 1 and found["experiments"] == ["lm"]
    folder = Path(found["folder"])
    # the installed package's gma_teach/results, or this clone's book/results (an editable install), never a folder
    # beside the notebook
    assert folder.name == "results" and folder.parent.name in ("gma_teach", "book")
    assert any(folder.glob("lm_*.json")) and alone not in folder.parents


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_notebook_reads_records_from_a_repository_path(path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    reads = code.replace("# written by", "")  # a comment may name the command that wrote a record
    assert "book/results" not in reads, f"{path.name}: read records through gma_teach.measure.results_folder()"
