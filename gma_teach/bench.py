"""Benchmarks of the core forms: ``python -m gma_teach.bench``. The code lives in ``gma_teach.runs.bench``.
"""
from __future__ import annotations

from .runs.bench import Row, format_comparisons, main, run_benchmarks

__all__ = ["Row", "format_comparisons", "main", "run_benchmarks"]


if __name__ == "__main__":
    main()
