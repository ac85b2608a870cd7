"""Chapter 12's exercises: the decoding-state bytes of each mixer (12.1), routing that stores K pairs exactly (12.2),
the capacity of random routing (12.3) and a balanced assignment of a sequence's keys to slots (12.4).

Each checker calls your function, compares it with the formulas and with a measurement (the decoding states'
``nbytes()``, GMA's own write and read, a Monte Carlo of the chapter's demo, the layer's own balanced assignment),
and raises
:class:`~gma_teach.exercises.ExerciseError` naming the misconception, or prints "Exercise 12.N: correct" (the
protocol is in :mod:`gma_teach.exercises._common`).
"""
from __future__ import annotations

import math

import torch

from .. import capacity
from ..baselines import MIXERS
from ..layer import balanced_slot_assignment
from ..mixing import gma_from_responsibilities
from ._common import ExerciseError, call_reader, checker

__all__ = ["STATE_MIXERS", "check_balanced_assignment", "check_random_capacity", "check_separating_routing",
           "check_state_bytes"]

STATE_MIXERS = ("sdpa", "linear", "performer", "gma", "window", "local_gma", "decay_linear", "decay_gma")
"""The mixers of Exercise 12.1."""


# ------------------------------------------------------------------------------------------------ Exercise 12.1
def _state_bytes(mixer: str, sizes: dict) -> int:
    """The reference formulas of Exercise 12.1: bytes of one layer's decoding state at batch size 1."""
    n, d, h = sizes["seq_len"], sizes["d_model"], sizes["n_heads"]
    d_head, e = d // h, sizes["bytes_per_number"]
    k, m, w, local = sizes["n_components"], sizes["n_features"], sizes["window"], sizes["local_heads"]
    return {"sdpa": 2 * n * d * e,
            "linear": h * (d_head * d_head + d_head) * e,
            "decay_linear": h * (d_head * d_head + d_head) * e,
            "performer": h * (m * d_head + m + 1) * e,
            "gma": h * k * (d_head + 1) * e,
            "decay_gma": h * k * (d_head + 1) * e,
            "window": 2 * w * d * e,
            "local_gma": (2 * local * w * d_head + (h - local) * k * (d_head + 1)) * e}[mixer]


_SIZES = (
    dict(seq_len=37, d_model=60, n_heads=4, n_components=5, n_features=11, window=7, local_heads=1,
         bytes_per_number=4),
    dict(seq_len=64, d_model=64, n_heads=1, n_components=32, n_features=64, window=16, local_heads=0,
         bytes_per_number=4),
    dict(seq_len=101, d_model=96, n_heads=3, n_components=9, n_features=13, window=20, local_heads=2,
         bytes_per_number=8),
)


def _options(mixer: str, sizes: dict) -> dict:
    """The ``make_mixer`` options that give a mixer the sizes of ``sizes``."""
    k = sizes["n_components"]
    return {"gma": {"n_components": k}, "decay_gma": {"n_components": k},
            "performer": {"n_features": sizes["n_features"]}, "window": {"window": sizes["window"]},
            "local_gma": {"window": sizes["window"], "local_heads": sizes["local_heads"], "n_components": k},
            }.get(mixer, {})


def _state_bytes_mistake(mixer: str, sizes: dict, got: int) -> str | None:
    """The misconception behind a wrong count, when it is one of the common ones."""
    n, d, h = sizes["seq_len"], sizes["d_model"], sizes["n_heads"]
    d_head, e = d // h, sizes["bytes_per_number"]
    k, m = sizes["n_components"], sizes["n_features"]
    expected = _state_bytes(mixer, sizes)
    if got == expected // e:
        return "you counted numbers, not bytes: multiply by bytes_per_number"
    if mixer == "sdpa" and got == n * d * e:
        return "the KV cache holds the keys *and* the values: 2 N d numbers"
    if mixer in ("linear", "decay_linear") and got == h * d_head * d_head * e:
        return "you left out the normalizer Z: d_k more numbers per head"
    if mixer in ("linear", "decay_linear") and got == (d * d + d) * e and h > 1:
        return "the state is per head: d_head x d_head (+ d_head) per head, not d_model x d_model"
    if mixer == "performer" and got == h * (m * d_head + 1) * e:
        return "you left out the normalizer Z: m more numbers per head"
    if mixer == "performer" and got == h * (m * d_head + m) * e:
        return "you left out the running stabilizer: one more number per head"
    if mixer in ("gma", "decay_gma") and got == h * k * d_head * e:
        return "you left out the normalizer Z: K more numbers per head (K (d_v + 1) in all)"
    if mixer == "window" and got == sizes["window"] * d * e:
        return "the window holds w keys *and* w values"
    if mixer == "local_gma" and got == _state_bytes("window", sizes) + _state_bytes("gma", sizes):
        return ("the hybrid splits its heads: local_heads window heads and n_heads - local_heads GMA heads, "
                "each of d_model // n_heads")
    return None


def _measured(mixer: str, sizes: dict) -> int | None:
    """A built mixer's decoding state's ``nbytes()`` after ``seq_len`` tokens (float32 only), or ``None`` when the
    mixer is not in this copy's registry or the sizes do not fit it."""
    if mixer not in MIXERS or sizes["bytes_per_number"] != 4:
        return None
    if mixer == "local_gma" and not 1 <= sizes["local_heads"] < sizes["n_heads"]:
        return None
    torch.manual_seed(0)
    return capacity.measured_state_bytes(mixer, sizes["d_model"], sizes["n_heads"], sizes["seq_len"],
                                         **_options(mixer, sizes))


@checker("12.1")
def check_state_bytes(fn):
    """Exercise 12.1: check ``fn(mixer, sizes) -> bytes`` of one layer's decoding state at batch size 1.

    Args:
        fn: your function; ``mixer`` one of :data:`STATE_MIXERS`, ``sizes`` a dict with ``seq_len`` (N tokens
            decoded), ``d_model``, ``n_heads`` (``d_head = d_model // n_heads``), ``n_components`` (K),
            ``n_features`` (the performer's m), ``window`` (w), ``local_heads`` (the hybrid's window heads) and
            ``bytes_per_number`` -> an int. The checker compares it with the formulas at odd sizes and with the
            ``nbytes()`` of real decoding states (every mixer of the list that this copy's registry has).
    """
    measured = 0
    for sizes in _SIZES:
        for mixer in STATE_MIXERS:
            if mixer == "local_gma" and not 1 <= sizes["local_heads"] < sizes["n_heads"]:
                continue
            got = call_reader(fn, mixer, dict(sizes))
            if isinstance(got, torch.Tensor) and got.numel() == 1:
                got = got.item()
            if isinstance(got, float) and got.is_integer():
                got = int(got)
            if isinstance(got, bool) or not isinstance(got, int):
                raise ExerciseError(f"{mixer}: expected an int number of bytes, got {type(got).__name__}")
            expected = _state_bytes(mixer, sizes)
            if got != expected:
                hint = _state_bytes_mistake(mixer, sizes, got)
                raise ExerciseError(f"{mixer} with {sizes}: got {got:,} bytes, expected {expected:,}"
                                    + (f" ({hint})" if hint else ""))
            real = _measured(mixer, sizes)
            if real is not None:
                if real != expected:  # the formula and this copy's mixer disagree: the package's bug, not yours
                    raise RuntimeError(f"{mixer}: the formula gives {expected:,} bytes but its decoding state "
                                       f"holds {real:,}; please report this")
                measured += 1
    return f"the formulas match {measured} real states' nbytes()."


# ------------------------------------------------------------------------------------------------ Exercise 12.2
def _responsibilities(name: str, got, n_keys: int, n_slots: int) -> torch.Tensor:
    if not isinstance(got, torch.Tensor):
        raise ExerciseError(f"{name}: expected a torch.Tensor, got {type(got).__name__}")
    if tuple(got.shape) != (n_keys, n_slots):
        raise ExerciseError(f"{name}: expected shape ({n_keys}, {n_slots}) (one row per key, one column per slot), "
                            f"got {tuple(got.shape)}")
    if not got.is_floating_point():
        raise ExerciseError(f"{name}: expected floating-point responsibilities, got {got.dtype}")
    got = got.detach().double()
    if not torch.isfinite(got).all() or (got < 0).any():
        raise ExerciseError(f"{name}: responsibilities must be finite and non-negative")
    if not torch.allclose(got.sum(-1), torch.ones(n_keys, dtype=torch.float64), atol=1e-6):
        raise ExerciseError(f"{name}: every row must sum to 1 (responsibilities are a distribution over the slots); "
                            f"row sums range from {got.sum(-1).min():.4g} to {got.sum(-1).max():.4g}")
    return got


@checker("12.2")
def check_separating_routing(fn, *, seed: int = 0):
    """Exercise 12.2: check ``fn(keys, n_slots) -> route``, routing that stores every pair exactly.

    ``keys`` is a ``(n,)`` int64 tensor of distinct token ids (``n <= n_slots``), the keys of a context.
    ``route(tokens)`` must map any ``(m,)`` tensor of those ids to ``(m, n_slots)`` responsibilities (non-negative
    rows summing to 1), the same row for the same id whenever it is called. The checker writes one-hot values with
    ``route(keys)``, asks every key in a shuffled order with ``route(queries)``, runs both through
    :func:`gma_teach.mixing.gma_from_responsibilities`, and needs each read to hold its own value and nothing else.
    """
    generator = torch.Generator().manual_seed(seed)
    eps = 1e-6
    for n_keys, n_slots in ((1, 1), (3, 3), (5, 8), (16, 16), (7, 11)):
        keys = torch.randperm(1000, generator=generator)[:n_keys]
        route = call_reader(fn, keys.clone(), n_slots)
        if not callable(route):
            raise ExerciseError(f"expected a function route(tokens), got {type(route).__name__}")
        gamma_k = _responsibilities("route(keys)", call_reader(route, keys.clone()), n_keys, n_slots)
        order = torch.randperm(n_keys, generator=generator)
        gamma_q = _responsibilities("route(queries)", call_reader(route, keys[order].clone()), n_keys, n_slots)
        if not torch.equal(gamma_q, gamma_k[order]):
            raise ExerciseError("route gives a key a different row when it is asked in another order or another "
                                "call: a router sees one token and must answer the same way every time")
        values = torch.eye(n_keys, dtype=torch.float64)
        reads = gma_from_responsibilities(gamma_q, gamma_k, values, eps=eps)
        expected = values[order]
        overlap = gamma_k @ gamma_k.T
        for i in range(n_keys):
            for j in range(i + 1, n_keys):
                if overlap[i, j] > 0:
                    raise ExerciseError(
                        f"with {n_keys} keys in {n_slots} slots, keys {int(keys[i])} and {int(keys[j])} share slots "
                        f"(gamma_i . gamma_j = {overlap[i, j].item():.3g} > 0), so a read of one returns a mix of "
                        f"both values; give every key slots of its own")
        leaked = (reads * (1 - expected)).abs().max().item()
        own = (reads * expected).sum(-1).min().item()
        if leaked != 0 or own < 1 - 1e-3:
            raise ExerciseError(f"with {n_keys} keys in {n_slots} slots the reads are not exact: largest weight on "
                                f"another value {leaked:.3g}, smallest weight on the right one {own:.4f}")
    return "every read holds its own value, in any order."


# ------------------------------------------------------------------------------------------------ Exercise 12.3
def _expected_random(n_pairs: int, n_slots: int) -> float:
    """Expected accuracy of the demo with independent uniform slots and fairly broken ties: E[occupied slots] / n."""
    return n_slots * (1 - (1 - 1 / n_slots) ** n_pairs) / n_pairs


_RANDOM_MISTAKES = (
    (lambda n, k: min(1.0, k / n), "min(1, K/n) is the balanced (round-robin) routing; random slots collide before "
     "they are all used"),
    (lambda n, k: (1 - 1 / k) ** (n - 1), "(1 - 1/K)^(n-1) counts only keys alone in their slot; a fairly broken tie "
     "still answers one of the slot's keys: count the occupied slots"),
    (lambda n, k: k * (1 - math.exp(-n / k)) / n, "e^(-n/K) approximates (1 - 1/K)^n; use the exact probability that "
     "a slot stays empty"),
    (lambda n, k: (1 - 1 / k) ** n, "(1 - 1/K)^n is the probability that a given slot stays empty, not the accuracy"),
    (lambda n, k: k * (1 - (1 - 1 / k) ** (n - 1)) / n, "the exponent is n, not n - 1: a slot stays empty when all "
     "n keys miss it, (1 - 1/K)^n"),
)


@checker("12.3")
def check_random_capacity(fn, *, n_trials: int = 4000, seed: int = 0):
    """Exercise 12.3: check ``fn(n_pairs, n_slots) -> expected recall accuracy`` when every key lands in a slot
    drawn uniformly and independently, ties broken by a fair coin.

    The checker runs the chapter's demo ``n_trials`` times at each size
    (:func:`gma_teach.capacity.random_slot_recall`) and needs your prediction within four standard errors of the
    Monte Carlo, and then equal to the exact expectation (to 1e-9).
    """
    answers = {}  # every size first: a mistake is named only when its formula gives every one of your answers
    for n_pairs, n_slots in ((1, 1), (2, 1), (3, 4), (8, 8), (12, 5), (20, 16), (40, 16)):
        got = call_reader(fn, n_pairs, n_slots)
        if isinstance(got, torch.Tensor) and got.numel() == 1:
            got = got.item()
        if isinstance(got, bool) or not isinstance(got, (int, float)) or not math.isfinite(got):
            raise ExerciseError(f"n_pairs={n_pairs}, n_slots={n_slots}: expected a finite float, got {got!r}")
        answers[n_pairs, n_slots] = got
    # at K = 1 several formulas agree (every slot is the one slot), so one size alone could name the wrong mistake
    hint = next((text for formula, text in _RANDOM_MISTAKES
                 if all(abs(got - formula(n, k)) <= 1e-9 for (n, k), got in answers.items())), None)
    for (n_pairs, n_slots), got in answers.items():
        mean, error = capacity.random_slot_recall(n_pairs, n_slots, n_trials, seed=seed)
        where = f"n_pairs={n_pairs}, n_slots={n_slots}: got {got:.6f}, the demo's Monte Carlo {mean:.4f} +- {error:.4f}"
        if abs(got - mean) > 4 * error + 1e-12:
            raise ExerciseError(f"{where}: yours is more than four standard errors away"
                                + (f" ({hint})" if hint else ""))
        if abs(got - _expected_random(n_pairs, n_slots)) > 1e-9:
            raise ExerciseError(f"{where}: close to the demo but not the exact expectation"
                                + (f" ({hint})" if hint else ""))
    return "occupied slots over n, as the Monte Carlo shows."


# ------------------------------------------------------------------------------------------------ Exercise 12.4
def _keys_in_order(scores: torch.Tensor) -> torch.Tensor:
    """The misconception of placing the keys in their order, each in its best slot still open at its level."""
    n_keys, n_slots = scores.shape
    held, slots = [0] * n_slots, []
    for t in range(n_keys):
        level = min(held)
        slot = max((k for k in range(n_slots) if held[k] == level), key=lambda k: float(scores[t, k]))
        held[slot] += 1
        slots.append(slot)
    return torch.tensor(slots)


@checker("12.4")
def check_balanced_assignment(fn, *, seed: int = 0):
    """Exercise 12.4: check ``fn(scores) -> slots``, the balanced assignment of one sequence's keys to slots.

    ``scores`` is a ``(n, K)`` float64 tensor, each key's log responsibilities. ``slots`` must be a ``(n,)`` integer
    tensor: the greedy level-filling assignment, which repeatedly places the highest-scoring (key, slot) pair among
    the keys not yet placed and the slots holding the fewest keys. The checker compares it with
    :func:`gma_teach.layer.balanced_slot_assignment` at ``n`` below, at and above ``K``.
    """
    generator = torch.Generator().manual_seed(seed)
    for n_keys, n_slots in ((1, 1), (3, 5), (6, 6), (9, 4), (13, 5)):
        scores = torch.log_softmax(2 * torch.randn(n_keys, n_slots, generator=generator, dtype=torch.float64), -1)
        got = call_reader(fn, scores.clone())
        where = f"n={n_keys} keys, K={n_slots} slots"
        if not isinstance(got, torch.Tensor) or got.is_floating_point() or tuple(got.shape) != (n_keys,):
            what = (f"a {got.dtype} tensor of shape {tuple(got.shape)}" if isinstance(got, torch.Tensor)
                    else type(got).__name__)
            raise ExerciseError(f"{where}: expected a ({n_keys},) integer tensor, one slot per key, got {what}")
        got = got.long()
        if ((got < 0) | (got >= n_slots)).any():
            raise ExerciseError(f"{where}: every slot must lie in [0, {n_slots}), got {got.tolist()}")
        counts = torch.bincount(got, minlength=n_slots)
        if int(counts.max()) - int(counts.min()) > 1:
            raise ExerciseError(
                f"{where}: the slots hold {counts.tolist()} keys; a balanced assignment fills every slot once before "
                "any slot takes a second key" + (" (this is each key's own best slot: keys that prefer the same slot "
                                                 "collide)" if torch.equal(got, scores.argmax(-1)) else ""))
        expected = balanced_slot_assignment(scores)[0]
        if not torch.equal(got, expected):
            hint = (" You placed the keys in their order; greedy places the best pair among all keys not yet placed "
                    "first, so a key that wants a slot more takes it." if torch.equal(got, _keys_in_order(scores))
                    else "")
            raise ExerciseError(f"{where}: balanced, but not the greedy assignment: got {got.tolist()}, expected "
                                f"{expected.tolist()}.{hint}")
    return "every slot filled level by level, the most likely pairs first."
