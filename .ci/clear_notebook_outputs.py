"""Clear the outputs and execution counts of notebooks (the book commits its notebooks without them).

    python .ci/clear_notebook_outputs.py [--check] NOTEBOOK...

A notebook that has none is left byte for byte as it is; one that has some is rewritten the way Jupyter writes
notebooks (one-space indent, sorted keys). Exits 1 if any notebook had outputs (``--check``: reports them and
changes nothing), so the pre-commit hook stops a commit until the cleared files are added. Standard library only.
"""
import json
import sys
from pathlib import Path


def clear(notebook: dict) -> bool:
    """Clear every code cell's outputs and execution count in place; whether anything was there."""
    changed = False
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        if cell.get("outputs") or cell.get("execution_count") is not None:
            cell["outputs"], cell["execution_count"] = [], None
            changed = True
    return changed


def main(argv: list[str]) -> int:
    check = "--check" in argv
    paths = [Path(arg) for arg in argv if arg != "--check"]
    dirty = []
    for path in paths:
        notebook = json.loads(path.read_text(encoding="utf-8"))
        if clear(notebook):
            dirty.append(path)
            if not check:
                path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False, sort_keys=True) + "\n",
                                encoding="utf-8")
    for path in dirty:
        print(f"{path}: {'has outputs' if check else 'outputs cleared'}")
    return 1 if dirty else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
