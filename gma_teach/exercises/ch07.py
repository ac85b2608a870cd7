"""Chapter 7's exercises: two small Triton kernels (a normalizer and a masked softmax) and the softmax backward.

The checkers never import Triton themselves: they call *your* launcher on random float32 CPU tensors (the kernels
run in Triton's interpreter without a GPU, on the GPU where there is one) at sizes that are and are not multiples
of a block, and compare with a torch reference. A launcher that is right on whole blocks but wrong on a tail gets
a message saying so. They raise :class:`~gma_teach.exercises.ExerciseError`, or return a short success message.
"""
from __future__ import annotations

import torch

from ..gmm import responsibilities
from ._common import ExerciseError, call_reader, compare

__all__ = ["check_masked_softmax", "check_normalizer_kernel", "check_softmax_backward"]


def _device():
    from .. import kernels  # without CUDA this also turns Triton's interpreter on

    return torch.device("cuda") if kernels.is_available("cuda") else torch.device("cpu")


def _random_mixture(generator, n_heads, n_components, dim, device):
    means = torch.randn(n_heads, n_components, dim, generator=generator)
    variances = 0.3 + 1.5 * torch.rand(n_heads, n_components, dim, generator=generator)
    log_priors = torch.log_softmax(torch.randn(n_heads, n_components, generator=generator), -1)
    return means.to(device), variances.to(device), log_priors.to(device)


def check_normalizer_kernel(fn, *, seed: int = 0) -> str:
    """Check ``fn(k, means, variances, log_priors) -> z``: the normalizer ``z = Gamma_K^T 1`` of every (batch, head).

    Args:
        fn: your launcher; ``k`` ``(B, H, N, d)`` float32, ``means``/``variances`` ``(H, K, d)``, ``log_priors``
            ``(H, K)`` -> ``z`` ``(B, H, K)``: each component's responsibility summed over the N keys.
        seed: seed of the random inputs.
    """
    generator = torch.Generator().manual_seed(seed)
    device = _device()
    whole_blocks_ok = False
    for batch, heads, n, n_components, dim in ((1, 2, 64, 16, 16), (2, 1, 37, 5, 3), (1, 3, 1, 3, 2)):
        k = torch.randn(batch, heads, n, dim, generator=generator).to(device)
        mixture = _random_mixture(generator, heads, n_components, dim, device)
        expected = responsibilities(k, *mixture).sum(-2)
        got = call_reader(fn, k, *mixture)
        if isinstance(got, torch.Tensor) and got.shape == expected.shape and whole_blocks_ok:
            error = (got.double().cpu() - expected.double().cpu()).abs().max().item()
            if error > 1e-4:
                raise ExerciseError(
                    f"correct for N=64 but wrong for N={n} (K={n_components}, d={dim}; max error {error:.3g}): the "
                    "last block runs past the end. Mask the loads (rows < N, columns < K and < d), give padded "
                    "components the logit -inf, and set the responsibilities of rows >= N to 0 before summing")
        compare(f"z for k of shape {tuple(k.shape)} and K={n_components}", got, expected, atol=1e-4, rtol=1e-4)
        whole_blocks_ok = True
        if not torch.allclose(got.sum(-1).double().cpu(), torch.full((batch, heads), float(n), dtype=torch.float64),
                              atol=1e-3):
            raise ExerciseError(f"z must sum to N={n} over the components (each key's responsibilities sum to 1)")
    return "normalizer kernel: correct, including a tail block and a single key."


def check_masked_softmax(fn, *, seed: int = 0) -> str:
    """Check ``fn(logits) -> softmax(logits, dim=-1)`` for a float32 ``(M, K)`` matrix, any M and K <= 256.

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
    return "masked softmax: correct for tails in both directions and stable for large logits."


def check_softmax_backward(fn, *, seed: int = 0) -> str:
    """Check ``fn(gamma, d_gamma) -> d_logits``, the softmax backward the kernels use when they recompute gamma.

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
    return "softmax backward: correct -- d_logits = gamma * (d_gamma - sum_k gamma_k d_gamma_k)."
