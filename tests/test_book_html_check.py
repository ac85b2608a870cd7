"""Markdown tables render as tables: the built-HTML check (.ci/check_book.py) finds a table left as a paragraph of
pipes, passes a rendered one, and our configuration renders a ``display(Markdown(table))`` output as a ``<table>``.
Math renders offline: the check fails a page that loads MathJax from outside the book, and our configuration points
every page at the copy the book serves (book/_static/mathjax).
"""
import importlib.util
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
OUR_CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
TABLE = "| arm | bits per byte |\n|---|---:|\n| sdpa | 2.10 |\n| gma | 2.14 |"


def _check_book():
    spec = importlib.util.spec_from_file_location("check_book", ROOT / ".ci" / "check_book.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _page(body: str) -> str:
    return f"<html><head><title>t</title></head><body><main>{body}</main></body></html>"


LOCAL_MATHJAX = '<script defer src="../_static/mathjax/tex-chtml-full.js?v=1"></script>'
CDN_MATHJAX = '<script defer src="https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js"></script>'
LEFT_AS_TEXT = _page(f"<h1>Findings</h1><div class='output text_markdown'><p>{TABLE}</p></div>")
RENDERED = _page("<h1>Findings</h1><div class='output text_markdown'><table><thead><tr><th>arm</th>"
                 "<th>bits per byte</th></tr></thead><tbody><tr><td>sdpa</td><td>2.10</td></tr></tbody></table></div>"
                 "<div class='highlight'><pre>display(Markdown(&quot;| a | b |&quot;))\n|---|</pre></div>"
                 "<p>A sentence with one | pipe and a code span <code>x | y</code>.</p>")


def test_a_table_left_as_text_is_found():
    found = _check_book().tables_left_as_text(LEFT_AS_TEXT)
    assert found == [TABLE[:80]]


def test_a_rendered_table_and_pipes_in_code_or_prose_pass():
    assert _check_book().tables_left_as_text(RENDERED) == []


def test_a_row_of_cells_without_a_delimiter_row_is_found():
    rows_only = _page("<p>| sdpa | 2.10 |\n| gma | 2.14 |</p>")
    assert len(_check_book().tables_left_as_text(rows_only)) == 1


def test_the_check_rejects_a_page_that_is_not_text():
    with pytest.raises(TypeError, match="page"):
        _check_book().tables_left_as_text(b"<p>| a |</p>")


def test_the_check_fails_the_build_on_a_page_with_a_table_left_as_text(tmp_path):
    """The command itself exits non-zero and names the page (the checks before it are given what they need)."""
    html = tmp_path / "_build" / "html"
    (html / "book").mkdir(parents=True)
    toc = {"format": "jb-book", "root": "book/intro"}
    (tmp_path / "_toc.yml").write_text(yaml.safe_dump(toc))
    citation = '<div class="citation">x</div>' + LOCAL_MATHJAX + "." * 2000
    (html / "_static" / "mathjax").mkdir(parents=True)
    (html / "_static" / "mathjax" / "tex-chtml-full.js").write_text("")
    (html / "book" / "intro.html").write_text(_page(citation + f"<p>{TABLE}</p>"))
    finished = subprocess.run([sys.executable, str(ROOT / ".ci" / "check_book.py"), str(html)], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)
    assert finished.returncode != 0 and "book/intro.html" in finished.stderr and "left as text" in finished.stderr
    (html / "book" / "intro.html").write_text(_page(citation))
    finished = subprocess.run([sys.executable, str(ROOT / ".ci" / "check_book.py"), str(html)], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)
    assert "left as text" not in finished.stderr  # it goes on to the next check (no jupyter-cache here)
    assert "jupyter-cache" in finished.stderr


def test_mathjax_from_a_cdn_is_found_and_the_books_own_copy_passes():
    check = _check_book()
    assert check.mathjax_scripts(_page(CDN_MATHJAX)) == {
        "outside": ["https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js"], "local": []}
    schemeless = _page('<script src="//cdnjs.cloudflare.com/ajax/libs/mathjax/3.2.2/es5/tex-svg.js"></script>')
    assert len(check.mathjax_scripts(schemeless)["outside"]) == 1
    other_scripts = _page('<script src="https://cdn.example.org/require.min.js"></script><script>x = 1</script>')
    assert check.mathjax_scripts(other_scripts) == {"outside": [], "local": []}
    assert check.mathjax_scripts(_page(LOCAL_MATHJAX)) == {
        "outside": [], "local": ["../_static/mathjax/tex-chtml-full.js?v=1"]}
    with pytest.raises(TypeError, match="page"):
        check.mathjax_scripts(b"<script></script>")


def test_the_check_fails_the_build_on_a_page_that_loads_mathjax_from_outside_the_book(tmp_path):
    html = tmp_path / "_build" / "html"
    (html / "book").mkdir(parents=True)
    (tmp_path / "_toc.yml").write_text(yaml.safe_dump({"format": "jb-book", "root": "book/intro"}))
    citation = '<div class="citation">x</div>' + "." * 2000

    def run(page):
        (html / "book" / "intro.html").write_text(_page(citation + page))
        return subprocess.run([sys.executable, str(ROOT / ".ci" / "check_book.py"), str(html)], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120).stderr

    stderr = run(CDN_MATHJAX)
    assert "outside the book" in stderr and "book/intro.html" in stderr and "cdn.jsdelivr.net" in stderr
    assert "missing" in run(LOCAL_MATHJAX) and "tex-chtml-full.js" in run(LOCAL_MATHJAX)  # no such file built
    assert "no page loads MathJax" in run("")
    (html / "_static" / "mathjax").mkdir(parents=True)
    (html / "_static" / "mathjax" / "tex-chtml-full.js").write_text("")
    assert "MathJax" not in run(LOCAL_MATHJAX) and "jupyter-cache" in run(LOCAL_MATHJAX)  # on to the next check


def test_our_config_serves_mathjax_from_the_book_with_its_fonts_and_license():
    config = OUR_CONFIG["sphinx"]["config"]
    path = config["mathjax_path"]
    assert "://" not in path and not path.startswith("//")  # relative: Sphinx reads it inside _static
    static = [ROOT / folder for folder in config["html_static_path"]]
    script = next(folder / path for folder in static if (folder / path).is_file())
    assert script.stat().st_size > 500_000 and b"MathJax" in script.read_bytes()
    assert "Apache License" in (script.parent / "LICENSE").read_text()
    fonts = script.parent / "output" / "chtml" / "fonts" / "woff-v2"  # CommonHTML loads these beside the script
    assert "chtml" not in script.name or len(list(fonts.glob("*.woff"))) >= 20


@pytest.mark.slow
def test_a_page_with_math_built_with_our_config_loads_the_books_mathjax(tmp_path):
    sphinx_config = dict(OUR_CONFIG["sphinx"]["config"])
    sphinx_config["html_static_path"] = [str(ROOT / folder) for folder in sphinx_config["html_static_path"]]
    config = {"title": "math", "only_build_toc_files": True, "execute": {"execute_notebooks": "off"},
              "parse": OUR_CONFIG["parse"], "sphinx": {"config": sphinx_config}}
    (tmp_path / "_config.yml").write_text(yaml.safe_dump(config))
    (tmp_path / "_toc.yml").write_text(yaml.safe_dump({"format": "jb-book", "root": "intro"}))
    (tmp_path / "intro.md").write_text("# Math\n\nInline $\\Gq \\Vt$ and a display:\n\n$$\n\\softmax(x)\n$$\n")
    finished = subprocess.run(["jupyter-book", "build", str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert finished.returncode == 0, finished.stdout[-2000:] + finished.stderr[-2000:]
    html = tmp_path / "_build" / "html"
    found = _check_book().mathjax_scripts((html / "intro.html").read_text())
    assert found["outside"] == [] and len(found["local"]) == 1
    assert (html / found["local"][0].split("?")[0]).is_file()


def test_our_config_parses_markdown_outputs_with_tables():
    assert OUR_CONFIG["sphinx"]["config"]["nb_render_markdown_format"] in {"myst", "gfm"}


@pytest.mark.slow
def test_a_markdown_output_table_renders_as_a_table_with_our_config(tmp_path):
    config = {"title": "tables", "only_build_toc_files": True, "execute": {"execute_notebooks": "force"},
              "parse": OUR_CONFIG["parse"],
              "sphinx": {"config": {key: value for key, value in OUR_CONFIG["sphinx"]["config"].items()
                                    if key.startswith("nb_")}}}
    (tmp_path / "_config.yml").write_text(yaml.safe_dump(config))
    (tmp_path / "_toc.yml").write_text(yaml.safe_dump({"format": "jb-book", "root": "intro",
                                                       "chapters": [{"file": "table"}]}))
    (tmp_path / "intro.md").write_text("# Tables\n\nOne page with a table printed by a cell.\n")
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.cells = [nbformat.v4.new_markdown_cell("# Table"),
                      nbformat.v4.new_code_cell(f"from IPython.display import Markdown, display\n"
                                                f"display(Markdown({TABLE!r}))")]
    nbformat.write(notebook, tmp_path / "table.ipynb")
    finished = subprocess.run(["jupyter-book", "build", str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert finished.returncode == 0, finished.stdout[-2000:] + finished.stderr[-2000:]
    page = (tmp_path / "_build" / "html" / "table.html").read_text()
    assert "<table" in page and "sdpa" in page
    assert _check_book().tables_left_as_text(page) == []
