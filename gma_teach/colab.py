"""The first cell of every chapter: install ``gma_teach`` where it is missing (a fresh Colab runtime), then report.

The cell cannot import the package to install the package, so it carries its own copy of :func:`ensure_installed`:
:func:`first_cell_source` writes that copy from this module's source (the function without its docstring) with
:data:`INSTALL_SPEC`, so the logic exists once and is tested here. ``tools/sync_first_cells.py`` writes it into
every notebook, and a test checks that each notebook's first code cell equals :func:`first_cell_source`. That is
why the copied functions import what they need inside their bodies: the cell must stand alone.

The cell never installs torch or triton (Colab ships both; a reinstall would pull gigabytes) and never waits
forever: pip runs with a timeout, and a failure (no network, say) raises :class:`RuntimeError` naming the spec and
what to do.
"""
from __future__ import annotations

import ast
import inspect
import textwrap

INSTALL_SPEC = "gma_teach @ git+https://github.com/gma-teach/gma_teach"
"""What pip installs when ``gma_teach`` is missing: the one place that names the package's source (a requirement
spec: a git URL today; ``"gma_teach"`` once the package is on PyPI)."""
INSTALL_TIMEOUT_SECONDS = 600
"""Longest wait for pip before the cell gives up with a message."""


def pip_install(spec, timeout):
    """Run ``python -m pip install -q spec`` in this interpreter; raises ``subprocess.TimeoutExpired`` after
    ``timeout`` seconds and ``subprocess.CalledProcessError`` (with pip's output) when pip fails."""
    import subprocess
    import sys

    command = [sys.executable, "-m", "pip", "install", "-q", "--retries", "1", "--timeout", "30", spec]
    subprocess.run(command, check=True, capture_output=True, text=True, timeout=timeout)


def ensure_installed(spec=INSTALL_SPEC, *, module="gma_teach", importer=None, installer=None,
                     timeout=INSTALL_TIMEOUT_SECONDS):
    """Import ``module``; if it is missing, install ``spec`` with pip first. Returns the imported module.

    Args:
        spec: the pip requirement to install (default :data:`INSTALL_SPEC`).
        module: the module to import.
        importer: ``importer(name) -> module``, raising ``ImportError`` when missing (default
            ``importlib.import_module``; tests pass fakes).
        installer: ``installer(spec, timeout)`` (default :func:`pip_install`).
        timeout: seconds pip may take.

    Raises:
        RuntimeError: pip failed or timed out (no network, a wrong spec), or the module is still missing after it;
            the message names the spec and how to install by hand.
    """
    import importlib
    import subprocess

    importer = importer or importlib.import_module
    installer = installer or pip_install
    try:
        return importer(module)
    except ImportError:
        pass
    by_hand = f"Install it by hand (pip install '{spec}', or pip install a local copy) and run this cell again."
    try:
        installer(spec, timeout)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"pip did not finish installing {spec!r} within {timeout} s: is the network reachable? "
                           f"{by_hand}") from None
    except subprocess.CalledProcessError as error:
        detail = " ".join(str(error.stderr or error.output or "").split()[-40:])
        raise RuntimeError(f"pip could not install {spec!r} (exit status {error.returncode}; no network?): "
                           f"{detail} {by_hand}") from None
    importlib.invalidate_caches()
    try:
        return importer(module)
    except ImportError as error:
        raise RuntimeError(f"{module} is still missing after installing {spec!r}: {error}. {by_hand}") from None


FIRST_CELL_HEADER = ("# Standard first cell (from gma_teach.colab.first_cell_source): install gma_teach only if it is\n"
                     "# missing, never torch or triton (Colab has them), then report the environment.\n")


def _without_docstring(function) -> str:
    """``function``'s source as written, less its docstring."""
    source = textwrap.dedent(inspect.getsource(function))
    docstring = ast.parse(source).body[0].body[0]
    lines = source.splitlines()
    del lines[docstring.lineno - 1:docstring.end_lineno]
    return "\n".join(lines)


def first_cell_source(spec: str = INSTALL_SPEC) -> str:
    """The exact text of every notebook's first code cell: :data:`INSTALL_SPEC`, a copy of :func:`pip_install` and
    :func:`ensure_installed` (without docstrings), the call, and :func:`gma_teach.env_report`."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"spec must be a non-empty pip requirement string, got {spec!r}")
    parts = [FIRST_CELL_HEADER + f"INSTALL_SPEC = {spec!r}",
             f"INSTALL_TIMEOUT_SECONDS = {INSTALL_TIMEOUT_SECONDS}",
             _without_docstring(pip_install), _without_docstring(ensure_installed),
             "gma_teach = ensure_installed()\nprint(gma_teach.env_report())"]
    return "\n\n".join(parts)
