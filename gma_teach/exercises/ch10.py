"""Chapter 10's exercises: pack a token stream into LM blocks, compute perplexity, and size GMA's decoding state.

The checkers compare your function with :func:`gma_teach.data.wikitext.pack`, with ``torch``'s cross entropy in
float64, and with the tensors that :meth:`gma_teach.GaussianMixtureAttention.init_state` actually allocates. They
raise :class:`~gma_teach.exercises.ExerciseError` saying what is wrong, or return a short success message.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..data.wikitext import pack
from ._common import ExerciseError, call_reader, compare

__all__ = ["check_pack", "check_perplexity", "check_state_bytes"]


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
    from ..layer import GaussianMixtureAttention

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
