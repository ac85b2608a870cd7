"""Shared memory of every kernel launch, counted by Triton's own allocator for a GPU architecture, without a GPU.

:func:`shared_memory` lowers each kernel, with the tiles :func:`~gma_teach.kernels.tile_sizes` picks, to Triton's
GPU dialect for ``sm_<arch>`` and runs the compiler's shared-memory allocation pass, the step that decides how many
bytes a launch asks for (a launch that asks for more than the GPU has fails with ``OutOfResources``). It stops
before code generation, so it takes about a second per kernel on a CPU. The numbers are those of the Triton
version installed here.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import torch

from ._ops import tile_sizes
from ._precision import precisions

# Shared memory per block (opt-in maximum), bytes.
SHARED_MEMORY_LIMITS = {75: 64 * 1024, 80: 163 * 1024, 86: 99 * 1024, 89: 99 * 1024, 90: 227 * 1024}

_TRITON_DTYPES = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32"}


def launches(arch: int, dtype: torch.dtype, n_components: int, d_route: int, d_value: int,
             chunk_size: int | None = None) -> list[tuple[str, str, dict]]:
    """``(label, kernel name, constexprs)`` of every kernel launch of a forward and backward (bidirectional and
    causal) plus :func:`~gma_teach.kernels.fused_responsibilities`, with the tiles used on ``sm_<arch>``."""
    tiles = tile_sizes(n_components, d_route, d_value, arch=arch, chunk_size=chunk_size)
    precision = precisions(arch, dtype)
    common = dict(BLOCK_KT=tiles["k_tile"], BLOCK_D=tiles["block_d"])
    values = dict(common, BLOCK_DV=tiles["block_dv"])
    logits_only = dict(common, LOGIT_PRECISION=precision["LOGIT_PRECISION"])
    result = []
    for causal in (False, True):
        rows = tiles["chunk"] if causal else tiles["rows"]
        mode = "causal" if causal else "bidirectional"
        with_rows = dict(values, BLOCK_N=rows, **precision)
        result += [
            (f"log_normalizer ({mode})", "log_normalizer_kernel", dict(logits_only, BLOCK_N=rows)),
            (f"state, forward ({mode})", "state_kernel", dict(with_rows, HAS_WEIGHTS=False)),
            (f"state, backward ({mode})", "state_kernel", dict(with_rows, HAS_WEIGHTS=True)),
            (f"carry ({mode})", "carry_kernel", dict(REVERSE=causal, BLOCK_KT=tiles["k_tile"],
                                                    BLOCK_DV=tiles["block_dv"])),
            (f"output ({mode})", "output_kernel", dict(with_rows, CAUSAL=causal)),
            (f"query_token_backward ({mode})", "query_token_backward_kernel",
             dict(with_rows, CAUSAL=causal, IN_CHUNK=False)),
            *([(f"query_token_backward, in chunk ({mode})", "query_token_backward_kernel",
                dict(with_rows, CAUSAL=causal, IN_CHUNK=True))] if causal else []),
            (f"key_token_backward ({mode})", "key_token_backward_kernel", dict(with_rows, CAUSAL=causal)),
            (f"mixture_backward, queries ({mode})", "mixture_backward_kernel",
             dict(with_rows, CAUSAL=causal, KEYS=False)),
            (f"mixture_backward, keys ({mode})", "mixture_backward_kernel", dict(with_rows, CAUSAL=causal, KEYS=True)),
        ]
    result.append(("responsibility", "responsibility_kernel", dict(logits_only, BLOCK_N=tiles["rows"])))
    return result


_CACHE: dict = {}


def _allocated_bytes(requests: list) -> list[int]:
    """Shared memory of each ``(kernel_name, constexprs, pointer_dtype, arch, num_warps)``, computed by
    ``_allocate.py`` in a fresh process where Triton compiles (this one may run the interpreter), and cached."""
    keys = [json.dumps(request, sort_keys=True) for request in requests]
    missing = sorted({key for key in keys if key not in _CACHE})
    if missing:
        environment = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
        environment.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
        result = subprocess.run([sys.executable, str(Path(__file__).with_name("_allocate.py"))],
                                input="[" + ",".join(missing) + "]", capture_output=True, text=True,
                                env=environment, timeout=60 + 120 * len(missing))
        if result.returncode != 0:
            raise RuntimeError(f"counting shared memory failed (triton's compiler API may have changed):\n"
                               f"{result.stderr[-3000:]}")
        _CACHE.update(zip(missing, json.loads(result.stdout)))
    return [_CACHE[key] for key in keys]


def shared_memory(arch: int, dtype: torch.dtype, n_components: int, d_route: int, d_value: int,
                  chunk_size: int | None = None, *, only: str | None = None,
                  full_compile: bool = False) -> dict[str, int]:
    """Shared memory in bytes of every kernel launch for these sizes on ``sm_<arch>``, computed without a GPU.

    Args:
        arch: the GPU architecture as ``10 * major + minor`` (75 for a T4, 90 for an H100/H200).
        dtype: the dtype of q, k, v (bfloat16 is loaded as float32 on GPUs before sm_80, as the kernels do).
        n_components, d_route, d_value, chunk_size: the sizes of a :func:`~gma_teach.kernels.gma_triton` call.
        only: count only the launches whose label contains this text.
        full_compile: compile each launch all the way to a cubin for ``sm_<arch>`` (about half a minute each) and
            report the compiled kernel's own figure: the check that the kernels compile for that GPU.

    Returns:
        ``{label: bytes}`` for each launch of ``launches``; compare with ``SHARED_MEMORY_LIMITS[arch]``.
    """
    if dtype not in _TRITON_DTYPES:
        raise TypeError(f"dtype must be one of {list(_TRITON_DTYPES)}, got {dtype}")
    if dtype == torch.bfloat16 and arch < 80:
        dtype = torch.float32
    tiles = tile_sizes(n_components, d_route, d_value, arch=arch, chunk_size=chunk_size)
    planned = [launch for launch in launches(arch, dtype, n_components, d_route, d_value, chunk_size)
               if only is None or only in launch[0]]
    counted = _allocated_bytes([[name, constexprs, _TRITON_DTYPES[dtype], arch, tiles["num_warps"],
                                 tiles["num_stages"], bool(full_compile)] for _, name, constexprs in planned])
    return {label: count for (label, _, _), count in zip(planned, counted)}
