"""Chapter 7's exercises: a ladder of small Triton kernels (a masked softmax, a tiled matrix product, the
normalizer of GMA's write pass), the softmax backward that the kernels' backward pass uses, and (chapter 7b) the
arithmetic intensity of the causal kernels.

The checkers never import Triton themselves: they call *your* launcher on random float32 tensors (the kernels
run in Triton's interpreter without a GPU, on the GPU where there is one) at sizes that are and are not multiples
of a block, and compare with a torch reference. A launcher that is right on whole blocks but wrong on a tail gets
a message saying so. The protocol (a stub, a wrong answer, a right one) is in :mod:`gma_teach.exercises._common`.

:func:`skip_cells_without_triton` lets chapter 7 run on a machine without Triton: cells that need it print a note
instead of failing.
"""
from __future__ import annotations

import math

import torch

from ..gmm import random_mixture, responsibilities
from ._common import ExerciseError, call_reader, checker, compare

__all__ = ["check_causal_memory_bound", "check_masked_softmax", "check_matmul_kernel", "check_normalizer_kernel",
           "check_softmax_backward", "skip_cells_without_triton"]

NEEDS_TRITON = "# needs Triton"


def skip_cells_without_triton(marker: str = NEEDS_TRITON) -> bool:
    """Without Triton, make IPython skip every cell whose first line starts with ``marker``.

    Such a cell prints one line saying it was skipped instead of raising ``ImportError``, so a chapter runs from
    top to bottom on a machine without Triton (macOS, Windows) and shows everything that does not launch a kernel.
    With Triton (compiled or interpreted), or outside IPython, nothing changes.

    Returns:
        True when Triton is available here (the cells run), False when they will be skipped.
    """
    from .. import kernels  # optional dependency: the kernels need triton

    if kernels.is_available():
        return True
    try:
        from IPython import get_ipython  # optional: only inside a notebook
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None:
        return False
    note = f"skipped: this cell launches a Triton kernel, and Triton is {kernels.triton_status()}"

    def skip_marked_cell(lines: list[str]) -> list[str]:
        first = next((line for line in lines if line.strip()), "")
        return [f"print({note!r})\n"] if first.strip().startswith(marker) else lines

    skip_marked_cell.gma_teach_marker = marker
    transformers = shell.input_transformers_cleanup
    if not any(getattr(t, "gma_teach_marker", None) == marker for t in transformers):
        transformers.append(skip_marked_cell)
    return False


def _device():
    from .. import kernels  # without CUDA this also turns Triton's interpreter on

    return torch.device("cuda") if kernels.is_available("cuda") else torch.device("cpu")


def _reader_tolerance(device, in_float32: float, tf32_scale: float) -> float:
    """The tolerance of a result of the reader's ``tl.dot`` (default ``input_precision``): ``in_float32`` where it
    multiplies in IEEE float32 (a CPU's interpreter, GPUs before sm_80), else ``tf32_scale`` times
    :func:`gma_teach.kernels.tolerance` of the one-pass TF32 it uses on newer GPUs."""
    from .. import kernels  # optional dependency: the kernels need triton

    precision = kernels.dot_precision(device)
    return in_float32 if precision == "ieee" else tf32_scale * kernels.tolerance(precision)


@checker("7.3")
def check_normalizer_kernel(fn, *, seed: int = 0) -> str:
    """Exercise 7.3: check ``fn(k, means, variances, log_priors) -> normalizer``, ``Z = (Γ^K)^T 1`` of every
    (batch, head).

    Args:
        fn: your launcher; ``k`` ``(B, H, N, d)`` float32, ``means``/``variances`` ``(H, K, d)``, ``log_priors``
            ``(H, K)`` -> ``normalizer`` ``(B, H, K)``: each component's responsibility summed over the N keys.
        seed: seed of the random inputs.
    """
    generator = torch.Generator().manual_seed(seed)
    device = _device()
    # Z sums up to 64 responsibilities: one-pass TF32 moves it by up to 2e-2 (tests/test_tf32_tolerance.py)
    atol = _reader_tolerance(device, 1e-4, 2.0)
    whole_blocks_ok = False
    for batch, heads, n, n_components, dim in ((1, 2, 64, 16, 16), (2, 1, 37, 5, 3), (1, 3, 1, 3, 2)):
        k = torch.randn(batch, heads, n, dim, generator=generator).to(device)
        mixture = random_mixture(n_components, dim, heads, dtype=torch.float32, generator=generator, device=device)
        expected = responsibilities(k, *mixture).sum(-2)
        got = call_reader(fn, k, *mixture)
        if isinstance(got, torch.Tensor) and got.shape == expected.shape and whole_blocks_ok:
            error = (got.double().cpu() - expected.double().cpu()).abs().max().item()
            if error > atol:
                raise ExerciseError(
                    f"correct for N=64 but wrong for N={n} (K={n_components}, d={dim}; max error {error:.3g}): the "
                    "last block runs past the end. Mask the loads (rows < N, columns < K and < d), give padded "
                    "components the logit -inf, and set the responsibilities of rows >= N to 0 before summing")
        compare(f"normalizer for k of shape {tuple(k.shape)} and K={n_components}", got, expected, atol=atol, rtol=1e-4)
        whole_blocks_ok = True
        if not torch.allclose(got.sum(-1).double().cpu(), torch.full((batch, heads), float(n), dtype=torch.float64),
                              atol=1e-3):
            raise ExerciseError(f"the normalizer must sum to N={n} over the components "
                                "(each key's responsibilities sum to 1)")
    return "including a tail block and a single key"


@checker("7.1")
def check_masked_softmax(fn, *, seed: int = 0) -> str:
    """Exercise 7.1: check ``fn(logits) -> softmax(logits, dim=-1)`` for a float32 ``(M, K)`` matrix, any ``M`` and
    ``K <= 256``.

    Args:
        fn: your launcher of a Triton kernel that handles one block of rows per program, with the K columns padded
            to a power of two.
        seed: seed of the random inputs.
    """
    generator = torch.Generator().manual_seed(seed)
    device = _device()
    shapes = ((32, 16), (37, 5), (1, 3), (70, 100))
    for index, (rows, columns) in enumerate(shapes):
        for offset, spread in ((-2.0, 3.0), (500.0, 30.0)):  # logits below 0 (padding matters), then huge ones
            logits = (spread * torch.randn(rows, columns, generator=generator) + offset).to(device)
            expected = torch.softmax(logits.double(), -1)
            got = call_reader(fn, logits)
            if isinstance(got, torch.Tensor) and got.shape == expected.shape:
                if not torch.isfinite(got).all():
                    raise ExerciseError(f"non-finite values for logits near {offset:g} ({rows} x {columns}): "
                                        "subtract each row's maximum before tl.exp (exp(500) overflows float32)")
                if index > 0 and (got.double().cpu() - expected.cpu()).abs().max() > 1e-5:
                    raise ExerciseError(
                        f"correct for a 32 x 16 block but wrong for {rows} x {columns}: padded columns must load as "
                        "-inf (tl.load(..., mask=cols < K, other=float('-inf'))) so that they neither win the max "
                        "nor add to the sum, and the store must be masked to rows < M and cols < K")
            compare(f"softmax of a {rows} x {columns} matrix (logits near {offset:g})", got, expected,
                    atol=1e-6, rtol=1e-5)
    return "tails in both directions, and stable for large logits"


@checker("7.2")
def check_matmul_kernel(fn, *, seed: int = 0) -> str:
    """Exercise 7.2: check ``fn(a, b) -> a @ b`` for float32 ``a`` ``(M, L)`` and ``b`` ``(L, P)`` of any sizes.

    Args:
        fn: your launcher of a Triton kernel with one program per ``(BLOCK_M, BLOCK_P)`` tile of the output, which
            loops over the inner dimension ``L`` in steps of ``BLOCK_L`` and accumulates ``tl.dot`` in float32.
        seed: seed of the random inputs.
    """
    generator = torch.Generator().manual_seed(seed)
    device = _device()
    for index, (m, inner, p) in enumerate(((32, 32, 32), (37, 70, 19), (1, 5, 3), (64, 100, 48))):
        a = torch.randn(m, inner, generator=generator).to(device)
        b = torch.randn(inner, p, generator=generator).to(device)
        expected = (a.double() @ b.double()).cpu()
        got = call_reader(fn, a, b)
        # tl.dot rounds float32 tiles to tf32 on sm_80+ GPUs by default (10 mantissa bits): allow for it there.
        atol = _reader_tolerance(device, 1e-4, inner ** 0.5 / 6)  # 5e-3 sqrt(L) under TF32
        if isinstance(got, torch.Tensor) and got.shape == expected.shape:
            got64 = got.double().cpu()
            for block in (16, 32, 64):
                if block < inner and torch.allclose(got64, a[:, :block].double().cpu() @ b[:block].double().cpu(),
                                                    atol=atol):
                    raise ExerciseError(
                        f"for L={inner} you return the product of the first {block} columns of a and rows of b only: "
                        "loop over the inner dimension (for start in range(0, L, BLOCK_L)) and add every tl.dot "
                        "into one float32 accumulator")
            if index > 0 and (got64 - expected).abs().max() > atol:
                raise ExerciseError(
                    f"correct for 32 x 32 x 32 but wrong for ({m} x {inner}) @ ({inner} x {p}): a tile that hangs "
                    "over an edge must load zeros there (mask rows < M and inner < L for a, inner < L and "
                    "columns < P for b, other=0.0) and store only rows < M, columns < P")
        compare(f"a @ b for a of shape {(m, inner)} and b of shape {(inner, p)}", got, expected, atol=atol, rtol=0)
    return "every tile, including those over the edges, and the loop over the inner dimension"


@checker("7.4")
def check_softmax_backward(fn, *, seed: int = 0) -> str:
    """Exercise 7.4: check ``fn(gamma, d_gamma) -> d_logits``, the softmax backward that the kernels use when they
    recompute gamma.

    Args:
        fn: your function (plain torch); ``gamma = softmax(logits, -1)`` and ``d_gamma`` (the loss gradient with
            respect to gamma), both ``(..., K)`` -> the gradient with respect to ``logits``, ``(..., K)``.
        seed: seed of the random inputs.
    """
    generator = torch.Generator().manual_seed(seed)
    for shape in ((7, 3), (2, 5, 11), (1, 1)):
        logits = torch.randn(*shape, generator=generator, dtype=torch.float64, requires_grad=True)
        d_gamma = torch.randn(*shape, generator=generator, dtype=torch.float64)
        gamma = torch.softmax(logits, -1)
        (expected,) = torch.autograd.grad(gamma, logits, d_gamma)
        got = call_reader(fn, gamma.detach(), d_gamma)
        if isinstance(got, torch.Tensor) and got.shape == expected.shape:
            if torch.allclose(got, gamma.detach() * d_gamma):
                raise ExerciseError("that is gamma * d_gamma: the softmax couples the components, so subtract "
                                    "each row's sum(gamma * d_gamma) from d_gamma before multiplying by gamma")
        compare(f"d_logits for shape {shape}", got, expected, atol=1e-12, rtol=1e-10)
    return "d_logits = gamma * (d_gamma - sum_k gamma_k d_gamma_k)"


def _causal_memory_bound_below(profile: dict, element_bytes: int, chunk: int | None, d_route: int = 64,
                               d_value: int = 64, *, fixed_part: bool = True, chunk_peak: str = "other") -> float:
    """The K at which the forward's compute time equals its memory time, with chapter 7b's model (chunk None:
    bidirectional). ``fixed_part`` and ``chunk_peak`` reproduce two slips, for the checker's messages."""
    if profile["tf32"] is None:  # no TF32 (sm_75): every product in IEEE float32
        logit_peak = other_peak = profile["fp32"]
    else:  # logits always tf32x3; the other products tf32 for half inputs, tf32x3 for float32 ones
        logit_peak = profile["tf32"] / 3
        other_peak = profile["tf32"] if element_bytes < 4 else profile["tf32"] / 3
    memory_time = (2 * d_route + 2 * d_value) * element_bytes / profile["bandwidth"]
    per_component = 8 * d_route / logit_peak + 4 * d_value / other_peak
    fixed = 0.0
    if chunk:
        in_chunk_peak = other_peak if chunk_peak == "other" else logit_peak
        per_component += 2 * chunk / in_chunk_peak
        fixed = 2 * chunk * d_value / in_chunk_peak if fixed_part else 0.0
    return max(0.0, (memory_time - fixed) / per_component)


# GPU profiles in the form of chapter 7b's PROFILES (spec-sheet FLOP/s and bytes/s): one with TF32, one without, and
# one whose bandwidth is so low that the causal forward stays memory-bound up to large K.
_PROFILES = {"a GPU with TF32": dict(fp32=67e12, bf16=989e12, tf32=494e12, bandwidth=4.8e12),
             "a GPU without TF32": dict(fp32=8.1e12, bf16=65e12, tf32=None, bandwidth=320e9),
             "a GPU with little bandwidth": dict(fp32=20e12, bf16=300e12, tf32=150e12, bandwidth=50e9)}


@checker("7.5")
def check_causal_memory_bound(fn) -> str:
    """Exercise 7.5: check ``fn(profile, element_bytes, chunk) -> K``, the number of components at which the causal
    forward kernels' compute time equals their memory time (``d_r = d_v = 64``; 0 when they are compute-bound at
    every K), with chapter 7b's model.

    Args:
        fn: your function; ``profile`` a dict ``{"fp32", "bf16", "tf32", "bandwidth"}`` of peak FLOP/s and bytes/s
            (``tf32`` None on GPUs without TF32), as in chapter 7b's ``PROFILES``; ``element_bytes`` 2 or 4;
            ``chunk`` the chunk length C.
    """
    for name, profile in _PROFILES.items():
        for element_bytes in (2, 4):
            for chunk in (16, 64, 128):
                expected = _causal_memory_bound_below(profile, element_bytes, chunk)
                got = call_reader(fn, dict(profile), element_bytes, chunk)
                if isinstance(got, torch.Tensor) and got.numel() == 1:
                    got = got.item()
                if isinstance(got, bool) or not isinstance(got, (int, float)) or not math.isfinite(got):
                    raise ExerciseError(f"return K as a finite number, got {got!r}")
                if math.isclose(got, expected, rel_tol=1e-6, abs_tol=1e-9):
                    continue
                where = f"for {name}, {8 * element_bytes}-bit inputs and C={chunk}"
                slips = {
                    "bidirectional": (_causal_memory_bound_below(profile, element_bytes, None),
                                      "that is the bidirectional forward's K: add the in-chunk products, "
                                      "2 C (K + d_v) FLOPs per token and head"),
                    "fixed": (_causal_memory_bound_below(profile, element_bytes, chunk, fixed_part=False),
                              "the in-chunk products have a part that does not grow with K, 2 C d_v (the masked "
                              "block times V): it uses up memory time before any component is counted"),
                    "peak": (_causal_memory_bound_below(profile, element_bytes, chunk, chunk_peak="logits"),
                             "the in-chunk products run at the precision of the other products (the second peak "
                             "of precision_peaks), not at the logits' tf32x3"),
                }
                for value, hint in slips.values():
                    if math.isclose(got, value, rel_tol=1e-6, abs_tol=1e-9):
                        raise ExerciseError(f"{where} you return {got:.4g}: {hint}")
                if got < 0:
                    raise ExerciseError(f"{where} you return {got:.4g}: when the fixed in-chunk work alone takes "
                                        "longer than the memory traffic the kernel is compute-bound at every K; "
                                        "return 0")
                raise ExerciseError(f"{where} the causal forward stops being memory-bound at K = {expected:.4g}, "
                                    f"you return {got:.4g}")
    return "the in-chunk products add work but no traffic, so the causal kernel meets the ridge at a smaller K"
