"""After the build: every page in _toc.yml rendered to HTML with content, every chapter shows figures, the
bibliography rendered, no markdown table left as a paragraph of pipes on any page, MathJax loaded from the book
itself on every page that loads it (never from a CDN: an offline reader would see raw TeX), and no printed line of an
executed notebook passes the page's width (tools/output_widths.py, read from jupyter-book's cache beside the HTML).

Usage: ``python .ci/check_book.py _build/html`` (exits non-zero with the offending pages). ``tables_left_as_text``
and ``mathjax_scripts`` are importable for the tests (tests/test_book_html_check.py).
"""
import html as html_module
import pathlib
import re
import sys
from html.parser import HTMLParser
from urllib.parse import urlsplit

import yaml

from gma_teach.measure import PAGE_WIDTH

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tools"))
from output_widths import cached_notebooks, overlong_lines  # noqa: E402  (tools/ is not a package)

# A markdown table's delimiter row ("|---|:--:|") or a row of cells ("| a | b |") seen as text in a paragraph means
# the renderer left the table unparsed (myst-nb renders text/markdown outputs with commonmark, which has no tables,
# unless nb_render_markdown_format says otherwise).
_DELIMITER_ROW = re.compile(r"\|\s*:?-{3,}:?\s*\|")
_CELL_ROW = re.compile(r"^\s*\|.*\|\s*$", re.MULTILINE)


class _Paragraphs(HTMLParser):
    """Collects the text of every ``<p>`` element of a page (code blocks and tables are not paragraphs)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.paragraphs: list[str] = []
        self._depth = 0
        self._parts: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "p":
            if self._depth == 0:
                self._parts = []
            self._depth += 1

    def handle_endtag(self, tag):
        if tag == "p" and self._depth:
            self._depth -= 1
            if self._depth == 0:
                self.paragraphs.append("".join(self._parts))

    def handle_data(self, data):
        if self._depth:
            self._parts.append(data)


def tables_left_as_text(page: str) -> list[str]:
    """The paragraphs of an HTML page that hold a markdown table as text (its first 80 characters each).

    Args:
        page: the HTML of one page, as a string.

    Returns:
        one entry per paragraph with a delimiter row ``|---|`` or a line that starts and ends with ``|``; empty when
        every table on the page was rendered as a ``<table>``.
    """
    if not isinstance(page, str):
        raise TypeError(f"page must be the HTML text of a page (str), got {type(page).__name__}")
    parser = _Paragraphs()
    parser.feed(page)
    parser.close()
    return [html_module.unescape(text).strip()[:80] for text in parser.paragraphs
            if _DELIMITER_ROW.search(text) or _CELL_ROW.search(text)]


class _Scripts(HTMLParser):
    """Collects the ``src`` of every ``<script>`` element of a page."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.sources: list[str] = []

    def handle_starttag(self, tag, attrs):
        source = dict(attrs).get("src")
        if tag == "script" and source:
            self.sources.append(source)


def mathjax_scripts(page: str) -> dict[str, list[str]]:
    """The scripts of an HTML page that load MathJax, split by where they come from.

    Args:
        page: the HTML of one page, as a string.

    Returns:
        ``{"outside": [...], "local": [...]}``: each ``<script src>`` that names MathJax, ``outside`` when it is an
        address with a scheme or a host (``https://cdn...``, ``//cdn...``), ``local`` when it is a path in the book.
    """
    if not isinstance(page, str):
        raise TypeError(f"page must be the HTML text of a page (str), got {type(page).__name__}")
    parser = _Scripts()
    parser.feed(page)
    parser.close()
    found = {"outside": [], "local": []}
    for source in parser.sources:
        if "mathjax" in source.lower():
            address = urlsplit(source)
            found["outside" if address.scheme or address.netloc else "local"].append(source)
    return found


def files(node):
    if isinstance(node, dict):
        if "file" in node:
            yield node["file"]
        for value in node.values():
            yield from files(value)
    elif isinstance(node, list):
        for item in node:
            yield from files(item)


def main(html: pathlib.Path) -> None:
    toc = yaml.safe_load(pathlib.Path("_toc.yml").read_text())
    pages = [toc["root"], *files({k: v for k, v in toc.items() if k != "root"})]
    missing = [page for page in pages if not (html / f"{pathlib.Path(page).with_suffix('')}.html").exists()
               or (html / f"{pathlib.Path(page).with_suffix('')}.html").stat().st_size < 2000]
    if missing:
        sys.exit(f"pages not rendered: {missing}")
    chapters = [page for page in pages  # the chapters themselves, directly under book/ (answers pages need no figure)
                if pathlib.Path(page).parent == pathlib.Path("book") and pathlib.Path(page).name[:2].isdigit()]
    without_figures = [page for page in chapters
                       if "_images/" not in (html / f"{pathlib.Path(page).with_suffix('')}.html").read_text()]
    if without_figures:
        sys.exit(f"chapters without a rendered figure (is MPLBACKEND overriding the notebooks' inline backend?): "
                 f"{without_figures}")
    bibliography = [p for p in html.rglob("*.html") if "docutils citation" in p.read_text(errors="ignore")
                    or 'class="citation' in p.read_text(errors="ignore")]
    if not bibliography:
        sys.exit("no page carries a rendered bibliography entry")
    unrendered = {page.relative_to(html).as_posix(): found for page in sorted(html.rglob("*.html"))
                  if not {"_static", "_sources"} & set(page.relative_to(html).parts)
                  and (found := tables_left_as_text(page.read_text(errors="ignore")))}
    if unrendered:
        sys.exit("markdown tables left as text (a paragraph of pipes) on:\n" + "\n".join(
            f"{name}: {found[0]!r}" for name, found in unrendered.items()))
    pages_html = [page for page in sorted(html.rglob("*.html"))
                  if not {"_static", "_sources"} & set(page.relative_to(html).parts)]
    mathjax = {page.relative_to(html).as_posix(): (page, mathjax_scripts(page.read_text(errors="ignore")))
               for page in pages_html}
    outside = {name: found["outside"] for name, (_, found) in mathjax.items() if found["outside"]}
    if outside:
        sys.exit("MathJax loaded from outside the book (an offline reader sees raw TeX) on:\n" + "\n".join(
            f"{name}: {sources[0]}" for name, sources in outside.items()))
    absent = {name: source for name, (page, found) in mathjax.items() for source in found["local"]
              if not (page.parent / urlsplit(source).path).is_file()}
    if absent:
        sys.exit("MathJax script missing from the built book:\n" + "\n".join(
            f"{name}: {source}" for name, source in absent.items()))
    with_math = sum(bool(found["local"]) for _, found in mathjax.values())
    if not with_math:
        sys.exit("no page loads MathJax: the book's math would show as raw TeX")
    cache = html.parent / ".jupyter_cache"
    if not cache.is_dir():
        sys.exit(f"no jupyter-cache folder at {cache}: build with execute_notebooks: cache (tools/build_book.py)")
    executed = cached_notebooks(cache)
    if not executed:
        sys.exit(f"the jupyter-cache folder {cache} holds no executed notebook")
    too_wide = [f"{pathlib.Path(uri).name} code cell {index} ({len(line)} chars): {line}"
                for uri, notebook in sorted(executed.items()) for index, line in overlong_lines(notebook)]
    if too_wide:
        sys.exit(f"printed lines wider than {PAGE_WIDTH} characters:\n" + "\n".join(too_wide))
    print(f"book check: {len(pages)} pages rendered, figures in all {len(chapters)} chapters; bibliography entries "
          f"on {len(bibliography)} page(s); no table left as text; MathJax from the book on {with_math} page(s); "
          f"every printed line of {len(executed)} "
          f"executed notebooks fits {PAGE_WIDTH} characters")


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]))
