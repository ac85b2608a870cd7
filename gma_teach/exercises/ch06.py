"""Chapter 6's exercises: causal GMA with prefix sums, and one recurrent decoding step.

Each checker calls your function on random float64 inputs of odd sizes and compares it with the package's
``N x N`` spec (the lower-triangular affinity); the causal checkers also perturb the future and require the past
to stay *exactly* unchanged. They raise :class:`~gma_teach.exercises.ExerciseError` saying what is wrong, or print
"Exercise N.M: correct" (the protocol is in :mod:`gma_teach.exercises._common`).
"""
from __future__ import annotations

import torch

from ..mixing import gma_from_responsibilities
from ._common import ExerciseError, call_reader, checker, compare

__all__ = ["check_causal_gma", "check_recurrent_step"]


def _causal_cases(seed: int):
    generator = torch.Generator().manual_seed(seed)
    for prefix, n, k, d_v in (((), 9, 3, 5), ((2,), 13, 4, 3), ((2, 3), 11, 5, 6)):
        gamma_q = torch.randn(*prefix, n, k, generator=generator, dtype=torch.float64).mul(2).softmax(-1)
        gamma_k = torch.randn(*prefix, n, k, generator=generator, dtype=torch.float64).mul(2).softmax(-1)
        v = torch.randn(*prefix, n, d_v, generator=generator, dtype=torch.float64)
        yield gamma_q, gamma_k, v


def _spec(gamma_q, gamma_k, v, eps):
    return gma_from_responsibilities(gamma_q, gamma_k, v, causal=True, eps=eps, impl="naive")


@checker("6.1")
def check_causal_gma(fn, *, seed: int = 0, eps: float = 1e-6) -> str:
    """Check ``fn(gamma_q, gamma_k, v, eps)``: causal GMA, where position ``i`` reads only keys ``j <= i``.

    Args:
        fn: your function; ``gamma_q``, ``gamma_k`` ``(..., N, K)``, ``v`` ``(..., N, d_v)``, ``eps`` a float ->
            ``(..., N, d_v)``.
        seed: seed of the random inputs.
        eps: the normalizer's floor passed to ``fn``.
    """
    for gamma_q, gamma_k, v in _causal_cases(seed):
        got = call_reader(fn, gamma_q, gamma_k, v, eps)
        expected = _spec(gamma_q, gamma_k, v, eps)
        if isinstance(got, torch.Tensor) and got.shape == expected.shape:
            position = gamma_q.shape[-2] // 2
            gamma_k_changed, v_changed = gamma_k.clone(), v.clone()
            gamma_k_changed[..., position + 1:, :] = gamma_k_changed[..., position + 1:, :].flip(-1)
            v_changed[..., position + 1:, :] += 5.0
            changed = call_reader(fn, gamma_q, gamma_k_changed, v_changed, eps)
            difference = (changed[..., : position + 1, :].double() - got[..., : position + 1, :].double()).abs()
            if difference.max() > 0:
                raise ExerciseError(
                    f"the future leaks: changing keys/values after position {position} changed the outputs at "
                    f"positions <= {position} by up to {difference.max().item():.3g}. Use inclusive prefix sums "
                    "(cumsum over the token axis) for both the memory and the normalizer"
                )
            bidirectional = gma_from_responsibilities(gamma_q, gamma_k, v, eps=eps, impl="naive")
            if torch.allclose(got.double(), bidirectional, atol=1e-10):
                raise ExerciseError("the output equals bidirectional GMA: the memory must be a prefix sum")
            exclusive = _spec(gamma_q[..., 1:, :], gamma_k[..., :-1, :], v[..., :-1, :], eps)
            if torch.allclose(got[..., 1:, :].double(), exclusive, atol=1e-10):
                raise ExerciseError("position i reads keys j < i only: the prefix sums must include token i "
                                    "itself (inclusive cumsum, write before read)")
        compare(f"output for gamma_q of shape {tuple(gamma_q.shape)}", got, expected)
    return "and no future token leaks into the past."


@checker("6.2")
def check_recurrent_step(fn, *, seed: int = 0, eps: float = 1e-6) -> str:
    """Check ``fn(gamma_q_t, gamma_k_t, v_t, memory, normalizer, eps) -> (o_t, memory, normalizer)``.

    The checker starts from zero state, calls ``fn`` once per token, and compares the outputs with causal GMA.
    The state must keep its shape: ``memory`` ``(..., K, d_v)`` and ``normalizer`` ``(..., K)`` at every step.

    Args:
        fn: your step; ``gamma_q_t``, ``gamma_k_t`` ``(..., K)``, ``v_t`` ``(..., d_v)``, ``memory``
            ``(..., K, d_v)``, ``normalizer`` ``(..., K)``, ``eps`` a float.
        seed: seed of the random inputs.
        eps: the normalizer's floor passed to ``fn``.
    """
    for gamma_q, gamma_k, v in _causal_cases(seed):
        prefix, n_tokens, n_components = gamma_q.shape[:-2], gamma_q.shape[-2], gamma_q.shape[-1]
        memory = torch.zeros(*prefix, n_components, v.shape[-1], dtype=torch.float64)
        normalizer = torch.zeros(*prefix, n_components, dtype=torch.float64)
        outputs = []
        for t in range(n_tokens):
            got = call_reader(fn, gamma_q[..., t, :], gamma_k[..., t, :], v[..., t, :], memory, normalizer, eps)
            if not isinstance(got, tuple) or len(got) != 3:
                raise ExerciseError(f"return a triple (o_t, memory, normalizer), got {type(got).__name__}")
            output, memory, normalizer = got
            for name, state, shape in (("memory", memory, (*prefix, n_components, v.shape[-1])),
                                       ("normalizer", normalizer, (*prefix, n_components))):
                if not isinstance(state, torch.Tensor) or tuple(state.shape) != shape:
                    got_shape = tuple(state.shape) if isinstance(state, torch.Tensor) else type(state).__name__
                    raise ExerciseError(f"after token {t} the {name} has shape {got_shape}; the state must keep "
                                        f"its size {shape} whatever the position")
            outputs.append(output)
        expected = _spec(gamma_q, gamma_k, v, eps)
        if all(isinstance(o, torch.Tensor) and o.shape == expected[..., 0, :].shape for o in outputs):
            stacked = torch.stack(outputs, dim=-2)
            read_before_write = _spec(gamma_q[..., 1:, :], gamma_k[..., :-1, :], v[..., :-1, :], eps)
            if torch.allclose(stacked[..., 1:, :].double(), read_before_write, atol=1e-10):
                raise ExerciseError("you read the memory before writing token t: write (memory += gamma_k_t v_t^T, "
                                    "normalizer += gamma_k_t) first, then read")
            compare(f"outputs over {n_tokens} steps for gamma of shape {tuple(gamma_q.shape)}", stacked, expected)
        else:
            compare("o_t at step 0", outputs[0], expected[..., 0, :])
    return "constant-size state, same outputs as the parallel causal form."
