"""Write :func:`gma_teach.colab.first_cell_source` into the first code cell of every chapter notebook.

    python tools/sync_first_cells.py            # rewrite book/*.ipynb where the first code cell differs
    python tools/sync_first_cells.py --check    # only report; exit status 1 if any notebook differs

The cell's outputs are cleared and it gets the ``hide-input`` tag (the book shows the environment report, not the
installer). Other cells and the notebook's metadata are left as they are.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gma_teach.colab import first_cell_source

ROOT = Path(__file__).resolve().parent.parent
HIDE_INPUT = "hide-input"


def as_lines(text: str) -> list[str]:
    """A notebook's ``source`` list: every line keeps its newline but the last."""
    lines = text.split("\n")
    return [line + "\n" for line in lines[:-1]] + [lines[-1]]


def sync(path: Path, source: str, *, check: bool = False) -> bool:
    """Make ``path``'s first code cell ``source`` (outputs cleared, tagged ``hide-input``); returns whether it
    changed (or, with ``check``, would change)."""
    notebook = json.loads(path.read_text(encoding="utf-8"))
    cell = next((c for c in notebook["cells"] if c["cell_type"] == "code"), None)
    if cell is None:
        raise ValueError(f"{path} has no code cell")
    tags = cell.setdefault("metadata", {}).get("tags", [])
    changed = "".join(cell["source"]) != source or bool(cell.get("outputs")) or HIDE_INPUT not in tags
    if changed and not check:
        cell["source"] = as_lines(source)
        cell["outputs"], cell["execution_count"] = [], None
        cell["metadata"]["tags"] = [*tags, HIDE_INPUT] if HIDE_INPUT not in tags else tags
        path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return changed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="report the notebooks that differ; change nothing")
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: every chapter, book/[0-9][0-9]*.ipynb")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted((ROOT / "book").glob("[0-9][0-9]*.ipynb"))  # every chapter, 07b included
    source = first_cell_source()
    differing = [path for path in paths if sync(path, source, check=args.check)]
    for path in differing:
        print(f"{'differs' if args.check else 'rewrote'}: {path}")
    return 1 if args.check and differing else 0


if __name__ == "__main__":
    sys.exit(main())
