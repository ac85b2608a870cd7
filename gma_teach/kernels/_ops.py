"""Tile sizes, launchers, the differentiable custom op and the public wrappers around the Triton kernels.

The op ``gma_teach::gma_forward`` takes the mixture as ``(w_sq, w_lin, bias)`` (see ``_triton_kernels``); torch
derives them from ``(means, variances, log_priors)`` with :func:`gma_teach.gmm.gemm_coefficients`, so autograd
carries the mixture gradients back to the parameters. The backward op returns per-token gradients computed by the
kernels and mixture gradients summed, in a fixed order, from per-program partials.
"""
from __future__ import annotations

import math

import torch
import triton

from .. import _checks, gmm
from . import _triton_kernels as kernels
from ._environment import interpreting
from ._precision import device_arch, precisions

FLOAT_INPUTS = (torch.float16, torch.bfloat16, torch.float32)
MAX_COMPONENTS = 512
MAX_FEATURES = 128
DEFAULT_CHUNK = 64
CHUNK_SIZES = (16, 32, 64, 128)

# Tiles (rows per block, which is also the longest causal chunk a kernel uses, and components per K tile) by GPU
# architecture and by the padded width max(d_r, d_v): narrow (<= 64) or wide (128). Chosen with `shared_memory`
# (Triton's allocator) so that every kernel fits: sm_90+ has 227 KiB per block, older GPUs from 64 KiB (sm_75) up;
# tests/test_kernels.py checks sm_75 and sm_90 over the whole supported grid. The interpreter (no GPU) has no limit.
TILES = {"sm_90+": {"narrow": (64, 64), "wide": (32, 32)},
         "before sm_90": {"narrow": (32, 32), "wide": (16, 16)},
         "interpreted": {"narrow": (64, 64), "wide": (64, 64)}}
NUM_STAGES = 1  # no software pipelining of the K loops: their buffers would multiply the shared memory


def supports(dtype: torch.dtype, n_components: int, d_route: int, d_value: int, chunk_size: int | None) -> bool:
    """Whether :func:`gma_triton` accepts these sizes (``gma(impl="auto")`` asks before choosing the kernels)."""
    return (dtype in FLOAT_INPUTS and 1 <= n_components <= MAX_COMPONENTS and 1 <= min(d_route, d_value)
            and max(d_route, d_value) <= MAX_FEATURES and (chunk_size is None or chunk_size in CHUNK_SIZES))


def _block(size: int) -> int:
    """Tile size covering ``size`` entries: a power of two, at least 16 (tl.dot's minimum on a GPU)."""
    return max(16, triton.next_power_of_2(size))


def tile_sizes(n_components: int, d_route: int, d_value: int, *, arch: int | None = None,
               chunk_size: int | None = None) -> dict:
    """The tiles the kernels use for these sizes on GPU architecture ``arch`` (75 for sm_75; None: interpreted).

    Returns:
        ``{"profile", "rows", "chunk", "k_tile", "block_d", "block_dv", "num_warps", "num_stages"}``: ``rows``
        tokens per block (bidirectional), ``chunk`` tokens per causal chunk (``chunk_size``, or 64, capped at
        ``rows``), ``k_tile`` components per K tile (see ``TILES``), ``block_d`` and ``block_dv`` the padded
        ``d_route`` and ``d_value``.
    """
    profile = "interpreted" if arch is None else "sm_90+" if arch >= 90 else "before sm_90"
    block_d, block_dv = _block(d_route), _block(d_value)
    rows, k_tile = TILES[profile]["wide" if max(block_d, block_dv) > 64 else "narrow"]
    k_tile = min(k_tile, _block(n_components))
    num_warps = 8 if rows * max(k_tile, block_d, block_dv) > 4096 else 4
    return dict(profile=profile, rows=rows, chunk=min(chunk_size or DEFAULT_CHUNK, rows), k_tile=k_tile,
                block_d=block_d, block_dv=block_dv, num_warps=num_warps, num_stages=NUM_STAGES)


def _parts(n_blocks: int, programs: int, device: torch.device) -> tuple[int, int]:
    """(blocks per part, parts) for a reduction over ``n_blocks`` row blocks that already has ``programs``
    programs per part: enough parts to fill the GPU (about four programs per multiprocessor), one on a CPU."""
    target = 4 * torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 1
    n_parts = max(1, min(n_blocks, math.ceil(target / programs)))
    per_part = math.ceil(n_blocks / n_parts)
    return per_part, math.ceil(n_blocks / per_part)


class _Launch:
    """Sizes, tiles and options shared by every launch of one call."""

    def __init__(self, q, k, v, w_sq, causal, chunk_size):
        self.batch, self.heads, self.n_q, self.d = q.shape
        self.n_k, self.d_v = k.shape[2], v.shape[3]
        self.n_components = w_sq.shape[1]
        self.bh = self.batch * self.heads
        self.device = q.device
        self.causal = causal
        arch = device_arch(q.device)
        self.tiles = tile_sizes(self.n_components, self.d, self.d_v, arch=arch, chunk_size=chunk_size)
        self.rows = self.tiles["chunk"] if causal else self.tiles["rows"]
        self.k_tiles = triton.cdiv(self.n_components, self.tiles["k_tile"])
        self.options = dict(BLOCK_KT=self.tiles["k_tile"], BLOCK_D=self.tiles["block_d"], **precisions(arch, v.dtype))
        if not interpreting():
            self.options.update(num_warps=self.tiles["num_warps"], num_stages=self.tiles["num_stages"])

    def values_options(self):
        return dict(self.options, BLOCK_DV=self.tiles["block_dv"])

    def empty(self, *shape):
        return torch.empty(*shape, device=self.device, dtype=torch.float32)


def _log_normalizers(launch, x, w_sq, w_lin, bias):
    n = x.shape[2]
    lse = launch.empty(launch.bh, n)
    options = {key: value for key, value in launch.options.items() if key != "PRECISION"}
    kernels.log_normalizer_kernel[(launch.bh, triton.cdiv(n, launch.rows))](
        x, w_sq, w_lin, bias, lse, launch.heads, n, launch.n_components, launch.d, BLOCK_N=launch.rows, **options)
    return lse


def _states(launch, x, lse, values, weights, w_sq, w_lin, bias, *, reverse):
    """Per-part states and normalizers (exclusive prefixes over chunks when causal) and their totals."""
    n = x.shape[2]
    n_blocks = triton.cdiv(n, launch.rows)
    per_part, n_parts = (1, n_blocks) if launch.causal else _parts(n_blocks, launch.bh * launch.k_tiles,
                                                                     launch.device)
    states = launch.empty(launch.bh, n_parts, launch.n_components, launch.d_v)
    norms = launch.empty(launch.bh, n_parts, launch.n_components)
    kernels.state_kernel[(launch.bh, n_parts, launch.k_tiles)](
        x, lse, values, values if weights is None else weights, w_sq, w_lin, bias, states, norms, launch.heads, n,
        launch.n_components, launch.d, launch.d_v, n_parts, per_part, HAS_WEIGHTS=weights is not None,
        BLOCK_N=launch.rows, **launch.values_options())
    totals = launch.empty(launch.bh, launch.n_components, launch.d_v)
    total_norms = launch.empty(launch.bh, launch.n_components)
    kernels.carry_kernel[(launch.bh, launch.k_tiles)](
        states, norms, totals, total_norms, launch.n_components, launch.d_v, n_parts, REVERSE=reverse,
        BLOCK_KT=launch.tiles["k_tile"], BLOCK_DV=launch.tiles["block_dv"])
    if launch.causal:
        return states, norms
    return totals, total_norms


# ----------------------------------------------------------------------------------------------------------------
# Forward
# ----------------------------------------------------------------------------------------------------------------
def _forward(q, k, v, w_sq, w_lin, bias, causal, eps, chunk_size, out_dtype):
    launch = _Launch(q, k, v, w_sq, causal, chunk_size)
    lse_q = _log_normalizers(launch, q, w_sq, w_lin, bias)
    lse_k = _log_normalizers(launch, k, w_sq, w_lin, bias)
    memory, normalizer = _states(launch, k, lse_k, v, None, w_sq, w_lin, bias, reverse=False)
    out = torch.empty(launch.batch, launch.heads, launch.n_q, launch.d_v, device=q.device, dtype=out_dtype)
    den = launch.empty(launch.bh, launch.n_q)
    kernels.output_kernel[(launch.bh, triton.cdiv(launch.n_q, launch.rows))](
        q, k, v, lse_q, lse_k, w_sq, w_lin, bias, memory, normalizer, out, den, launch.heads, launch.n_q,
        launch.n_components, launch.d, launch.d_v, eps, CAUSAL=causal, BLOCK_N=launch.rows, **launch.values_options())
    return out, den, lse_q, lse_k


@torch.library.custom_op("gma_teach::gma_forward", mutates_args=())
def gma_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, w_sq: torch.Tensor, w_lin: torch.Tensor,
                bias: torch.Tensor, causal: bool, eps: float, chunk_size: int,
                out_dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(out (B, H, Nq, dv) in ``out_dtype``, and kept for the backward, fp32: den (B*H, Nq) and the
    log-normalizers of the queries (B*H, Nq) and keys (B*H, Nk))."""
    kernel_dtype = torch.float32 if out_dtype == torch.bfloat16 and _without_bf16(q.device) else out_dtype
    out, den, lse_q, lse_k = _forward(q, k, v, w_sq, w_lin, bias, causal, eps, chunk_size, kernel_dtype)
    return out.to(out_dtype), den, lse_q, lse_k  # .to rounds to nearest (the interpreter's bf16 store truncates)


@gma_forward.register_fake
def _(q, k, v, w_sq, w_lin, bias, causal, eps, chunk_size, out_dtype):
    batch, heads, n_q, _ = q.shape
    out = q.new_empty(batch, heads, n_q, v.shape[3], dtype=out_dtype)
    return (out, q.new_empty(batch * heads, n_q, dtype=torch.float32),
            q.new_empty(batch * heads, n_q, dtype=torch.float32),
            q.new_empty(batch * heads, k.shape[2], dtype=torch.float32))


# ----------------------------------------------------------------------------------------------------------------
# Backward
# ----------------------------------------------------------------------------------------------------------------
def _mixture_gradients(launch, keys, x, other, lse, other_lse, d_num, d_den, delta, states, state_norms, v, w_sq,
                       w_lin, bias, eps):
    """One side's gradients of (w_sq, w_lin, bias), summed over batch and parts in a fixed order."""
    n = x.shape[2]
    n_blocks = triton.cdiv(n, launch.rows)
    per_part, n_parts = _parts(n_blocks, launch.bh * launch.k_tiles, launch.device)
    slots = launch.bh * n_parts
    d_w_sq, d_w_lin = launch.empty(slots, launch.n_components, launch.d), launch.empty(slots, launch.n_components,
                                                                                        launch.d)
    d_bias = launch.empty(slots, launch.n_components)
    kernels.mixture_backward_kernel[(launch.bh, n_parts, launch.k_tiles)](
        x, other, v, lse, other_lse, d_num, d_den, delta, w_sq, w_lin, bias, states, state_norms, d_w_sq, d_w_lin,
        d_bias, launch.heads, n, launch.n_components, launch.d, launch.d_v, eps, n_parts, per_part, n_blocks,
        KEYS=keys, CAUSAL=launch.causal, BLOCK_N=launch.rows, **launch.values_options())

    def total(t):
        return t.view(launch.batch, launch.heads, n_parts, *t.shape[1:]).sum((0, 2))

    return total(d_w_sq), total(d_w_lin), total(d_bias)


def _backward_kernels(d_out, q, k, v, w_sq, w_lin, bias, out, den, lse_q, lse_k, causal, eps, chunk_size):
    launch = _Launch(q, k, v, w_sq, causal, chunk_size)
    bh = launch.bh
    d_out32 = d_out.float().reshape(bh, launch.n_q, launch.d_v)
    d_num = d_out32 / den[..., None]
    d_den = -(d_out32 * out.float().reshape(bh, launch.n_q, launch.d_v)).sum(-1) / den
    memory, normalizer = _states(launch, k, lse_k, v, None, w_sq, w_lin, bias, reverse=False)
    reverse, reverse_norm = _states(launch, q, lse_q, d_num, d_den, w_sq, w_lin, bias, reverse=True)
    d_q, d_k = launch.empty(*q.shape), launch.empty(*k.shape)
    d_v, delta_k = launch.empty(*v.shape), launch.empty(bh, launch.n_k)
    options = dict(CAUSAL=causal, BLOCK_N=launch.rows, **launch.values_options())
    for in_chunk in (False, True) if causal else (False,):
        kernels.query_token_backward_kernel[(bh, triton.cdiv(launch.n_q, launch.rows))](
            q, k, v, lse_q, lse_k, d_num, d_den, w_sq, w_lin, bias, memory, normalizer, d_q, launch.heads,
            launch.n_q, launch.n_components, launch.d, launch.d_v, eps, IN_CHUNK=in_chunk, **options)
    kernels.key_token_backward_kernel[(bh, triton.cdiv(launch.n_k, launch.rows))](
        q, k, v, lse_q, lse_k, d_num, d_den, w_sq, w_lin, bias, reverse, reverse_norm, d_k, d_v, delta_k,
        launch.heads, launch.n_k, launch.n_components, launch.d, launch.d_v, **options)
    query_side = _mixture_gradients(launch, False, q, k, lse_q, lse_k, d_num, d_den, d_den, memory, normalizer, v,
                                    w_sq, w_lin, bias, eps)
    key_side = _mixture_gradients(launch, True, k, q, lse_k, lse_q, d_num, d_den, delta_k, reverse, reverse_norm, v,
                                  w_sq, w_lin, bias, eps)
    return (d_q, d_k, d_v, *(a + b for a, b in zip(query_side, key_side)))


@torch.library.custom_op("gma_teach::gma_backward", mutates_args=())
def gma_backward(d_out: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, w_sq: torch.Tensor,
                 w_lin: torch.Tensor, bias: torch.Tensor, out: torch.Tensor, den: torch.Tensor, lse_q: torch.Tensor,
                 lse_k: torch.Tensor, causal: bool, eps: float, chunk_size: int) -> list[torch.Tensor]:
    """[d_q, d_k, d_v] in the inputs' dtypes and [d_w_sq, d_w_lin, d_bias] in fp32, recomputing Γ."""
    d_q, d_k, d_v, *mixture = _backward_kernels(d_out.contiguous(), q, k, v, w_sq, w_lin, bias, out, den, lse_q,
                                                lse_k, causal, eps, chunk_size)
    return [d_q.to(q.dtype), d_k.to(k.dtype), d_v.to(v.dtype), *mixture]


@gma_backward.register_fake
def _(d_out, q, k, v, w_sq, w_lin, bias, out, den, lse_q, lse_k, causal, eps, chunk_size):
    return [torch.empty_like(q), torch.empty_like(k), torch.empty_like(v), torch.empty_like(w_sq),
            torch.empty_like(w_lin), torch.empty_like(bias)]


def _setup_context(ctx, inputs, output):
    q, k, v, w_sq, w_lin, bias, causal, eps, chunk_size, _ = inputs
    out, den, lse_q, lse_k = output
    ctx.save_for_backward(q, k, v, w_sq, w_lin, bias, out, den, lse_q, lse_k)
    ctx.causal, ctx.eps, ctx.chunk_size = causal, eps, chunk_size


def _backward(ctx, d_out, _d_den, _d_lse_q, _d_lse_k):
    grads = gma_backward(d_out, *ctx.saved_tensors, ctx.causal, ctx.eps, ctx.chunk_size)
    return (*grads, None, None, None, None)


gma_forward.register_autograd(_backward, setup_context=_setup_context)


# ----------------------------------------------------------------------------------------------------------------
# Public functions
# ----------------------------------------------------------------------------------------------------------------
def mixture_tables(means: torch.Tensor, variances: torch.Tensor, log_priors: torch.Tensor):
    """``(w_sq, w_lin, bias)`` in fp32 such that ``logits = (x*x) @ w_sq^T + x @ w_lin^T + bias``.

    The GEMM form of :func:`gma_teach.gmm.gemm_coefficients`, split for the kernels.

    Args:
        means, variances: ``(H, K, d)``; log_priors: ``(H, K)``.

    Returns:
        ``w_sq = -0.5 / variances`` and ``w_lin = means / variances`` of shape ``(H, K, d)``, and the constant
        ``bias`` of shape ``(H, K)``. Differentiable.
    """
    weight, bias = gmm.gemm_coefficients(means, variances, log_priors)
    d = means.shape[-1]
    weight = weight.float()
    return weight[..., :d].contiguous(), weight[..., d:].contiguous(), bias.float().contiguous()


def _check_kernel_tensor(name, value):
    _checks.tensor(name, value)
    if value.dim() != 4:
        raise ValueError(f"{name} must have shape (B, H, N, features), got shape {tuple(value.shape)}")
    if value.dtype not in FLOAT_INPUTS:
        raise TypeError(f"{name} must be float16, bfloat16 or float32 for the Triton kernels, got {value.dtype} "
                        "(use gma(..., impl='linear') or 'chunked' for float64)")


def _check_tokens(**tensors):
    """At least one token and one feature, checked before anything reshapes the inputs."""
    for name, value in tensors.items():
        if value.shape[2] < 1 or value.shape[3] < 1:
            raise ValueError(f"the Triton kernels need at least one token and one feature: {name} has shape "
                             f"{tuple(value.shape)} (B, H, N, features)")


def _validate(q, k, v, means, variances, log_priors, causal, eps, chunk_size, check_values):
    """gma()'s shape rules (:func:`gma_teach.gmm.check_gma_inputs`) plus the kernels' own limits: 4-D inputs with
    equal (B, H), one mixture per head, float16/bfloat16/float32, the supported sizes, chunk and device."""
    for name, value in (("q", q), ("k", k), ("v", v)):
        _check_kernel_tensor(name, value)
    _check_tokens(q=q, k=k, v=v)
    batch, heads, _, d = q.shape
    _checks.tensor("means", means, min_rank=2)
    if means.dim() != 3 or means.shape[0] != heads:
        raise ValueError(f"means must have shape (H, K, d) = ({heads}, K, {d}) for the Triton kernels (one mixture "
                         f"per head), got {tuple(means.shape)}")
    if not 1 <= means.shape[1] <= MAX_COMPONENTS:
        raise ValueError(f"means must have 1 <= K <= {MAX_COMPONENTS} components for the Triton kernels, got "
                         f"K={means.shape[1]} (means {tuple(means.shape)})")
    if max(d, v.shape[3]) > MAX_FEATURES:
        raise ValueError(f"the Triton kernels support d, dv <= {MAX_FEATURES}, got d={d} (q {tuple(q.shape)}), "
                         f"dv={v.shape[3]} (v {tuple(v.shape)})")
    gmm.check_gma_inputs(q, k, v, means, variances, log_priors, causal=causal, check_values=check_values)
    for name, value in (("k", k), ("v", v)):
        if value.shape[:2] != (batch, heads):
            raise ValueError(f"{name} must have the (B, H) = ({batch}, {heads}) of q {tuple(q.shape)} (the kernels "
                             f"do not broadcast), got {tuple(value.shape)}")
    _checks.positive_number("eps", eps)
    if chunk_size is not None and (isinstance(chunk_size, bool) or chunk_size not in CHUNK_SIZES):
        raise ValueError(f"chunk_size must be None or one of {CHUNK_SIZES} (a tl.dot tile), got {chunk_size!r}")
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
    """True where Triton cannot load or store bf16 tiles correctly: the interpreter (it multiplies raw bit patterns
    and stores by truncation) and GPUs older than sm_80 (e.g. Colab's T4)."""
    return interpreting() or (device.type == "cuda" and torch.cuda.get_device_capability(device)[0] < 8)


def gma_triton(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, means: torch.Tensor, variances: torch.Tensor,
               log_priors: torch.Tensor, *, causal: bool, eps: float, chunk_size: int | None = None,
               check_values: bool = True) -> torch.Tensor:
    """Gaussian Mixture Attention with fused Triton kernels; Γ is recomputed, never stored.

    Args:
        q: ``(B, H, Nq, d_r)`` query routing vectors; k: ``(B, H, Nk, d_r)``; v: ``(B, H, Nk, d_v)``
            (float16, bfloat16 or float32; computed in fp32); ``d_r, d_v <= 128``.
        means, variances: ``(H, K, d_r)``; log_priors: ``(H, K)`` (any float dtype; used in fp32); ``K <= 512``.
        causal: prefix (autoregressive) GMA; needs ``Nq == Nk``.
        eps: the positive finite constant added to the denominator.
        chunk_size: causal chunk length (16, 32, 64 or 128); ``None`` means 64. A GPU with little shared memory
            uses shorter chunks (see :func:`tile_sizes`); the result is the same up to rounding.
        check_values: check the mixture's values (positive normal variances, normalized log priors), as
            :func:`gma_teach.gma` does; ``gma`` passes ``False`` after its own check.

    Returns:
        ``(B, H, Nq, d_v)`` in v's dtype, differentiable w.r.t. all six tensors.

    Raises:
        TypeError, ValueError: inputs the kernels do not take (:func:`supports` says which sizes they take).
    """
    _validate(q, k, v, means, variances, log_priors, causal, eps, chunk_size, check_values)
    out_dtype = v.dtype
    if _without_bf16(q.device):  # compute from fp32 copies (the result is the same: the kernels work in fp32)
        q, k, v = (t.float() if t.dtype == torch.bfloat16 else t for t in (q, k, v))
    w_sq, w_lin, bias = mixture_tables(means, variances, log_priors)
    out, _, _, _ = gma_forward(q.contiguous(), k.contiguous(), v.contiguous(), w_sq, w_lin, bias, causal, float(eps),
                               chunk_size or DEFAULT_CHUNK, out_dtype)
    return out


def fused_responsibilities(x: torch.Tensor, means: torch.Tensor, variances: torch.Tensor,
                           log_priors: torch.Tensor) -> torch.Tensor:
    """The responsibilities computed by the fused kernels: gamma ``(B, H, N, K)`` fp32 from x ``(B, H, N, d_r)``.

    The same values as :func:`gma_teach.responsibilities` (GEMM-form logits, then a softmax over K), from the
    kernels' two steps: the log-normalizer of every token (an online logsumexp over K tiles), then one K tile of
    ``exp(logits - lse)`` per program. Forward only (no autograd): it shows the kernels' responsibilities in
    isolation; :func:`gma_triton` recomputes them inside its kernels instead of storing them.
    """
    _check_kernel_tensor("x", x)
    _check_tokens(x=x)
    batch, heads, n, d = x.shape
    n_components = means.shape[-2] if isinstance(means, torch.Tensor) and means.dim() == 3 else 1
    dummy_v = x.new_empty(batch, heads, n, 1)
    _validate(x, x, dummy_v, means, variances, log_priors, False, 1.0, None, True)
    if _without_bf16(x.device) and x.dtype == torch.bfloat16:
        x = x.float()
    x = x.contiguous()
    with torch.no_grad():
        w_sq, w_lin, bias = mixture_tables(means, variances, log_priors)
    launch = _Launch(x, x, dummy_v, w_sq, False, None)
    lse = _log_normalizers(launch, x, w_sq, w_lin, bias)
    gamma = torch.empty(batch, heads, n, n_components, device=x.device, dtype=torch.float32)
    options = {key: value for key, value in launch.options.items() if key != "PRECISION"}
    kernels.responsibility_kernel[(launch.bh, triton.cdiv(n, launch.rows), launch.k_tiles)](
        x, lse, w_sq, w_lin, bias, gamma, heads, n, n_components, d, BLOCK_N=launch.rows, **options)
    return gamma
