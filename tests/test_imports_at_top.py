"""Imports sit at the top of each module of gma_teach; one inside a function (or under a condition) says why in a
comment: an optional dependency, a true cycle, a side effect of importing. Read from the source, nothing imported."""
import ast
import io
import re
import tokenize
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "gma_teach"
STAND_ALONE = {"colab.py"}
"""Modules whose functions import inside their bodies for a reason their docstring gives: colab's functions are
copied into every chapter's first cell, which must stand alone."""


def comments_by_line(source: str) -> dict[int, str]:
    """``{line: comment text}``, without ``noqa`` markers (a comment that only silences a linter says no why)."""
    found = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            text = re.sub(r"noqa(: *[A-Z]+[0-9]+(, *[A-Z]+[0-9]+)*)?", "", token.string.lstrip("#")).strip(" ()")
            found[token.start[0]] = text
    return found


def unexplained_imports(source: str, where: str) -> list[str]:
    """``where:line`` of each import below module level with no reason: no comment on its line, nor on the comment
    lines, imports and ``if``/``try`` lines right above it."""
    tree = ast.parse(source)
    lines = source.splitlines()
    comments = comments_by_line(source)
    top_level = {id(node) for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))}
    missing = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)) or id(node) in top_level:
            continue
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            continue
        line, explained = node.lineno, False
        while line >= 1:
            if comments.get(line):
                explained = True
                break
            above = lines[line - 2].strip() if line >= 2 else ""
            code = re.sub(r"#.*", "", above).rstrip()
            opener = code.endswith(":") and not code.startswith(("def ", "async def ", "class ", "@"))
            if not (above.startswith(("#", "import ", "from ")) or opener):  # a comment, an import, an if/try
                break
            line -= 1
        if not explained:
            missing.append(f"{where}:{node.lineno}: {lines[node.lineno - 1].strip()}")
    return missing


def test_every_import_below_module_level_says_why():
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name in STAND_ALONE:
            continue
        missing += unexplained_imports(path.read_text(encoding="utf-8"), str(path.relative_to(PACKAGE.parent)))
    assert not missing, "imports inside a function without a comment saying why:\n" + "\n".join(missing)


def test_the_check_sees_a_bare_import_and_accepts_a_reason():
    source = ("import os\n\n\ndef f():\n    import json\n    return json\n\n\n"
              "def g():\n    # optional dependency: numpy\n    import numpy\n    from numpy import linalg\n"
              "    return numpy, linalg\n\n\n"
              "def h():\n    import triton  # noqa: F401\n\n\n"
              "def k():\n    try:\n        import torch  # optional dependency\n    except ImportError:\n"
              "        return None\n\n\n"
              "if True:  # optional dependency: the fast path\n    from os import path\n")
    assert unexplained_imports(source, "m.py") == ["m.py:5: import json", "m.py:17: import triton  # noqa: F401"]
