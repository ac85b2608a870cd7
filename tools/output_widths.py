"""Printed lines that pass the page's width, in executed notebooks.

At the book theme's default width a code or output block shows about :data:`gma_teach.measure.PAGE_WIDTH`
characters; the book's CSS wraps longer lines, but a wrapped table is hard to read, so every printed line of a
chapter should fit. The lines checked
are what a reader sees as text: stream output (``print``) and the plain-text form of a result that has no HTML or
image form. Error tracebacks are not checked (a page with an error is a failure of its own).

``python tools/output_widths.py _build/.jupyter_cache`` lists the long lines of every notebook in jupyter-book's
cache; ``.ci/check_book.py`` runs the same check after the build.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

from gma_teach.measure import PAGE_WIDTH

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
RICH_FORMS = ("text/html", "image/png", "image/svg+xml", "image/jpeg", "application/vnd.jupyter.widget-view+json")


def printed_text(output: dict) -> str:
    """The text a reader sees of one notebook output ('' for an error, an image or an HTML result)."""
    kind = output.get("output_type")
    if kind == "stream":
        text = output.get("text", "")
    elif kind in ("execute_result", "display_data"):
        data = output.get("data", {})
        if any(form in data for form in RICH_FORMS):
            return ""
        text = data.get("text/plain", "")
    else:
        return ""
    text = "".join(text) if isinstance(text, list) else text
    return ANSI.sub("", text)


def overlong_lines(notebook: dict, width: int = PAGE_WIDTH) -> list[tuple[int, str]]:
    """``(cell index, line)`` for every printed line of ``notebook`` (a dict or ``NotebookNode``) longer than
    ``width`` characters. A line's carriage returns (a progress bar redrawn in place) keep only its last state."""
    if not isinstance(width, int) or width < 1:
        raise ValueError(f"width must be a positive int, got {width!r}")
    found = []
    for index, cell in enumerate(notebook.get("cells", [])):
        for output in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            for line in printed_text(output).split("\n"):
                shown = line.rsplit("\r", 1)[-1].rstrip()
                if len(shown) > width:
                    found.append((index, shown))
    return found


def cached_notebooks(cache_path: str | Path) -> dict[str, dict]:
    """``{notebook path: executed notebook}`` for every notebook in a jupyter-cache folder (the latest record of
    each)."""
    from jupyter_cache import get_cache

    cache = get_cache(str(cache_path))
    latest = {}
    for record in sorted(cache.list_cache_records(), key=lambda r: r.created):
        latest[record.uri] = record.pk
    return {uri: cache.get_cache_bundle(pk).nb for uri, pk in latest.items()}


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python tools/output_widths.py CACHE_FOLDER", file=sys.stderr)
        return 2
    failed = 0
    for uri, notebook in sorted(cached_notebooks(args[0]).items()):
        for index, line in overlong_lines(notebook):
            failed += 1
            print(f"{Path(uri).name} code cell {index} ({len(line)} characters): {line}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
