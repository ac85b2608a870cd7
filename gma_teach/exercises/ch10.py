"""Chapter 10's exercises: chunked causal GMA, and a sweep over the number of components K.

* Exercise 10.1, :func:`check_chunked_causal_gma`: causal GMA by chunks (a masked ``C x C`` block inside each
  chunk plus the state carried from the chunks before), compared with the ``N x N`` spec on odd sizes, with the
  future perturbed (the past must not change by a single bit) and with its peak memory measured against the
  ``(N, K, d_v)`` tensor of the prefix-sum form;
* Exercise 10.2, :func:`check_k_sweep`: your sweep's trained models, validation losses and decoding-state sizes,
  re-measured by the checker.

They raise :class:`~gma_teach.exercises.ExerciseError` naming the misconception, or print "Exercise 10.N: correct"
(the protocol is in :mod:`gma_teach.exercises._common`).

:func:`check_pack`, :func:`check_perplexity` and :func:`check_state_bytes` (the exercises of an earlier edition)
stay importable; they return a message instead of printing.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .. import measure
from ..data.wikitext import pack
from ..layer import GaussianMixtureAttention
from ..mixing import gma_from_responsibilities
from ..train import evaluate
from ._common import ExerciseError, call_reader, checker, compare

__all__ = ["check_chunked_causal_gma", "check_k_sweep", "check_pack", "check_perplexity", "check_state_bytes"]


def _causal_spec(gamma_q, gamma_k, v, eps):
    return gma_from_responsibilities(gamma_q, gamma_k, v, causal=True, eps=eps, impl="naive")


def _chunk_cases(seed: int):
    """(gamma_q, gamma_k, v, chunk_size) in float64: N a multiple of C first, then not; batch and head axes."""
    generator = torch.Generator().manual_seed(seed)
    for prefix, n_tokens, n_components, d_value, chunk_size in (((), 12, 3, 5, 4), ((2,), 15, 4, 3, 5),
                                                                ((2, 3), 13, 5, 6, 4), ((1,), 7, 3, 2, 16)):
        gamma_q = torch.randn(*prefix, n_tokens, n_components, generator=generator, dtype=torch.float64)
        gamma_k = torch.randn(*prefix, n_tokens, n_components, generator=generator, dtype=torch.float64)
        v = torch.randn(*prefix, n_tokens, d_value, generator=generator, dtype=torch.float64)
        yield gamma_q.mul(2).softmax(-1), gamma_k.mul(2).softmax(-1), v, chunk_size


def _block_diagonal(gamma_q, gamma_k, v, eps, chunk_size):
    """Causal GMA inside each chunk only: the carried state forgotten."""
    n_tokens = gamma_q.shape[-2]
    pieces = [_causal_spec(gamma_q[..., s:s + chunk_size, :], gamma_k[..., s:s + chunk_size, :],
                           v[..., s:s + chunk_size, :], eps) for s in range(0, n_tokens, chunk_size)]
    return torch.cat(pieces, dim=-2)


def _strictly_causal(gamma_q, gamma_k, v, eps):
    """Position i reading keys j < i only (the diagonal masked out)."""
    scores = (gamma_q @ gamma_k.transpose(-1, -2)).tril(-1)
    return (scores @ v) / (scores.sum(-1, keepdim=True) + eps)


@checker("10.1")
def check_chunked_causal_gma(fn, *, seed: int = 0, eps: float = 1e-6):
    """Exercise 10.1: check ``fn(gamma_q, gamma_k, v, eps, chunk_size) -> (..., N, d_v)``, chunked causal GMA.

    Args:
        fn: your function; ``gamma_q``, ``gamma_k`` ``(..., N, K)``, ``v`` ``(..., N, d_v)``, ``eps`` a float,
            ``chunk_size`` an int ``C`` (``N`` need not be a multiple of ``C``).
        seed: seed of the random inputs.
        eps: the normalizer's floor passed to ``fn``.

    Checks: equality with the ``N x N`` causal spec (float64); *exact* causality (keys and values after a
    position changed, outputs up to it bit for bit the same); and memory: at ``N = 1024``, ``K = d_v = 64``,
    ``C = 32`` in float32 the peak bytes your function allocates must stay under a quarter of the ``(N, K, d_v)``
    tensor that the prefix-sum form materializes (chunking needs ``O(N C + (N / C) K d_v)``).
    """
    for gamma_q, gamma_k, v, chunk_size in _chunk_cases(seed):
        n_tokens = gamma_q.shape[-2]
        where = f"gamma_q of shape {tuple(gamma_q.shape)}, chunk_size={chunk_size}"
        try:
            got = call_reader(fn, gamma_q, gamma_k, v, eps, chunk_size)
        except ExerciseError as error:
            if n_tokens % chunk_size:
                raise ExerciseError(f"{error} (for {where}: N={n_tokens} is not a multiple of C={chunk_size}; pad "
                                    "the last chunk with gamma_k = 0 keys, which write nothing, and cut the output "
                                    "back to N rows)") from error
            raise
        expected = _causal_spec(gamma_q, gamma_k, v, eps)
        if isinstance(got, torch.Tensor) and got.shape == expected.shape:
            if n_tokens > chunk_size and torch.allclose(got.double(), _block_diagonal(gamma_q, gamma_k, v, eps,
                                                                                      chunk_size), atol=1e-10):
                raise ExerciseError("each chunk only sees its own tokens: carry the memory and normalizer of all "
                                    "earlier chunks (an exclusive prefix sum over chunks) into the chunk")
            if torch.allclose(got.double(), _strictly_causal(gamma_q, gamma_k, v, eps), atol=1e-10):
                raise ExerciseError("position i reads keys j < i only: the in-chunk mask must keep the diagonal "
                                    "(tril(), not tril(-1)): token i writes before it reads")
            if torch.allclose(got.double(), gma_from_responsibilities(gamma_q, gamma_k, v, eps=eps, impl="naive"),
                              atol=1e-10):
                raise ExerciseError("the output equals bidirectional GMA: mask the in-chunk block and carry only "
                                    "earlier chunks' state")
            position = n_tokens // 2 - 1
            gamma_k_changed, v_changed = gamma_k.clone(), v.clone()
            gamma_k_changed[..., position + 1:, :] = gamma_k_changed[..., position + 1:, :].flip(-1)
            v_changed[..., position + 1:, :] += 3.0
            changed = call_reader(fn, gamma_q, gamma_k_changed, v_changed, eps, chunk_size)
            leak = (changed[..., : position + 1, :] - got[..., : position + 1, :]).abs().max().item()
            if leak > 0:
                raise ExerciseError(
                    f"the future leaks: changing keys and values after position {position} changed the outputs at "
                    f"positions <= {position} by up to {leak:.3g} ({where}). A state computed as the inclusive "
                    "prefix minus the chunk's own sum leaks through rounding; shift the prefix sum by one chunk "
                    "instead, and mask the in-chunk scores before multiplying by V")
        compare(f"output for {where}", got, expected)
    n_tokens, n_components, d_value, chunk_size = 1024, 64, 64, 32
    generator = torch.Generator().manual_seed(seed)
    gamma_q = torch.randn(1, n_tokens, n_components, generator=generator).softmax(-1)
    gamma_k = torch.randn(1, n_tokens, n_components, generator=generator).softmax(-1)
    v = torch.randn(1, n_tokens, d_value, generator=generator)
    peak = measure.peak_memory(lambda: call_reader(fn, gamma_q, gamma_k, v, eps, chunk_size))
    prefix_tensor = n_tokens * n_components * d_value * v.element_size()
    if peak > prefix_tensor / 4:
        raise ExerciseError(
            f"at N={n_tokens}, K={n_components}, d_v={d_value}, C={chunk_size} (float32) your function held "
            f"{peak / 2**20:.1f} MiB at its peak; the (N, K, d_v) prefix-sum tensor alone is "
            f"{prefix_tensor / 2**20:.1f} MiB and chunking should stay under a quarter of it. Do not materialize a "
            "state per token: keep one (K, d_v) state per chunk and the C x C in-chunk scores")
    return (f"exact, causal to the bit, and {peak / 2**20:.1f} MiB at N={n_tokens} where the prefix-sum form "
            f"materializes {prefix_tensor / 2**20:.0f} MiB.")


def _gma_layers(model):
    return [module for module in model.modules() if isinstance(module, GaussianMixtureAttention)]


def _state_bytes(model) -> int:
    return sum(layer.init_state(1).nbytes() for layer in _gma_layers(model))


@checker("10.2")
def check_k_sweep(fn, ks, data, *, batch_size: int = 8):
    """Exercise 10.2: check ``fn(ks) -> list of dicts``, one per ``K`` in ``ks``, in order.

    Each dict holds ``n_components`` (K), ``model`` (the trained :class:`~gma_teach.models.DecoderLM`),
    ``val_loss`` (its validation loss on ``data.val``, nats per token), ``tokens_per_second`` (training) and
    ``state_bytes`` (the bytes of the model's decoding state at batch size 1, all GMA layers). The checker
    re-measures the loss and the state of every model.

    Args:
        fn: your sweep.
        ks: the values of K to sweep (at least two).
        data: the chapter's :class:`~gma_teach.data.wikitext.LMData` (its ``val`` blocks re-measure the losses).
        batch_size: batch size of the re-measurement.
    """
    ks = [int(k) for k in ks]
    if len(ks) < 2 or len(set(ks)) != len(ks):
        raise ValueError(f"ks must hold at least two distinct values of K, got {ks}")
    rows = call_reader(fn, list(ks))
    if not isinstance(rows, (list, tuple)) or len(rows) != len(ks):
        raise ExerciseError(f"return a list with one dict per K in {ks}, got {type(rows).__name__}"
                            + (f" of length {len(rows)}" if isinstance(rows, (list, tuple)) else ""))
    required = ("n_components", "model", "val_loss", "tokens_per_second", "state_bytes")
    models = []
    for k, row in zip(ks, rows):
        if not isinstance(row, dict) or any(key not in row for key in required):
            raise ExerciseError(f"each row must be a dict with keys {required}; the row for K={k} is "
                                f"{sorted(row) if isinstance(row, dict) else type(row).__name__}")
        if row["n_components"] != k:
            raise ExerciseError(f"rows must follow ks = {ks}; found n_components={row['n_components']} where K={k}")
        model = row["model"]
        layers = _gma_layers(model) if isinstance(model, torch.nn.Module) else []
        if not layers:
            raise ExerciseError(f"the model for K={k} has no GaussianMixtureAttention layer")
        if any(layer.n_components != k for layer in layers):
            raise ExerciseError(f"the model for K={k} has layers with K={sorted({g.n_components for g in layers})}: "
                                "build a new model for every K")
        if any(model is other for other in models):
            raise ExerciseError("two rows share one model object: train a separate model for every K")
        models.append(model)
        measured = evaluate(model, data.val, task="lm", batch_size=batch_size)["loss"]
        if not isinstance(row["val_loss"], (int, float)) or not math.isclose(row["val_loss"], measured, rel_tol=1e-3):
            raise ExerciseError(f"K={k}: val_loss is {row['val_loss']!r}, but the returned model's loss on data.val "
                                f"is {measured:.4f}: report the validation loss of the model you return "
                                "(train.evaluate on data.val), not the training loss")
        if measured >= math.log(model.vocab_size):
            raise ExerciseError(f"K={k}: the validation loss {measured:.3f} is no better than a uniform guess "
                                f"(ln V = {math.log(model.vocab_size):.3f}): the model was not trained")
        speed = row["tokens_per_second"]
        if isinstance(speed, bool) or not isinstance(speed, (int, float)) or not 0 < speed < math.inf:
            raise ExerciseError(f"K={k}: tokens_per_second must be a positive number, got {speed!r}")
        expected_bytes = _state_bytes(model)
        if row["state_bytes"] != expected_bytes:
            memory_only = sum(layer.init_state(1).memory.numel() * layer.init_state(1).memory.element_size()
                              for layer in layers)
            hint = (" (you left out the normalizer, (H, K) per layer)" if row["state_bytes"] == memory_only else
                    " (count every GMA layer)" if row["state_bytes"] * len(layers) == expected_bytes else "")
            raise ExerciseError(f"K={k}: state_bytes is {row['state_bytes']!r}; the model's decoding state holds "
                                f"{expected_bytes} bytes{hint}")
    return "; ".join(f"K={row['n_components']}: loss {row['val_loss']:.3f}, {row['state_bytes']:,} B of state"
                     for row in rows)


def check_pack(fn, *, seed: int = 0) -> str:
    """Check ``fn(stream (T,) int64, block_size) -> (n_blocks, block_size + 1)``: non-overlapping blocks whose
    inputs ``[:, :-1]`` and targets ``[:, 1:]`` each cover the stream once (the incomplete tail dropped)."""
    generator = torch.Generator().manual_seed(seed)
    for length, block_size in ((23, 5), (101, 10), (64, 7), (11, 10)):
        stream = torch.randint(0, 1000, (length,), generator=generator)
        got = call_reader(fn, stream, block_size)
        expected = pack(stream, block_size)
        if isinstance(got, torch.Tensor) and got.dim() == 2 and got.shape[1] == block_size:
            raise ExerciseError(f"blocks have {block_size} tokens; they need block_size + 1 = {block_size + 1} so "
                                "that the last input position has a target")
        if isinstance(got, torch.Tensor) and got.dim() == 2 and got.shape[1] == block_size + 1 and not (
                got.shape == expected.shape and torch.equal(got, expected)):
            n_blocks = got.shape[0]
            if 0 < n_blocks * (block_size + 1) <= length and torch.equal(
                    got, stream[: n_blocks * (block_size + 1)].view(n_blocks, block_size + 1)):
                raise ExerciseError("block i must start at i * block_size (consecutive blocks share one token); "
                                    "starting at i * (block_size + 1) leaves each boundary token without a "
                                    "prediction")
        compare(f"pack(stream of {length}, block_size={block_size})", got, expected, atol=0, rtol=0)
    return "correct on 4 streams"


def check_perplexity(fn, *, seed: int = 0) -> str:
    """Check ``fn(logits (B, N, V), targets (B, N)) -> float``: ``exp`` of the mean next-token cross entropy."""
    generator = torch.Generator().manual_seed(seed)
    for batch, length, vocab in ((2, 7, 11), (3, 5, 50), (1, 13, 3)):
        logits = torch.randn(batch, length, vocab, generator=generator, dtype=torch.float64) * 3
        targets = torch.randint(0, vocab, (batch, length), generator=generator)
        got = call_reader(fn, logits, targets)
        if isinstance(got, torch.Tensor):
            if got.numel() != 1:
                raise ExerciseError(f"expected one number, got a tensor of shape {tuple(got.shape)}")
            got = got.item()
        if not isinstance(got, (float, int)):
            raise ExerciseError(f"expected a float, got {type(got).__name__}")
        loss = F.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1))
        expected = math.exp(loss.item())
        if abs(got - loss.item()) < 1e-9 * max(1.0, abs(loss.item())):
            raise ExerciseError("you returned the cross entropy itself; perplexity is its exponential")
        mean_probability = logits.softmax(-1).gather(-1, targets[..., None]).mean().item()
        if abs(got - 1 / mean_probability) < 1e-6 * expected:
            raise ExerciseError("perplexity is exp(mean(-log p)), not 1 / mean(p): average the log-probabilities")
        if not math.isclose(got, expected, rel_tol=1e-6):
            raise ExerciseError(f"perplexity for logits of shape {(batch, length, vocab)}: got {got:.6g}, expected "
                                f"{expected:.6g} (exp of the mean cross entropy over all B * N positions)")
    return "correct on 3 random batches"


def check_state_bytes(fn) -> str:
    """Check ``fn(batch, n_heads, n_components, d_value, bytes_per_element) -> int``: the bytes of one causal GMA
    layer's decoding state (memory ``(B, H, K, d_v)`` and normalizer ``(B, H, K)``), measured on real states."""

    for batch, n_heads, n_components, d_value, dtype in ((1, 2, 8, 4, torch.float32), (3, 4, 16, 8, torch.float64),
                                                         (2, 1, 5, 3, torch.float32)):
        layer = GaussianMixtureAttention(n_heads * d_value, n_heads, n_components, causal=True).to(dtype)
        state = layer.init_state(batch)
        expected = sum(t.numel() * t.element_size() for t in (state.memory, state.normalizer))
        element = torch.empty((), dtype=dtype).element_size()
        got = call_reader(fn, batch, n_heads, n_components, d_value, element)
        if not isinstance(got, int) or isinstance(got, bool):
            raise ExerciseError(f"expected an int number of bytes, got {type(got).__name__}")
        if got != expected:
            memory = batch * n_heads * n_components * d_value * element
            detail = " (you left out the normalizer z, (B, H, K))" if got == memory else ""
            raise ExerciseError(f"B={batch}, H={n_heads}, K={n_components}, d_v={d_value}, {element}-byte elements: "
                                f"the state holds {expected} bytes, you returned {got}{detail}")
    return "correct on 3 layer sizes (measured from init_state)"
