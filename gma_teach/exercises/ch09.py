"""Chapter 9's exercises: the multi-head GMA layer built from its parts, and cross-attention with padded keys.

* Exercise 9.1, :func:`check_multi_head_gma`: your forward of a bidirectional
  :class:`~gma_teach.GaussianMixtureAttention` (project, split into heads, one mixture per head, write and read
  the K-slot memory, merge the heads, project out) against the layer itself;
* Exercise 9.2, :func:`check_cross_attention_gma`: queries from one sequence, keys and values from another whose
  padding must write nothing, against ``layer(x, context=..., key_padding_mask=...)``.

Both run in float64 on layers of odd sizes (``d_route != d_value``) with perturbed mixtures, raise
:class:`~gma_teach.exercises.ExerciseError` naming the misconception, or print "Exercise 9.N: correct" (the
protocol is in :mod:`gma_teach.exercises._common`).

:func:`check_listops_evaluator` and :func:`check_listops_tokenizer` (ListOps plumbing, the exercises of an earlier
edition) stay importable; they return a message instead of printing.
"""
from __future__ import annotations

import copy

import torch

from ..data import listops
from ..layer import GaussianMixtureAttention
from ._common import ExerciseError, call_reader, checker, compare

__all__ = ["check_cross_attention_gma", "check_listops_evaluator", "check_listops_tokenizer",
           "check_multi_head_gma"]

# (batch, tokens, context tokens, d_model, heads, K, d_route, d_value): odd sizes, d_route != d_value
_LAYER_SIZES = ((2, 7, 5, 12, 3, 5, None, None), (1, 11, 13, 10, 2, 4, 3, 7), (3, 5, 9, 8, 4, 6, 2, 3))


def _refuse_forward(*args, **kwargs):
    raise ExerciseError("build the output from the layer's parts (projections, mixture, memory); calling "
                        "layer(x) or layer.forward is the thing to write")


def _layers(seed: int):
    """Float64 layers with perturbed mixtures, their inputs, and a copy whose forward refuses to run."""
    generator = torch.Generator().manual_seed(seed)
    for batch, n_tokens, n_context, d_model, n_heads, n_components, d_route, d_value in _LAYER_SIZES:
        torch.manual_seed(int(torch.randint(0, 2**31 - 1, (), generator=generator)))
        layer = GaussianMixtureAttention(d_model, n_heads, n_components, d_route=d_route, d_value=d_value,
                                         impl="naive").double()
        with torch.no_grad():  # distinct variances and priors, so a mistake in either shows
            layer.mixture.raw_variances.add_(0.5 * torch.randn_like(layer.mixture.raw_variances))
            layer.mixture.prior_logits.add_(torch.randn_like(layer.mixture.prior_logits))
        x = torch.randn(batch, n_tokens, d_model, generator=generator, dtype=torch.float64)
        context = torch.randn(batch, n_context, d_model, generator=generator, dtype=torch.float64)
        lengths = torch.randint(1, n_context + 1, (batch,), generator=generator)
        lengths[0] = n_context - 1 if n_context > 1 else 1  # at least one row has padding
        mask = torch.arange(n_context)[None, :] < lengths[:, None]  # True = real key
        blocked = copy.deepcopy(layer)
        blocked.forward = _refuse_forward
        yield layer, blocked, x, context, mask


def _heads_without_transpose(layer, t, width):
    """The classic slip: ``(B, N, H * w)`` viewed as ``(B, H, N, w)`` without moving the head axis."""
    return t.reshape(t.shape[0], layer.n_heads, t.shape[1], width)


def _mix(layer, q, k, v):
    """Reference GMA per head from projected ``(B, H, N, d)`` tensors."""
    gamma_q, gamma_k = layer.mixture(q), layer.mixture(k)
    memory, normalizer = gamma_k.transpose(-1, -2) @ v, gamma_k.sum(-2)
    return (gamma_q @ memory) / (gamma_q @ normalizer.unsqueeze(-1) + layer.eps)


def _merge(layer, output):
    return layer.out_proj(output.transpose(1, 2).flatten(-2))


def _split(layer, t, width):
    return t.unflatten(-1, (layer.n_heads, width)).transpose(1, 2)


@checker("9.1")
def check_multi_head_gma(fn, *, seed: int = 0):
    """Exercise 9.1: check ``fn(layer, x) -> (B, N, d_model)``, a bidirectional GMA layer's forward by hand.

    Args:
        fn: your function; ``layer`` a :class:`~gma_teach.GaussianMixtureAttention` (``causal=False``; use its
            ``q_proj``, ``k_proj``, ``v_proj``, ``out_proj``, ``mixture``, ``n_heads``, ``d_route``, ``d_value``
            and ``eps``; calling ``layer(x)`` itself is refused), ``x`` ``(B, N, d_model)`` float64.
        seed: seed of the random layers and inputs.
    """
    for layer, blocked, x, _, _ in _layers(seed):
        with torch.no_grad():
            expected = layer(x)
            got = call_reader(fn, blocked, x)
            if isinstance(got, torch.Tensor) and got.shape[:-1] == expected.shape[:-1] and \
                    got.shape[-1] == layer.n_heads * layer.d_value != layer.d_model:
                raise ExerciseError(f"the output has H * d_v = {got.shape[-1]} features: merge the heads and apply "
                                    f"layer.out_proj to get d_model = {layer.d_model}")
            if isinstance(got, torch.Tensor) and got.shape == expected.shape:
                d_r, d_v = layer.d_route, layer.d_value
                q, k, v = layer.q_proj(x), layer.k_proj(x), layer.v_proj(x)
                no_transpose = _merge(layer, _mix(layer, _heads_without_transpose(layer, q, d_r),
                                                  _heads_without_transpose(layer, k, d_r),
                                                  _heads_without_transpose(layer, v, d_v)))
                if torch.allclose(got, no_transpose, atol=1e-8):
                    raise ExerciseError("the heads are mixed up: (B, N, H * d) must be unflattened to (B, N, H, d) "
                                        "and then transposed to (B, H, N, d); reshaping straight to (B, H, N, d) "
                                        "cuts the sequence, not the features, into heads")
                merged = _mix(layer, _split(layer, q, d_r), _split(layer, k, d_r), _split(layer, v, d_v))
                merged = merged.transpose(1, 2).flatten(-2)
                if merged.shape == got.shape and torch.allclose(got, merged, atol=1e-8):
                    raise ExerciseError("the merged heads are the right numbers, but the layer ends with "
                                        "layer.out_proj: apply it to the merged (B, N, H * d_v) output")
                k_as_query = _merge(layer, _mix(layer, _split(layer, k, d_r), _split(layer, q, d_r),
                                                _split(layer, v, d_v)))
                if torch.allclose(got, k_as_query, atol=1e-8) and not torch.allclose(got, expected, atol=1e-8):
                    raise ExerciseError("queries and keys are swapped: gamma_q = mixture(q_proj(x)) reads the "
                                        "memory that gamma_k = mixture(k_proj(x)) writes")
        compare(f"output for x of shape {tuple(x.shape)} (H={layer.n_heads}, K={layer.n_components}, "
                f"d_route={layer.d_route}, d_value={layer.d_value})", got, expected, atol=1e-9, rtol=1e-7)
    return "heads split and merged, one mixture per head, the K-slot memory read by every query."


@checker("9.2")
def check_cross_attention_gma(fn, *, seed: int = 0):
    """Exercise 9.2: check ``fn(layer, x, context, context_mask) -> (B, N, d_model)``, cross-attention GMA.

    Queries come from ``x`` ``(B, N, d_model)``; keys and values from ``context`` ``(B, M, d_model)``, whose
    padded positions (``context_mask`` ``(B, M)`` bool, ``True`` = real token) must write nothing into the memory.
    Compared with ``layer(x, context=context, key_padding_mask=context_mask)``.
    """
    for layer, blocked, x, context, mask in _layers(seed):
        with torch.no_grad():
            expected = layer(x, context=context, key_padding_mask=mask)
            got = call_reader(fn, blocked, x, context, mask.clone())
            if isinstance(got, torch.Tensor) and got.shape == expected.shape:
                d_r, d_v = layer.d_route, layer.d_value
                q = _split(layer, layer.q_proj(x), d_r)
                k = _split(layer, layer.k_proj(context), d_r)
                v = _split(layer, layer.v_proj(context), d_v)
                unmasked = _merge(layer, _mix(layer, q, k, v))
                if torch.allclose(got, unmasked, atol=1e-8):
                    raise ExerciseError("padded context tokens still write into the memory: set their key "
                                        "responsibilities gamma_k to 0 (for memory and normalizer alike)")
                zero_values = _merge(layer, _mix(layer, q, k, v * mask[:, None, :, None]))
                if torch.allclose(got, zero_values, atol=1e-8):
                    raise ExerciseError("zeroing the padded values is not enough: their gamma_k still adds to the "
                                        "normalizer Gamma_K^T 1, which shrinks every output; mask gamma_k instead")
                self_attention = layer(x)
                if torch.allclose(got, self_attention, atol=1e-8):
                    raise ExerciseError("this is self-attention on x: keys and values come from the context")
        compare(f"output for x {tuple(x.shape)}, context {tuple(context.shape)}", got, expected, atol=1e-9,
                rtol=1e-7)
    return "queries read a memory written by the context only, and padding writes nothing."

_HINTS = {
    listops.MED: "[MED is int(np.median(args)): for an even count, the mean of the two middle values, truncated",
    listops.SUM_MOD: "[SM is the sum of the arguments modulo 10",
    listops.MIN: "[MIN is the smallest argument",
    listops.MAX: "[MAX is the largest argument",
}

_HAND_MADE = (
    "[MAX 2 9 [MIN 4 7 ] 0 ]",
    "[MED 1 2 3 4 ]",
    "[MED 3 8 ]",
    "[MED 7 1 9 ]",
    "[SM 5 7 9 ]",
    "[SM [MED 9 8 ] [MAX 0 4 ] ]",
    "[MIN [MAX [SM 9 9 ] 3 ] [MED 6 6 7 8 ] ]",
    "( ( ( [MAX 2 ) 9 ) ] )",
)


def _first_operator_hint(source: str) -> str:
    for token in listops.tokenize(source):
        if token in _HINTS:
            return _HINTS[token]
    return ""


def check_listops_evaluator(fn, *, n_random: int = 200, seed: int = 0) -> str:
    """Check ``fn(source: str) -> int``, the value of a ListOps expression.

    ``source`` may be LRA's parenthesized text form (``( ( ( [MAX 2 ) 9 ) ] )``) or the bare form
    (``[MAX 2 9 ]``); your function should ignore parentheses. Random expressions go up to depth 6.
    """
    generated = [s for s, _ in listops.generate(n_random, max_depth=6, max_args=6, min_length=10, max_length=200,
                                                 seed=seed)]
    for source in list(_HAND_MADE) + generated:
        expected = listops.evaluate(source)
        got = call_reader(fn, source)
        if type(got).__module__ == "numpy" and hasattr(got, "item"):  # a numpy integer is fine
            got = got.item()
        if isinstance(got, bool) or not isinstance(got, int):
            raise ExerciseError(f"expected a Python int for {source[:60]!r}, got {type(got).__name__} {got!r}")
        if got != expected:
            shown = source if len(source) <= 120 else source[:117] + "..."
            n_operators = sum(token in listops.OPERATORS for token in listops.tokenize(source))
            hint = _first_operator_hint(source) if n_operators == 1 else (
                "Look at nesting: an operator's argument may itself be an expression, evaluated before the outer "
                "operator is applied (a stack of open operators does it)")
            raise ExerciseError(f"{shown!r} evaluates to {expected}, your function returned {got}. {hint}")
    return f"correct on {len(_HAND_MADE)} hand-made and {n_random} generated expressions"


def check_listops_tokenizer(fn, *, n_random: int = 50, seed: int = 0) -> str:
    """Check ``fn(source: str) -> list[str]``: LRA's preprocessing (drop ``(`` and ``)``, map ``]`` to ``X``, split
    on whitespace)."""
    generated = [s for s, _ in listops.generate(n_random, max_depth=5, max_args=5, min_length=5, max_length=80,
                                                 seed=seed)]
    for source in list(_HAND_MADE) + ["( ( [SM 1 ) ] )", "7"] + generated:
        expected = listops.tokenize(source)
        got = call_reader(fn, source)
        if not isinstance(got, list) or not all(isinstance(t, str) for t in got):
            raise ExerciseError(f"expected a list of str for {source[:60]!r}, got {type(got).__name__}")
        if got != expected:
            if any(t in ("(", ")") for t in got):
                problem = "parentheses must be dropped"
            elif "]" in got:
                problem = "']' must become 'X'"
            elif len(got) != len(expected):
                problem = f"got {len(got)} tokens, expected {len(expected)}"
            else:
                index = next(i for i, (a, b) in enumerate(zip(got, expected)) if a != b)
                problem = f"token {index} is {got[index]!r}, expected {expected[index]!r}"
            raise ExerciseError(f"tokenizing {source[:60]!r}: {problem}")
    return f"correct on {len(_HAND_MADE) + 2 + n_random} expressions"
