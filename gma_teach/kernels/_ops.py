"""Launchers, the differentiable custom op and the public wrapper around the Triton kernels.

The op ``gma_teach::gma_forward`` takes the mixture as ``(w_sq, w_lin, bias)`` (see ``_triton_kernels``); torch
derives them from ``(means, variances, log_priors)`` in :func:`gma_triton`, so autograd carries the mixture
gradients back to the parameters. The backward op returns per-token gradients computed by the kernels and
mixture gradients summed, in a fixed order, from per-program partials.
"""
from __future__ import annotations

import concurrent.futures
import math
import warnings

import torch
import triton
from triton.runtime.errors import OutOfResources

from . import _triton_kernels as kernels
from ._environment import interpreting

_FLOAT_INPUTS = (torch.float16, torch.bfloat16, torch.float32)
_MAX_COMPONENTS = 512
_MAX_FEATURES = 256
BLOCK_N = 64
DEFAULT_CHUNK = 64
CHUNK_SIZES = (16, 32, 64, 128)


def supports(dtype: torch.dtype, n_components: int, d: int, d_v: int, chunk_size: int | None) -> bool:
    """Whether :func:`gma_triton` accepts these sizes (``impl="auto"`` asks before choosing the kernels)."""
    return (dtype in _FLOAT_INPUTS and 1 <= n_components <= _MAX_COMPONENTS and max(d, d_v) <= _MAX_FEATURES
            and (chunk_size is None or chunk_size in CHUNK_SIZES))


def _block(size: int) -> int:
    """Tile size covering ``size`` entries: a power of two, at least 16 (tl.dot's minimum on a GPU)."""
    return max(16, triton.next_power_of_2(size))


def _precisions(device: torch.device, dtype: torch.dtype) -> dict:
    """``input_precision`` of the fp32 tl.dot calls. Logits: 3-pass TF32 on sm_80+, IEEE fp32 elsewhere (never
    one pass: it is not accurate enough, chapter 7). Every other product: the same for fp32 inputs, one-pass TF32
    on sm_80+ for half-precision inputs (their results are rounded to 8 or 11 bits anyway). The interpreter
    ignores both."""
    if device.type == "cuda" and torch.cuda.get_device_capability(device)[0] >= 8:
        return dict(LOGIT_PRECISION="tf32x3", PRECISION="tf32" if dtype != torch.float32 else "tf32x3")
    return dict(LOGIT_PRECISION="ieee", PRECISION="ieee")


def _launch_options(block_k: int, block_rows: int, block_other: int) -> dict:
    if interpreting():
        return {}
    return {"num_warps": 8 if block_k * max(block_rows, block_other) > 8192 else 4}


_FITTING_BLOCK: dict = {}


def _fitting(key: tuple, preferred: int, launch):
    """Run ``launch(block)`` with the largest block <= ``preferred`` (halving down to 16) whose tiles fit the GPU's
    shared memory and registers, remembering the answer per ``key``. The result does not depend on the block:
    it only decides how tokens are grouped into tiles (for the causal kernels, the chunk length)."""
    block = min(preferred, _FITTING_BLOCK.get(key, preferred))
    while True:
        try:
            result = launch(block)
        except OutOfResources:
            if block <= 16:
                raise
            block //= 2
            continue
        _FITTING_BLOCK[key] = block
        return result


def _splits(n_blocks: int, batch_heads: int, device: torch.device) -> tuple[int, int]:
    """(blocks per program, programs per (batch, head)) for the reductions over N: enough programs to fill
    the GPU (about four per multiprocessor), never more than one per block."""
    if device.type == "cuda":
        target = 4 * torch.cuda.get_device_properties(device).multi_processor_count
    else:
        target = 1
    n_splits = max(1, min(n_blocks, math.ceil(target / batch_heads)))
    per_split = math.ceil(n_blocks / n_splits)
    return per_split, math.ceil(n_blocks / per_split)


def _sizes(q, k, v, w_sq):
    batch, heads, n_q, d = q.shape
    n_k, d_v = k.shape[2], v.shape[3]
    n_components = w_sq.shape[1]
    return batch, heads, n_q, n_k, d, d_v, n_components


# ----------------------------------------------------------------------------------------------------------------
# Forward
# ----------------------------------------------------------------------------------------------------------------
def _write(k, v, w_sq, w_lin, bias):
    """Memory S (B, H, K, dv) and normalizer z (B, H, K), fp32, summed over the keys in a fixed order."""
    batch, heads, _, n_k, d, d_v, n_components = _sizes(k, k, v, w_sq)
    block_k, block_d, block_dv = _block(n_components), _block(d), _block(d_v)

    def launch(block_n):
        per_split, n_splits = _splits(triton.cdiv(n_k, block_n), batch * heads, k.device)
        memory_parts = torch.empty(batch * heads, n_splits, n_components, d_v, device=k.device, dtype=torch.float32)
        normalizer_parts = torch.empty(batch * heads, n_splits, n_components, device=k.device, dtype=torch.float32)
        kernels.write_kernel[(batch * heads, n_splits)](
            k, v, w_sq, w_lin, bias, memory_parts, normalizer_parts, heads, n_k, n_components, d, d_v, per_split,
            n_splits, BLOCK_N=block_n, BLOCK_K=block_k, BLOCK_D=block_d, BLOCK_DV=block_dv,
            **_precisions(k.device, v.dtype), **_launch_options(block_k, block_n, block_dv))
        return memory_parts, normalizer_parts

    memory_parts, normalizer_parts = _fitting(("write", block_k, block_d, block_dv, v.dtype, k.device), BLOCK_N, launch)
    memory = memory_parts.sum(1).view(batch, heads, n_components, d_v)
    normalizer = normalizer_parts.sum(1).view(batch, heads, n_components)
    return memory, normalizer


def _read(q, memory, normalizer, w_sq, w_lin, bias, eps, out_dtype):
    batch, heads, n_q, d = q.shape
    n_components, d_v = memory.shape[2], memory.shape[3]
    block_k, block_d, block_dv = _block(n_components), _block(d), _block(d_v)
    out = torch.empty(batch, heads, n_q, d_v, device=q.device, dtype=out_dtype)

    def launch(block_n):
        kernels.read_kernel[(batch * heads, triton.cdiv(n_q, block_n))](
            q, memory, normalizer, w_sq, w_lin, bias, out, heads, n_q, n_components, d, d_v, eps,
            BLOCK_N=block_n, BLOCK_K=block_k, BLOCK_D=block_d, BLOCK_DV=block_dv, **_precisions(q.device, out_dtype),
            **_launch_options(block_k, block_n, block_dv))

    _fitting(("read", block_k, block_d, block_dv, out_dtype, q.device), BLOCK_N, launch)
    return out


def _causal_forward(q, k, v, w_sq, w_lin, bias, eps, chunk_size, out_dtype):
    batch, heads, n, _, d, d_v, n_components = _sizes(q, k, v, w_sq)
    block_k, block_d, block_dv = _block(n_components), _block(d), _block(d_v)
    out = torch.empty(batch, heads, n, d_v, device=q.device, dtype=out_dtype)

    def launch(chunk):
        kernels.causal_forward_kernel[(batch * heads,)](
            q, k, v, w_sq, w_lin, bias, out, heads, n, n_components, d, d_v, eps, CHUNK=chunk, BLOCK_K=block_k,
            BLOCK_D=block_d, BLOCK_DV=block_dv, **_precisions(q.device, v.dtype),
            **_launch_options(block_k, chunk, block_dv))

    _fitting(("causal_forward", block_k, block_d, block_dv, v.dtype, q.device), chunk_size, launch)
    return out


def _torch_responsibilities(x, w_sq, w_lin, bias):
    x = x.float()
    return torch.softmax((x * x) @ w_sq.transpose(-1, -2) + x @ w_lin.transpose(-1, -2) + bias[:, None, :], dim=-1)


def _torch_forward(q, k, v, w_sq, w_lin, bias, causal, eps):
    """The kernels' math in torch (fp32): ``(out, memory, normalizer)`` like :func:`gma_forward`. Used only where a
    kernel's tiles do not fit the GPU even at 16 rows (see :func:`_with_torch_fallback`)."""
    from ..mixing import gma_from_responsibilities

    gamma_q, gamma_k = (_torch_responsibilities(x, w_sq, w_lin, bias) for x in (q, k))
    if causal:
        out = gma_from_responsibilities(gamma_q, gamma_k, v.float(), causal=True, eps=eps, impl="chunked")
        empty = q.new_empty(0, dtype=torch.float32)
        return out, empty, empty.clone()
    memory, normalizer = gamma_k.transpose(-1, -2) @ v.float(), gamma_k.sum(-2)
    return (gamma_q @ memory) / (gamma_q @ normalizer[..., None] + eps), memory, normalizer


def _with_torch_fallback(what, shapes, kernel_path, torch_path):
    """Run ``kernel_path()``; if its tiles do not fit this GPU at any block size, warn and run ``torch_path()``."""
    try:
        return kernel_path()
    except OutOfResources as error:
        warnings.warn(f"gma_teach.kernels: the {what} tiles for {shapes} do not fit this GPU even at 16 rows "
                      f"({error}); computing the {what} with torch instead", RuntimeWarning, stacklevel=3)
        return torch_path()


@torch.library.custom_op("gma_teach::gma_forward", mutates_args=())
def gma_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, w_sq: torch.Tensor, w_lin: torch.Tensor,
                bias: torch.Tensor, causal: bool, eps: float, chunk_size: int,
                out_dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(out (B, H, Nq, dv), memory (B, H, K, dv), normalizer (B, H, K)); memory and normalizer are the fp32
    write-pass results kept for the backward (empty for causal, whose state is recomputed)."""
    def kernel_path():
        if causal:
            out = _causal_forward(q, k, v, w_sq, w_lin, bias, eps, chunk_size, out_dtype)
            empty = q.new_empty(0, dtype=torch.float32)
            return out, empty, empty.clone()
        memory, normalizer = _write(k, v, w_sq, w_lin, bias)
        return _read(q, memory, normalizer, w_sq, w_lin, bias, eps, out_dtype), memory, normalizer

    def torch_path():
        out, memory, normalizer = _torch_forward(q, k, v, w_sq, w_lin, bias, causal, eps)
        return out.to(out_dtype), memory, normalizer

    return _with_torch_fallback("forward", _shape_text(q, k, v, w_sq), kernel_path, torch_path)


def _shape_text(q, k, v, w_sq):
    return f"K={w_sq.shape[1]}, d={q.shape[3]}, d_v={v.shape[3]}, {q.dtype}"


@gma_forward.register_fake
def _(q, k, v, w_sq, w_lin, bias, causal, eps, chunk_size, out_dtype):
    batch, heads, n_q, _, _, d_v, n_components = _sizes(q, k, v, w_sq)
    out = q.new_empty(batch, heads, n_q, d_v, dtype=out_dtype)
    if causal:
        return out, q.new_empty(0, dtype=torch.float32), q.new_empty(0, dtype=torch.float32)
    return (out, q.new_empty(batch, heads, n_components, d_v, dtype=torch.float32),
            q.new_empty(batch, heads, n_components, dtype=torch.float32))


# ----------------------------------------------------------------------------------------------------------------
# Backward
# ----------------------------------------------------------------------------------------------------------------
def _mixture_grads(parts, batch, heads, n_components, d):
    """Sum per-program partials (B*H*slots, ...) over batch and slots, in a fixed order, to (H, ...)."""
    d_w_sq, d_w_lin, d_bias = parts
    d_w_sq = d_w_sq.view(batch, heads, -1, n_components, d).sum((0, 2))
    d_w_lin = d_w_lin.view(batch, heads, -1, n_components, d).sum((0, 2))
    return d_w_sq, d_w_lin, d_bias.view(batch, heads, -1, n_components).sum((0, 2))


def _mixture_parts(slots, n_components, d, device):
    return (torch.empty(slots, n_components, d, device=device, dtype=torch.float32),
            torch.empty(slots, n_components, d, device=device, dtype=torch.float32),
            torch.empty(slots, n_components, device=device, dtype=torch.float32))


def _bidirectional_backward(d_out, q, k, v, w_sq, w_lin, bias, memory, normalizer, eps):
    batch, heads, n_q, n_k, d, d_v, n_components = _sizes(q, k, v, w_sq)
    block_k, block_d, block_dv = _block(n_components), _block(d), _block(d_v)
    device, bh = q.device, batch * heads
    sizes = dict(BLOCK_K=block_k, BLOCK_D=block_d, BLOCK_DV=block_dv, **_precisions(device, v.dtype))
    d_q = torch.empty(q.shape, device=device, dtype=torch.float32)

    def launch_queries(block_n):
        per_split, n_splits = _splits(triton.cdiv(n_q, block_n), bh, device)
        d_memory_parts = torch.empty(bh, n_splits, n_components, d_v, device=device, dtype=torch.float32)
        d_normalizer_parts = torch.empty(bh, n_splits, n_components, device=device, dtype=torch.float32)
        parts = _mixture_parts(bh * n_splits, n_components, d, device)
        kernels.query_backward_kernel[(bh, n_splits)](
            q, d_out, memory, normalizer, w_sq, w_lin, bias, d_q, d_memory_parts, d_normalizer_parts, *parts,
            heads, n_q, n_components, d, d_v, eps, per_split, n_splits, BLOCK_N=block_n, **sizes,
            **_launch_options(block_k, block_n, max(block_dv, block_d)))
        return d_memory_parts.sum(1), d_normalizer_parts.sum(1), parts

    d_memory, d_normalizer, query_parts = _fitting(
        ("query_backward", block_k, block_d, block_dv, v.dtype, device), BLOCK_N, launch_queries)
    d_k = torch.empty(k.shape, device=device, dtype=torch.float32)
    d_v_ = torch.empty(v.shape, device=device, dtype=torch.float32)

    def launch_keys(block_n):
        per_split, n_splits = _splits(triton.cdiv(n_k, block_n), bh, device)
        parts = _mixture_parts(bh * n_splits, n_components, d, device)
        kernels.key_backward_kernel[(bh, n_splits)](
            k, v, d_memory, d_normalizer, w_sq, w_lin, bias, d_k, d_v_, *parts, heads, n_k, n_components, d, d_v,
            per_split, n_splits, BLOCK_N=block_n, **sizes, **_launch_options(block_k, block_n, max(block_dv, block_d)))
        return parts

    key_parts = _fitting(("key_backward", block_k, block_d, block_dv, v.dtype, device), BLOCK_N, launch_keys)
    query_grads = _mixture_grads(query_parts, batch, heads, n_components, d)
    key_grads = _mixture_grads(key_parts, batch, heads, n_components, d)
    return (d_q, d_k, d_v_, *(a + b for a, b in zip(query_grads, key_grads)))


def _causal_backward(d_out, q, k, v, w_sq, w_lin, bias, eps, chunk_size):
    batch, heads, n, _, d, d_v, n_components = _sizes(q, k, v, w_sq)
    block_k, block_d, block_dv = _block(n_components), _block(d), _block(d_v)
    device, bh = q.device, batch * heads
    sizes = dict(BLOCK_K=block_k, BLOCK_D=block_d, BLOCK_DV=block_dv, **_precisions(device, v.dtype))
    d_q = torch.empty(q.shape, device=device, dtype=torch.float32)
    d_num = torch.empty(batch, heads, n, d_v, device=device, dtype=torch.float32)
    d_den = torch.empty(batch, heads, n, device=device, dtype=torch.float32)
    query_parts = _mixture_parts(bh, n_components, d, device)
    d_k = torch.empty(k.shape, device=device, dtype=torch.float32)
    d_v_ = torch.empty(v.shape, device=device, dtype=torch.float32)
    key_parts = _mixture_parts(bh, n_components, d, device)

    def launch_queries(chunk):
        kernels.causal_query_backward_kernel[(bh,)](
            q, k, v, d_out, w_sq, w_lin, bias, d_q, d_num, d_den, *query_parts, heads, n, n_components, d, d_v, eps,
            CHUNK=chunk, **sizes, **_launch_options(block_k, chunk, max(block_dv, block_d)))

    def launch_keys(chunk):
        kernels.causal_key_backward_kernel[(bh,)](
            q, k, v, d_num, d_den, w_sq, w_lin, bias, d_k, d_v_, *key_parts, heads, n, n_components, d, d_v,
            CHUNK=chunk, **sizes, **_launch_options(block_k, chunk, max(block_dv, block_d)))

    _fitting(("causal_query_backward", block_k, block_d, block_dv, v.dtype, device), chunk_size, launch_queries)
    _fitting(("causal_key_backward", block_k, block_d, block_dv, v.dtype, device), chunk_size, launch_keys)
    query_grads = _mixture_grads(query_parts, batch, heads, n_components, d)
    key_grads = _mixture_grads(key_parts, batch, heads, n_components, d)
    return (d_q, d_k, d_v_, *(a + b for a, b in zip(query_grads, key_grads)))


@torch.library.custom_op("gma_teach::gma_backward", mutates_args=())
def gma_backward(d_out: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, w_sq: torch.Tensor,
                 w_lin: torch.Tensor, bias: torch.Tensor, memory: torch.Tensor, normalizer: torch.Tensor,
                 causal: bool, eps: float, chunk_size: int) -> list[torch.Tensor]:
    """[d_q, d_k, d_v] in the inputs' dtypes and [d_w_sq, d_w_lin, d_bias] in fp32, recomputing Gamma."""
    d_out = d_out.contiguous()

    def kernel_path():
        if causal:
            return _causal_backward(d_out, q, k, v, w_sq, w_lin, bias, eps, chunk_size)
        return _bidirectional_backward(d_out, q, k, v, w_sq, w_lin, bias, memory, normalizer, eps)

    def gradients():
        inputs = [t.detach().requires_grad_() for t in (q, k, v, w_sq, w_lin, bias)]
        out, _, _ = _torch_forward(*inputs, causal, eps)
        return torch.autograd.grad(out, inputs, d_out.float())

    def torch_path():  # a custom op's body runs below autograd; a fresh thread starts with autograd on
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(gradients).result()

    d_q, d_k, d_v, *mixture = _with_torch_fallback("backward", _shape_text(q, k, v, w_sq), kernel_path, torch_path)
    return [d_q.to(q.dtype), d_k.to(k.dtype), d_v.to(v.dtype), *mixture]


@gma_backward.register_fake
def _(d_out, q, k, v, w_sq, w_lin, bias, memory, normalizer, causal, eps, chunk_size):
    return [torch.empty_like(q), torch.empty_like(k), torch.empty_like(v), torch.empty_like(w_sq),
            torch.empty_like(w_lin), torch.empty_like(bias)]


def _setup_context(ctx, inputs, output):
    q, k, v, w_sq, w_lin, bias, causal, eps, chunk_size, _ = inputs
    _, memory, normalizer = output
    ctx.save_for_backward(q, k, v, w_sq, w_lin, bias, memory, normalizer)
    ctx.causal, ctx.eps, ctx.chunk_size = causal, eps, chunk_size


def _backward(ctx, d_out, _d_memory, _d_normalizer):
    q, k, v, w_sq, w_lin, bias, memory, normalizer = ctx.saved_tensors
    grads = gma_backward(d_out, q, k, v, w_sq, w_lin, bias, memory, normalizer, ctx.causal, ctx.eps, ctx.chunk_size)
    return (*grads, None, None, None, None)


gma_forward.register_autograd(_backward, setup_context=_setup_context)


# ----------------------------------------------------------------------------------------------------------------
# Public functions
# ----------------------------------------------------------------------------------------------------------------
def mixture_tables(means: torch.Tensor, variances: torch.Tensor, log_priors: torch.Tensor):
    """``(w_sq, w_lin, bias)`` in fp32 such that ``logits = (x*x) @ w_sq^T + x @ w_lin^T + bias``.

    Args:
        means, variances: ``(H, K, d)``; log_priors: ``(H, K)``.

    Returns:
        ``w_sq = -0.5 / variances`` and ``w_lin = means / variances`` of shape ``(H, K, d)``, and
        ``bias = log_priors - 0.5 * sum_d (log variances + means**2 / variances)`` of shape ``(H, K)``
        (the ``(2 pi)^(d/2)`` constant cancels in the softmax). Differentiable.
    """
    means, variances, log_priors = means.float(), variances.float(), log_priors.float()
    w_sq = -0.5 / variances
    w_lin = means / variances
    bias = log_priors - 0.5 * (variances.log() + means * w_lin).sum(-1)
    return w_sq.contiguous(), w_lin.contiguous(), bias.contiguous()


def _check_tensor(name, value):
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")


def _validate(q, k, v, means, variances, log_priors, causal, eps, chunk_size):
    for name, value in zip(("q", "k", "v", "means", "variances", "log_priors"),
                           (q, k, v, means, variances, log_priors)):
        _check_tensor(name, value)
    for name, value in (("q", q), ("k", k), ("v", v)):
        if value.dim() != 4:
            raise ValueError(f"{name} must have shape (B, H, N, features), got shape {tuple(value.shape)}")
        if value.dtype not in _FLOAT_INPUTS:
            raise TypeError(f"{name} must be float16, bfloat16 or float32 for the Triton kernels, got {value.dtype} "
                            "(use gma(..., impl='linear') or 'chunked' for float64)")
    for name, value in (("means", means), ("variances", variances), ("log_priors", log_priors)):
        if not value.dtype.is_floating_point:
            raise TypeError(f"{name} must be a floating-point tensor, got {value.dtype}")
    batch, heads, n_q, d = q.shape
    if k.shape[:2] != (batch, heads) or k.shape[3] != d:
        raise ValueError(f"k must have shape (B, H, Nk, d) = ({batch}, {heads}, Nk, {d}) to match q "
                         f"{tuple(q.shape)}, got {tuple(k.shape)}")
    n_k = k.shape[2]
    if v.shape[:3] != (batch, heads, n_k):
        raise ValueError(f"v must have shape (B, H, Nk, dv) = ({batch}, {heads}, {n_k}, dv) to match k "
                         f"{tuple(k.shape)}, got {tuple(v.shape)}")
    if min(n_q, n_k, d, v.shape[3]) < 1:
        raise ValueError(f"q, k, v need at least one token and one feature, got shapes {tuple(q.shape)}, "
                         f"{tuple(k.shape)}, {tuple(v.shape)}")
    if means.dim() != 3 or means.shape[0] != heads or means.shape[2] != d:
        raise ValueError(f"means must have shape (H, K, d) = ({heads}, K, {d}), got {tuple(means.shape)}")
    n_components = means.shape[1]
    if variances.shape != means.shape:
        raise ValueError(f"variances must have the shape of means {tuple(means.shape)}, got "
                         f"{tuple(variances.shape)}")
    if log_priors.shape != (heads, n_components):
        raise ValueError(f"log_priors must have shape (H, K) = ({heads}, {n_components}), got "
                         f"{tuple(log_priors.shape)}")
    if not 1 <= n_components <= _MAX_COMPONENTS:
        raise ValueError(f"means must have 1 <= K <= {_MAX_COMPONENTS} components for the Triton kernels "
                         f"(one K tile in registers), got K={n_components}")
    if max(d, v.shape[3]) > _MAX_FEATURES:
        raise ValueError(f"the Triton kernels support d, dv <= {_MAX_FEATURES}, got d={d}, dv={v.shape[3]}")
    devices = {t.device for t in (q, k, v, means, variances, log_priors)}
    if len(devices) > 1:
        raise ValueError(f"q, k, v, means, variances, log_priors must be on one device, got "
                         f"{[str(t.device) for t in (q, k, v, means, variances, log_priors)]}")
    if not isinstance(eps, (int, float)) or isinstance(eps, bool) or not (0 < eps < math.inf):
        raise ValueError(f"eps must be a positive finite number, got {eps!r}")
    if causal and n_q != n_k:
        raise ValueError(f"causal GMA needs as many queries as keys (self-attention), got Nq={n_q}, Nk={n_k}")
    if chunk_size is not None and (not isinstance(chunk_size, int) or isinstance(chunk_size, bool)
                                   or chunk_size not in CHUNK_SIZES):
        raise ValueError(f"chunk_size must be None or one of {CHUNK_SIZES} (a tl.dot tile), got {chunk_size!r}")
    if not torch.compiler.is_compiling() and not bool((variances > 0).all()):
        raise ValueError("variances must be strictly positive")
    _check_device(q.device)


def _check_device(device: torch.device) -> None:
    if interpreting():
        if device.type != "cpu":
            raise ValueError(f"Triton runs interpreted (TRITON_INTERPRET=1) in this process: the kernels need CPU "
                             f"tensors, got {device}. Unset TRITON_INTERPRET before Python starts to compile for CUDA")
    elif device.type != "cuda":
        raise ValueError(f"the compiled Triton kernels need CUDA tensors, got {device}; on a CPU-only machine "
                         "gma_teach runs them in Triton's interpreter automatically")


def _without_bf16(device: torch.device) -> bool:
    """True where Triton cannot load bf16 tiles correctly: the interpreter (it multiplies raw bit patterns) and
    GPUs older than sm_80 (e.g. Colab's T4)."""
    return interpreting() or (device.type == "cuda" and torch.cuda.get_device_capability(device)[0] < 8)


def gma_triton(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, means: torch.Tensor, variances: torch.Tensor,
               log_priors: torch.Tensor, *, causal: bool, eps: float, chunk_size: int | None = None) -> torch.Tensor:
    """Gaussian Mixture Attention with fused Triton kernels; Gamma is recomputed, never stored.

    Args:
        q: ``(B, H, Nq, d)`` query routing vectors; k: ``(B, H, Nk, d)``; v: ``(B, H, Nk, dv)``
            (float16, bfloat16 or float32; computed in fp32).
        means, variances: ``(H, K, d)``; log_priors: ``(H, K)`` (any float dtype; used in fp32).
        causal: prefix (autoregressive) GMA; needs ``Nq == Nk``.
        eps: the positive constant added to the denominator.
        chunk_size: causal chunk length (16, 32, 64 or 128); ``None`` means 64.

    Returns:
        ``(B, H, Nq, dv)`` in v's dtype, differentiable w.r.t. all six tensors.
    """
    _validate(q, k, v, means, variances, log_priors, causal, eps, chunk_size)
    out_dtype = v.dtype
    if _without_bf16(q.device):  # compute from fp32 copies (the result is the same: the kernels work in fp32)
        q, k, v = (t.float() if t.dtype == torch.bfloat16 else t for t in (q, k, v))
    w_sq, w_lin, bias = mixture_tables(means, variances, log_priors)
    out, _, _ = gma_forward(q.contiguous(), k.contiguous(), v.contiguous(), w_sq, w_lin, bias, bool(causal),
                            float(eps), chunk_size or DEFAULT_CHUNK, out_dtype)
    return out


def responsibilities(x: torch.Tensor, means: torch.Tensor, variances: torch.Tensor,
                     log_priors: torch.Tensor) -> torch.Tensor:
    """The fused responsibility kernel on its own: gamma ``(B, H, N, K)`` fp32 from x ``(B, H, N, d)``.

    Forward only (no autograd): it exists to show the fused kernel in isolation; :func:`gma_triton` recomputes
    gamma inside its own kernels instead of storing it.
    """
    _validate(x, x, x, means, variances, log_priors, False, 1.0, None)
    if _without_bf16(x.device) and x.dtype == torch.bfloat16:
        x = x.float()
    with torch.no_grad():
        w_sq, w_lin, bias = mixture_tables(means, variances, log_priors)
    batch, heads, n, d = x.shape
    n_components = means.shape[1]
    block_k = _block(n_components)
    gamma = torch.empty(batch, heads, n, n_components, device=x.device, dtype=torch.float32)
    kernels.responsibility_kernel[(batch * heads, triton.cdiv(n, BLOCK_N))](
        x.contiguous(), w_sq, w_lin, bias, gamma, heads, n, n_components, d, BLOCK_N=BLOCK_N, BLOCK_K=block_k,
        BLOCK_D=_block(d), LOGIT_PRECISION=_precisions(x.device, x.dtype)["LOGIT_PRECISION"],
        **_launch_options(block_k, BLOCK_N, 0))
    return gamma
