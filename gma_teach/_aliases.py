"""Deprecated second names: a module-level ``__getattr__`` that hands out a name kept at an old path, with a warning
that names its one path and the date it goes."""
from __future__ import annotations

import importlib
import warnings

__all__ = ["REMOVAL_DATE", "deprecated_getattr"]

REMOVAL_DATE = "2027-06-30"
"""The day the deprecated second names of the command modules (``gma_teach.study``, ``gma_teach.experiments``)
are removed; from 2026-12-03 they warn."""


def deprecated_getattr(module: str, moved: dict[str, str]):
    """A ``__getattr__`` for module ``module``: a name of ``moved`` (``name -> the module that owns it``) is
    imported from its owner with a ``DeprecationWarning`` that names the owner and :data:`REMOVAL_DATE`; any other
    name raises ``AttributeError``."""

    def __getattr__(name: str):
        if name not in moved:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        owner = moved[name]
        warnings.warn(f"{module}.{name} is a second name of {owner}.{name}, deprecated since 2026-12-03 and removed "
                      f"on {REMOVAL_DATE}; use {owner}.{name}", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(owner), name)

    return __getattr__
