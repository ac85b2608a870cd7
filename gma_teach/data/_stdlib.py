"""Real English that every Python installation carries: the standard library's docstrings (offline corpora)."""
from __future__ import annotations

import ast
import os

_EXCLUDED_DIRS = {"test", "tests", "idle_test", "site-packages", "dist-packages", "__pycache__"}


def docstrings_under(folder: str, min_chars: int):
    """Yield the module, class and function docstrings of at least ``min_chars`` characters of every ``.py`` file
    under ``folder``: a sorted walk (so the order depends only on the Python version), with test folders,
    installed packages and hidden folders skipped, and unreadable files ignored."""
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if d not in _EXCLUDED_DIRS and not d.startswith("."))
        for filename in sorted(f for f in filenames if f.endswith(".py")):
            try:
                with open(os.path.join(dirpath, filename), encoding="utf-8") as handle:
                    tree = ast.parse(handle.read())
            except (SyntaxError, UnicodeDecodeError, ValueError):
                continue
            for node in ast.walk(tree):
                if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                    text = ast.get_docstring(node)
                    if text and len(text) >= min_chars:
                        yield text
