"""The reader's build survives a failing cell, the strict build does not, and the width check finds long lines.

A throwaway book (a temporary folder with a configuration derived from ours and one notebook whose cell raises) is
built the way README's command 1 builds the book: its HTML must exist and show the error. The same notebook through
``tools/build_book.py``'s strict execution must fail and stay out of the cache.
"""
import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml

from gma_teach import measure

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import build_book  # noqa: E402  (tools/ is not a package)
import output_widths  # noqa: E402

OUR_CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())


def throwaway_book(folder: Path) -> Path:
    """A one-chapter book in ``folder`` whose second cell raises; the execution settings are ours."""
    config = {"title": "throwaway", "only_build_toc_files": True, "execute": OUR_CONFIG["execute"],
              "sphinx": {"config": {key: value for key, value in OUR_CONFIG["sphinx"]["config"].items()
                                    if key.startswith("nb_")}}}
    (folder / "_config.yml").write_text(yaml.safe_dump(config))
    (folder / "_toc.yml").write_text(yaml.safe_dump({"format": "jb-book", "root": "intro",
                                                     "chapters": [{"file": "fails"}]}))
    (folder / "intro.md").write_text("# A throwaway book\n\nOne chapter, whose cell raises.\n")
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.cells = [nbformat.v4.new_markdown_cell("# Fails\n\nThe next cell raises."),
                      nbformat.v4.new_code_cell("print('before the error')\nraise ZeroDivisionError('planted error')"),
                      nbformat.v4.new_code_cell("print('after the error')")]
    path = folder / "fails.ipynb"
    nbformat.write(notebook, path)
    return path


def test_our_config_lets_the_reader_build_go_on():
    execute = OUR_CONFIG["execute"]
    assert execute["allow_errors"] is True
    assert execute["timeout"] == -1, "a per-cell timeout can discard the whole book"
    assert OUR_CONFIG["sphinx"]["config"]["nb_execution_raise_on_error"] is False
    assert execute["execute_notebooks"] == "cache", "tools/build_book.py fills jupyter-book's cache"


def test_the_page_css_wraps_long_lines():
    config = OUR_CONFIG["sphinx"]["config"]
    (static,), (css,) = config["html_static_path"], config["html_css_files"]
    text = (ROOT / static / css).read_text()
    assert "pre-wrap" in text and "cell_output" in text


@pytest.mark.slow
def test_a_failing_cell_still_leaves_html_that_shows_the_error(tmp_path):
    throwaway_book(tmp_path)
    finished = subprocess.run(["jupyter-book", "build", str(tmp_path)], capture_output=True, text=True,
                              timeout=600)
    assert finished.returncode == 0, finished.stdout[-2000:] + finished.stderr[-2000:]
    page = tmp_path / "_build" / "html" / "fails.html"
    assert page.exists(), "no HTML for the notebook whose cell failed"
    html = page.read_text()
    assert "ZeroDivisionError" in html and "planted error" in html
    assert "after the error" in html, "the cells after the error did not run"


@pytest.mark.slow
def test_strict_execution_fails_and_caches_nothing_while_the_reader_build_caches_the_error(tmp_path):
    path = throwaway_book(tmp_path)
    cache = tmp_path / "_build" / ".jupyter_cache"
    succeeded, _, message = build_book.execute_into_cache(path, cache, strict=True)
    assert not succeeded and "CellExecutionError" in message
    assert output_widths.cached_notebooks(cache) == {}
    succeeded, _, _ = build_book.execute_into_cache(path, cache, strict=False)
    assert succeeded
    (executed,) = output_widths.cached_notebooks(cache).values()
    raising, after = [cell for cell in executed.cells if cell.cell_type == "code"]
    assert [output["output_type"] for output in raising.outputs] == ["stream", "error"]
    assert after.outputs[0]["text"] == "after the error\n"  # the cells after the error ran


@pytest.mark.slow
def test_execute_all_times_each_notebook(tmp_path):
    path = throwaway_book(tmp_path)
    timings = []
    failures = build_book.execute_all([path], "tiny", strict=False, cache_path=tmp_path / "_build" / ".jupyter_cache",
                                      timings=timings)
    assert failures == []
    (timing,) = timings
    assert timing["notebook"] == str(path) and timing["succeeded"] is True
    assert 0 < timing["seconds"] < 600 and timing["expected_seconds"] > 0 and timing["modelled"] is False


def test_toc_notebooks_are_the_book_in_reading_order():
    notebooks = build_book.toc_notebooks()
    names = [path.name for path in notebooks]
    assert names[0] == "01_quadratic_wall.ipynb" and "07b_gma_kernels.ipynb" in names
    assert names.index("07_triton_kernel.ipynb") < names.index("07b_gma_kernels.ipynb") < names.index(
        "08_systems_profiling.ipynb")
    assert all(path.exists() for path in notebooks)
    assert len(names) == len(set(names)) == len(list((ROOT / "book").rglob("*.ipynb")))  # every notebook, once


def test_every_page_of_the_book_has_an_expected_time_from_the_cost_model(tmp_path):
    from gma_teach import cost

    keys = {}
    for path in build_book.toc_notebooks():
        keys[path.relative_to(ROOT).as_posix()] = key = build_book.page_key(path)
        seconds, modelled = build_book.expected_seconds(path, "small")
        assert modelled, f"{path.relative_to(ROOT)} has no estimate"
        assert seconds == pytest.approx(cost.predict(key, "small", cost.current_profile()).seconds)
    assert keys["book/09_long_range_arena.ipynb"] == "ch09" and keys["book/07b_gma_kernels.ipynb"] == "ch07b"
    assert keys["book/answers/09_answers.ipynb"] == "answers09"
    assert keys["book/statistics_primer.ipynb"] == "statistics_primer"
    assert keys["book/part_iv_findings.ipynb"] == "part_iv_findings"
    assert sorted(keys.values()) == sorted({*cost.PAGES, *(key for key in cost.CHAPTERS if key.startswith("ch"))})
    seconds, modelled = build_book.expected_seconds(throwaway_book(tmp_path), "small")  # a notebook of no book
    assert not modelled and seconds == cost.CHAPTER_FIXED_SECONDS


def _notebook_with(outputs):
    return {"cells": [{"cell_type": "markdown", "source": "x" * 200},
                      {"cell_type": "code", "source": "y" * 200, "outputs": outputs}]}


def test_overlong_lines_finds_printed_lines_past_the_width():
    fits, wide = "a" * measure.PAGE_WIDTH, "b" * (measure.PAGE_WIDTH + 1)
    outputs = [{"output_type": "stream", "name": "stdout", "text": [f"{fits}\n", f"{wide}\n"]},
               {"output_type": "execute_result", "data": {"text/plain": f"short\n{wide}c"}},
               {"output_type": "display_data", "data": {"text/plain": wide, "image/png": "..."}},  # an image: shown
               {"output_type": "error", "ename": "E", "evalue": wide, "traceback": [wide]}]
    found = output_widths.overlong_lines(_notebook_with(outputs))
    assert found == [(1, wide), (1, wide + "c")]


def test_overlong_lines_reads_a_redrawn_line_and_colour_codes_as_shown():
    redrawn = "x" * 100 + "\r" + "done"
    coloured = "\x1b[31m" + "z" * 70 + "\x1b[0m"
    outputs = [{"output_type": "stream", "name": "stderr", "text": f"{redrawn}\n{coloured}\n"}]
    assert output_widths.overlong_lines(_notebook_with(outputs)) == []
    assert output_widths.overlong_lines(_notebook_with(outputs), width=60) == [(1, "z" * 70)]


def test_overlong_lines_rejects_a_bad_width():
    with pytest.raises(ValueError, match="width"):
        output_widths.overlong_lines(_notebook_with([]), width=0)


def test_output_widths_command_exits_nonzero_on_a_long_line(tmp_path):
    path = tmp_path / "wide.ipynb"
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    cell = nbformat.v4.new_code_cell("print('w' * 90)")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="w" * 90 + "\n")]
    notebook.cells = [cell]
    nbformat.write(notebook, path)
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    cache = get_cache(str(tmp_path / "cache"))
    cache.cache_notebook_bundle(CacheBundleIn(nbformat.read(path, as_version=4), str(path)), check_validity=False)
    finished = subprocess.run([sys.executable, str(ROOT / "tools" / "output_widths.py"), str(tmp_path / "cache")],
                              capture_output=True, text=True, timeout=120)
    assert finished.returncode == 1 and "wide.ipynb code cell 0 (90 characters)" in finished.stdout
    assert json.loads(json.dumps(output_widths.cached_notebooks(tmp_path / "cache")[str(path)]))["cells"]


FRONT_DOOR = ["README.md", "book/intro.md", "book/instructors.md", "book/troubleshooting.md"]


def _scale_table(text):
    start = text.index("| scale | where | sized for | measured |")
    return text[start:text.index("\n\n", start)]


def test_the_front_door_gives_one_build_command_and_one_scale_table():
    readme, intro = (ROOT / "README.md").read_text(), (ROOT / "book" / "intro.md").read_text()
    assert _scale_table(readme) == _scale_table(intro)
    for name in FRONT_DOOR:
        text = (ROOT / name).read_text()
        assert "jupyter-book build . -W" not in text, f"{name} gives a second build command"
        for phrase in ("not re-measured", "load average 4", "predicted by", "not yet recorded"):
            assert phrase not in text, f"{name}: {phrase!r}"
    assert "python tools/build_book.py" in readme and "python tools/build_book.py" in intro


def test_the_scale_table_quotes_the_tiny_record():
    record = json.loads((ROOT / "book" / "results" / "chapter_seconds_cpu_tiny.json").read_text())
    seconds = [chapter["seconds"] for chapter in record["chapters"]]
    loads = [chapter[key] for chapter in record["chapters"] for key in ("load_before", "load_after")]
    timed = {chapter["chapter"] for chapter in record["chapters"]}
    row = next(line for line in _scale_table((ROOT / "README.md").read_text()).splitlines()
               if line.startswith("| `tiny`"))
    last = max(int(name[2:4]) for name in timed)
    assert f"{min(seconds):.0f}-{max(seconds):.0f} s a chapter" in row
    assert f"{sum(seconds) / 60:.1f} min for chapters 1-{last}" in row
    assert ("7b included" in row) == ("ch07b" in timed) and ("without 7b" in row) == ("ch07b" not in timed)
    assert f"on {record['hardware']['logical_cores']} cores at load average {min(loads):.1f}-{max(loads):.1f}" in row


BUILD_RECORD = ROOT / "book" / "results" / "build_seconds_cpu_small.json"


def test_command_1_at_the_default_scale_is_measured_and_the_front_door_quotes_it():
    """README's command 1 (tools/build_book.py --record) at ``small`` from a fresh clone and a fresh cache: every
    notebook passed, no notebook past 8 minutes, and README, the intro, the instructors page and troubleshooting
    quote its total in minutes."""
    record = json.loads(BUILD_RECORD.read_text())
    assert record["scale"] == "small" and record["cache_was_empty"] and record["data_cache_was_empty"]
    assert not record["strict"] and re.fullmatch(r"[0-9a-f]{40}", record["commit"]), record["commit"]
    assert record["render_returncode"] == 0
    notebooks = record["notebooks"]
    assert [n["notebook"] for n in notebooks] == [str(p.relative_to(ROOT)) for p in build_book.toc_notebooks()]
    assert all(n["succeeded"] for n in notebooks)
    assert max(n["seconds"] for n in notebooks) <= 8 * 60
    total = f"{record['total_seconds'] / 60:.1f} min"
    for name in FRONT_DOOR:
        assert total in (ROOT / name).read_text(), f"{name} does not quote command 1's measured {total}"
    row = next(line for line in _scale_table((ROOT / "README.md").read_text()).splitlines()
               if line.startswith("| `small`"))
    longest = max(notebooks, key=lambda n: n["seconds"])
    assert f"{total} for command 1" in row and f"longest notebook {longest['seconds'] / 60:.1f} min" in row
    loads = [record["load"][0], *(n["load_after"] for n in notebooks)]
    assert f"{record['hardware']['logical_cores']} cores at load average {min(loads):.1f}-{max(loads):.1f}" in row
    assert "build_seconds_cpu_small.json" in row


def test_command_1_leaves_headroom_and_every_page_had_an_estimate_within_twice_its_time():
    """Command 1 at ``small`` within 13 minutes on the recording machine's two cores, so that a laptop 1.5 times
    slower stays within the 20 minutes README promises; and every notebook's estimate on the build's bar (the cost
    model on the recording machine) within a factor 2 of its measured seconds, either way. The record states the
    range of measured / expected seconds over its notebooks."""
    record = json.loads(BUILD_RECORD.read_text())
    assert record["total_seconds"] <= 13 * 60, f"command 1 took {record['total_seconds'] / 60:.1f} min"
    notebooks = record["notebooks"]
    assert all(n["modelled"] for n in notebooks), [n["notebook"] for n in notebooks if not n["modelled"]]
    ratios = {n["notebook"]: round(n["seconds"] / n["expected_seconds"], 2) for n in notebooks}
    outside = {name: ratio for name, ratio in ratios.items() if not 0.5 <= ratio <= 2.0}
    assert not outside, f"measured / expected seconds outside (0.5, 2): {outside}"
    assert record["measured_over_expected"] == build_book.measured_over_expected(notebooks)
