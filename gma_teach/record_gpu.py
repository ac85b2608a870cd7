"""The GPU record in one command: ``python -m gma_teach.record_gpu``. The code lives in
``gma_teach.runs.record_gpu``; this module keeps the command and the names at the path the records use.
"""
from __future__ import annotations

from .runs.record_gpu import (
    BUDGETS,
    CHUNK,
    GPU_TESTS,
    IMPLEMENTATIONS,
    LISTOPS_OVERRIDES,
    PEAKS,
    REPOSITORY,
    STAGES,
    benchmark_kernels,
    floor_seconds,
    format_row,
    gpu_slug,
    main,
    model_flops,
    peaks_for,
    plan,
    run_fla,
    run_paper,
    run_sdpa,
    run_torch,
    run_triton,
    unavailable,
)

__all__ = ["BUDGETS", "CHUNK", "GPU_TESTS", "IMPLEMENTATIONS", "LISTOPS_OVERRIDES", "PEAKS", "REPOSITORY", "STAGES",
           "benchmark_kernels", "floor_seconds", "format_row", "gpu_slug", "main", "model_flops", "peaks_for", "plan",
           "run_fla", "run_paper", "run_sdpa", "run_torch", "run_triton", "unavailable"]


if __name__ == "__main__":
    main()
