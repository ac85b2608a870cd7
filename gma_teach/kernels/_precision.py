"""The precision a ``tl.dot`` multiplies float32 tiles in, and the tolerance a kernel's result is checked with.

Triton's ``tl.dot`` takes ``input_precision``: ``"ieee"`` multiplies float32 operands as they are, ``"tf32"``
rounds each operand to TF32 first (10 explicit mantissa bits, 11 significant: a relative error up to
``2^-11 ~ 4.9e-4``, or ``2^-10`` if truncated) and ``"tf32x3"`` splits each operand into a TF32 high and low
part and adds three products, which keeps about as many bits as float32. Without the argument Triton uses
``TRITON_F32_DEFAULT`` if set, else ``"tf32"``. TF32 exists only on CUDA GPUs of sm_80 and newer (A100, L4,
H100...): a T4 (sm_75) and Triton's CPU interpreter multiply in IEEE float32 whatever is asked.

This module imports neither Triton nor the rest of the package, so it works where Triton is missing.
"""
from __future__ import annotations

import os

import torch

PRECISIONS = ("ieee", "tf32x3", "tf32")

TOLERANCES = {"ieee": 1e-4, "tf32x3": 1e-4, "tf32": 3e-2}
"""Absolute tolerance by the precision of the logits GEMM, for results of order one against float64."""

DTYPE_TOLERANCES = {torch.float32: 0.0, torch.float16: 2e-2, torch.bfloat16: 3e-2}
"""Absolute tolerance by the dtype the inputs and results are stored in (their rounding)."""


def device_arch(device) -> int | None:
    """``10 * major + minor`` of a CUDA device, or None (CPU, interpreted)."""
    device = torch.device(device)
    if device.type != "cuda":
        return None
    major, minor = torch.cuda.get_device_capability(device)
    return 10 * major + minor


def precisions(arch: int | None, dtype: torch.dtype) -> dict:
    """``input_precision`` of the fp32 tl.dot calls of :mod:`gma_teach.kernels`. Logits: 3-pass TF32 on sm_80+,
    IEEE fp32 elsewhere (never one pass: it is not accurate enough, chapter 7). Every other product: the same for
    fp32 inputs, one-pass TF32 on sm_80+ for half-precision inputs (their results are rounded to 8 or 11 bits
    anyway). The interpreter ignores both."""
    if arch is not None and arch >= 80:
        return dict(LOGIT_PRECISION="tf32x3", PRECISION="tf32" if dtype != torch.float32 else "tf32x3")
    return dict(LOGIT_PRECISION="ieee", PRECISION="ieee")


def dot_precision(device, input_precision: str | None = None) -> str:
    """The precision in force for a float32 ``tl.dot(..., input_precision=input_precision)`` on ``device``.

    Args:
        device: where the kernel runs (``"cpu"`` means Triton's interpreter).
        input_precision: ``"ieee"``, ``"tf32"`` or ``"tf32x3"``; None means Triton's default
            (``TRITON_F32_DEFAULT``, else ``"tf32"``).

    Returns:
        ``input_precision`` (or the default) on a CUDA GPU of sm_80 or newer; ``"ieee"`` elsewhere, where there is
        no TF32 (older GPUs, the interpreter).
    """
    requested = input_precision or os.environ.get("TRITON_F32_DEFAULT") or "tf32"
    if requested not in PRECISIONS:
        raise ValueError(f"input_precision must be None or one of {PRECISIONS}, got {input_precision!r}")
    arch = device_arch(device)
    return requested if arch is not None and arch >= 80 else "ieee"


def tolerance(precision: str, dtype: torch.dtype = torch.float32) -> float:
    """Absolute tolerance for a kernel's result against float64, given the precision of its logits GEMM.

    It covers results of order one: responsibilities, GMA outputs for values ``|v| <~ 3``, and gradients divided
    by their largest entry, at the sizes of the book and its tests (``d_r <= 64``, ``K <= 512``, variances
    ``>= 0.3``, up to 16K tokens). Returns ``max(TOLERANCES[precision], DTYPE_TOLERANCES[dtype])``:

    * ``"tf32"``: **3e-2**. The logits are sums of terms of tens of nats that nearly cancel (chapter 7b), and one
      TF32 pass rounds every operand by up to ``2^-11`` (``2^-10`` truncated): an emulation of that rounding
      moves the responsibilities of chapter 7's kernel by 2e-3 to 7e-3 (``tests/test_tf32_tolerance.py``).
    * ``"tf32x3"`` and ``"ieee"``: **1e-4**, float32's level: float32 rounding (``2^-24``) of the same terms and
      of sums over many keys moves outputs and gradients by up to 2.4e-5 at the GPU tests' sizes (the same
      emulation). Chapter 7's old check, ``atol=1e-5``, holds only here, and without margin at large sizes.
    * dtype ``float16`` **2e-2**, ``bfloat16`` **3e-2**: inputs and results are rounded to 11 or 8 significant bits
      (``2^-11``, ``2^-8`` relative, on values up to about 3 and in every gradient), and on sm_80+ the kernels'
      products other than the logits run in one pass of TF32 for such inputs (``precisions``): emulated,
      up to 5e-3 (float16) and 1e-2 (bfloat16) at the GPU tests' sizes.

    Args:
        precision: ``"ieee"``, ``"tf32x3"`` or ``"tf32"``: the precision in force (see :func:`dot_precision`).
        dtype: the dtype of the kernel's inputs and results.
    """
    if precision not in TOLERANCES:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if dtype not in DTYPE_TOLERANCES:
        raise TypeError(f"dtype must be one of {list(DTYPE_TOLERANCES)}, got {dtype}")
    return max(TOLERANCES[precision], DTYPE_TOLERANCES[dtype])
