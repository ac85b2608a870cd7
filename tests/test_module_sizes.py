"""No module of gma_teach runs past 500 lines without a stated reason. A long module becomes a package of private
modules with one job each (as ``gma_teach.cost`` and ``gma_teach.stats`` did), or its module docstring says why it is
one file, on a line that starts with ``Size:``. Read from the source; nothing is imported."""
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "gma_teach"
MAX_LINES = 500
ALLOWED: dict[str, str] = {}
"""Modules past the limit without a ``Size:`` line that are let through for now, ``{path under gma_teach: why}``;
empty: every long module states its reason or is split."""


def size_reason(source: str) -> str | None:
    """The text after ``Size:`` on a line of the module docstring of ``source``, or ``None`` where there is none."""
    docstring = ast.get_docstring(ast.parse(source), clean=True) or ""
    for line in docstring.splitlines():
        if line.strip().startswith("Size:") and line.strip()[len("Size:"):].strip():
            return line.strip()[len("Size:"):].strip()
    return None


def oversized(sources: dict[str, str], limit: int = MAX_LINES, allowed=None) -> list[str]:
    """``"path: N lines"`` for each of ``sources`` (``{path: text}``) longer than ``limit`` lines whose docstring
    gives no ``Size:`` reason and that ``allowed`` does not list."""
    allowed = ALLOWED if allowed is None else allowed
    found = []
    for path, source in sorted(sources.items()):
        n_lines = len(source.splitlines())
        if n_lines > limit and path not in allowed and size_reason(source) is None:
            found.append(f"{path}: {n_lines} lines")
    return found


def test_no_module_is_over_500_lines_without_a_reason():
    sources = {str(path.relative_to(PACKAGE)): path.read_text(encoding="utf-8")
               for path in sorted(PACKAGE.rglob("*.py"))}
    assert len(sources) > 20
    stale = sorted(set(ALLOWED) - set(sources))
    assert not stale, f"ALLOWED lists modules that no longer exist: {stale}"
    found = oversized(sources)
    assert not found, (f"modules over {MAX_LINES} lines: split each into a package of private modules, or state "
                       "why it is one file on a 'Size:' line of its module docstring:\n" + "\n".join(found))


def test_the_check_counts_lines_and_reads_a_stated_reason():
    body = "x = 1\n" * 500
    plain = '"""A module."""\n' + body
    reasoned = '"""A module.\n\nSize: one algorithm, read top to bottom.\n"""\n' + body
    empty_reason = '"""A module.\n\nSize:\n"""\n' + body
    short = '"""A module."""\n' + "x = 1\n" * 499
    sources = {"plain.py": plain, "reasoned.py": reasoned, "empty_reason.py": empty_reason, "short.py": short,
               "listed.py": plain}
    assert size_reason(reasoned) == "one algorithm, read top to bottom."
    assert size_reason(plain) is None and size_reason(empty_reason) is None
    assert oversized(sources, allowed={"listed.py": "split elsewhere"}) == ["empty_reason.py: 504 lines",
                                                                           "plain.py: 501 lines"]
