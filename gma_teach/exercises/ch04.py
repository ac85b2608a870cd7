"""Chapter 4's exercises: the K-slot memory written and read by hand, and the FLOP count of both orders.

Each checker calls your function on random float64 inputs of odd sizes (with batch and head axes, and with
``N_q != N_k`` where that makes sense) and compares it with an independent reference; it raises
:class:`~gma_teach.exercises.ExerciseError` saying what is wrong, or prints "Exercise N.M: correct" (the
protocol is in :mod:`gma_teach.exercises._common`).
"""
from __future__ import annotations

import torch
from torch.utils.flop_counter import FlopCounterMode

from ..mixing import gma_from_responsibilities, read_memory, write_memory
from ._common import ExerciseError, call_reader, checker, compare

__all__ = ["check_flop_count", "check_read_memory", "check_write_memory"]


def _responsibility_cases(seed: int):
    """Random ``(gamma_q, gamma_k, v)``: rows of gamma on the simplex; plain, batched and (batch, head) shapes."""
    generator = torch.Generator().manual_seed(seed)
    for prefix, n_q, n_k, k, d_v in (((), 7, 7, 3, 5), ((2,), 5, 11, 4, 3), ((2, 3), 9, 13, 5, 6)):
        gamma_q = torch.randn(*prefix, n_q, k, generator=generator, dtype=torch.float64).mul(2).softmax(-1)
        gamma_k = torch.randn(*prefix, n_k, k, generator=generator, dtype=torch.float64).mul(2).softmax(-1)
        v = torch.randn(*prefix, n_k, d_v, generator=generator, dtype=torch.float64)
        yield gamma_q, gamma_k, v


def _call_with_shapes(fn, gamma_k: torch.Tensor, v: torch.Tensor):
    """Call ``fn(gamma_k, v)``; a RuntimeError inside it (a shape slip: ``.T``, ``transpose(0, 1)``, ``mm``, an
    einsum without ``...``) becomes an :class:`ExerciseError` naming the shapes it got and the shapes it must return."""
    try:
        return call_reader(fn, gamma_k, v)
    except ExerciseError as error:
        cause = error.__cause__
        if not isinstance(cause, RuntimeError):
            raise
        lead = tuple(gamma_k.shape[:-2])
        needed = (f"it must return memory of shape {lead + (gamma_k.shape[-1], v.shape[-1])} (..., K, d_v) and "
                  f"normalizer of shape {lead + (gamma_k.shape[-1],)} (..., K)")
        if "dtype" in str(cause):
            fix = f"build any new tensor with the inputs' dtype ({gamma_k.dtype}), e.g. dtype=gamma_k.dtype"
        elif lead:
            fix = (f"the leading axes {lead} are batch (and head) axes: transpose only the last two axes "
                   "(gamma_k.mT or gamma_k.transpose(-2, -1), not .T or transpose(0, 1)) and multiply with @, which "
                   "broadcasts over leading axes (torch.mm and torch.bmm take fixed numbers of axes)")
        else:
            fix = "the memory is Gamma^K^T V: (K, N_k) @ (N_k, d_v)"
        raise ExerciseError(
            f"your function raised RuntimeError for gamma_k of shape {tuple(gamma_k.shape)} and v of shape "
            f"{tuple(v.shape)}; {needed}; {fix} (torch said: {cause})"
        ) from cause


@checker("4.1")
def check_write_memory(fn, *, seed: int = 0) -> str:
    """Check ``fn(gamma_k, v) -> (memory, normalizer)``: ``memory = Gamma^K^T V``, ``normalizer = Gamma^K^T 1``.

    Args:
        fn: your function; ``gamma_k`` ``(..., N_k, K)``, ``v`` ``(..., N_k, d_v)`` -> ``memory`` ``(..., K, d_v)``
            and ``normalizer`` ``(..., K)``.
        seed: seed of the random inputs.
    """
    for _, gamma_k, v in _responsibility_cases(seed):
        got = _call_with_shapes(fn, gamma_k, v)
        if not isinstance(got, tuple) or len(got) != 2:
            raise ExerciseError(f"return a pair (memory, normalizer), got {type(got).__name__}")
        memory, normalizer = got
        # the spec, one slot at a time: slot k holds sum_j gamma_k[j, k] * v[j]
        expected_memory = torch.stack(
            [(gamma_k[..., :, slot, None] * v).sum(-2) for slot in range(gamma_k.shape[-1])], dim=-2
        )
        if isinstance(memory, torch.Tensor) and memory.shape == expected_memory.mT.shape != expected_memory.shape:
            raise ExerciseError(
                f"memory has shape {tuple(memory.shape)}: that is V^T Gamma^K; the memory is Gamma^K^T V, "
                f"one row per slot: {tuple(expected_memory.shape)}"
            )
        compare(f"memory for gamma_k of shape {tuple(gamma_k.shape)}", memory, expected_memory)
        if isinstance(normalizer, torch.Tensor) and normalizer.shape == gamma_k.shape[:-1]:
            raise ExerciseError(
                "normalizer sums over the components (dim=-1); it must sum each component's key mass over the "
                f"tokens (dim=-2), giving shape {tuple(gamma_k.shape[:-2] + gamma_k.shape[-1:])}"
            )
        compare(f"normalizer for gamma_k of shape {tuple(gamma_k.shape)}", normalizer, gamma_k.sum(-2))
    return "K slots of values and their key mass, whatever N is."


@checker("4.2")
def check_read_memory(fn, *, seed: int = 0, eps: float = 1e-6) -> str:
    """Check ``fn(gamma_q, memory, normalizer, eps) -> O = Gamma^Q memory / (Gamma^Q normalizer + eps)``.

    The memory comes from random keys and values, so the output must also equal the ``N x N`` form of chapter 3.
    One case has a query whose responsibilities miss every key's component: only ``eps`` keeps it finite.

    Args:
        fn: your function; ``gamma_q`` ``(..., N_q, K)``, ``memory`` ``(..., K, d_v)``, ``normalizer``
            ``(..., K)``, ``eps`` a float -> ``(..., N_q, d_v)``.
        seed: seed of the random inputs.
        eps: the normalizer's floor passed to ``fn``.
    """
    for gamma_q, gamma_k, v in _responsibility_cases(seed):
        memory, normalizer = gamma_k.mT @ v, gamma_k.sum(-2)
        got = call_reader(fn, gamma_q, memory, normalizer, eps)
        expected = gma_from_responsibilities(gamma_q, gamma_k, v, eps=eps, impl="naive")
        if isinstance(got, torch.Tensor) and got.shape == expected.shape:
            unnormalized = gamma_q @ memory
            if torch.allclose(got.double(), unnormalized, atol=1e-10):
                raise ExerciseError("the output is Gamma^Q memory without dividing by Gamma^Q normalizer + eps: "
                                    "each query's weights must sum to 1 over the keys")
        compare(f"output for gamma_q of shape {tuple(gamma_q.shape)}", got, expected)
    # a query on component 0 while every key sits on component 1: numerator and normalizer are both 0
    gamma_q = torch.tensor([[1.0, 0.0], [0.5, 0.5]], dtype=torch.float64)
    gamma_k = torch.tensor([[0.0, 1.0], [0.0, 1.0], [0.0, 1.0]], dtype=torch.float64)
    v = torch.tensor([[1.0], [2.0], [3.0]], dtype=torch.float64)
    got = call_reader(fn, gamma_q, gamma_k.mT @ v, gamma_k.sum(-2), eps)
    if isinstance(got, torch.Tensor) and not torch.isfinite(got).all():
        raise ExerciseError("a query whose components hold no key mass gave a non-finite output: add eps to the "
                            "denominator Gamma^Q normalizer, as in O = Gamma^Q memory / (Gamma^Q normalizer + eps)")
    compare("output when a query's components hold no key mass", got,
            gma_from_responsibilities(gamma_q, gamma_k, v, eps=eps, impl="naive"))
    return "equal to the N x N form, and finite when a query finds no keys."


def _naive_order(gamma_q, gamma_k, v, eps=1e-6):
    """Chapter 3's order: the ``(N_q, N_k)`` affinity first, then its products with ``V`` and its row sums."""
    scores = gamma_q @ gamma_k.transpose(-1, -2)
    return (scores @ v) / (scores.sum(-1, keepdim=True) + eps)


def _linear_order(gamma_q, gamma_k, v, eps=1e-6):
    """Chapter 4's order: write the memory ``(memory, normalizer)``, then read it."""
    return read_memory(gamma_q, *write_memory(gamma_k, v), eps)


def _measured_flops(form: str, n_q: int, n_k: int, n_components: int, d_value: int) -> int:
    """Matrix-product FLOPs that torch's counter records for one order (``"naive"`` or ``"linear"``)."""
    gamma_q = torch.rand(n_q, n_components).softmax(-1)
    gamma_k = torch.rand(n_k, n_components).softmax(-1)
    v = torch.randn(n_k, d_value)
    order = _naive_order if form == "naive" else _linear_order
    with FlopCounterMode(display=False) as counter:
        order(gamma_q, gamma_k, v)
    return counter.get_total_flops()


@checker("4.3")
def check_flop_count(fn, *, seed: int = 0) -> str:
    """Check ``fn(form, n_q, n_k, n_components, d_value) -> int``: the matrix-product FLOPs of one GMA head.

    ``form`` is ``"naive"`` (``(Gamma^Q Gamma^K^T) V`` and its row sums) or ``"linear"`` (``Gamma^K^T V``, then
    ``Gamma^Q memory`` and ``Gamma^Q normalizer``). A product of an ``(a, b)`` and a ``(b, c)`` matrix costs
    ``2 a b c`` FLOPs (a multiply and an add per term); sums and divisions are not counted. The checker *measures*
    both orders, written as above with :func:`gma_teach.mixing.write_memory` and
    :func:`~gma_teach.mixing.read_memory` for the linear one, with ``torch.utils.flop_counter.FlopCounterMode`` at
    random sizes and compares.

    Args:
        fn: your formula.
        seed: seed of the random sizes.
    """
    generator = torch.Generator().manual_seed(seed)
    for _ in range(4):
        n_q, n_k, n_components, d_value = (int(x) for x in torch.randint(3, 40, (4,), generator=generator))
        for form in ("naive", "linear"):
            got = call_reader(fn, form, n_q, n_k, n_components, d_value)
            expected = _measured_flops(form, n_q, n_k, n_components, d_value)
            if isinstance(got, torch.Tensor):
                got = got.item()
            if not isinstance(got, (int, float)):
                raise ExerciseError(f"return a number, got {type(got).__name__}")
            if got != expected:
                hint = ""
                if form == "naive" and got * 2 == expected:
                    hint = " -- count 2 FLOPs (multiply and add) per term of each product"
                elif form == "linear" and got == expected - 2 * n_q * n_components:
                    hint = " -- the normalizer read Gamma^Q normalizer is a product too (2 N_q K)"
                raise ExerciseError(
                    f"form={form!r}, n_q={n_q}, n_k={n_k}, n_components={n_components}, d_value={d_value}: "
                    f"you count {got} FLOPs, torch measured {expected}{hint}"
                )
    return "your formula matches torch's FLOP counter for both orders."
