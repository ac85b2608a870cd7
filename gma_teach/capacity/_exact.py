"""The exact demo of what a K-slot memory holds, its Monte Carlo with random routing, and the forgetting variant.
A private module of :mod:`gma_teach.capacity`, which exports its names."""
from __future__ import annotations

import math

import torch

from .. import _checks
from ..mixing import read_memory, write_memory

TIES = ("share", "fail")  # documented in gma_teach.capacity, which exports it


# ------------------------------------------------------------------------------------------------ the exact demo
def round_robin(n_pairs: int, n_slots: int) -> torch.Tensor:
    """The hand-built assignment ``slot(i) = i mod K``: keys ``0 .. K-1`` get a slot each, key ``K`` shares slot 0
    with key 0, and so on. ``(n_pairs,)`` int64."""
    n_pairs = _checks.positive_int("n_pairs", n_pairs)
    n_slots = _checks.positive_int("n_slots", n_slots)
    return torch.arange(n_pairs) % n_slots


def slot_routing(slots, n_slots: int, *, leak: float = 0.0, dtype=torch.float64) -> torch.Tensor:
    """Responsibilities that send key ``i`` to slot ``slots[i]``: ``(1 - leak) e_slot + leak / K``.

    Args:
        slots: ``(..., n)`` int slot indices in ``[0, n_slots)`` (a tensor or a list).
        n_slots: ``K >= 1``.
        leak: the mass in ``[0, 1)`` a key spreads evenly over all K slots (0: one-hot rows, a router that separates
            the keys perfectly).
        dtype: a floating dtype (float64 by default: the demo's ties are exact).

    Returns:
        ``(..., n, K)``; every row is non-negative and sums to 1.
    """
    n_slots = _checks.positive_int("n_slots", n_slots)
    leak = _checks.nonnegative_number("leak", leak)
    if leak >= 1:
        raise ValueError(f"leak must be in [0, 1) (1 would send every key everywhere), got {leak}")
    if not isinstance(slots, torch.Tensor):
        try:
            slots = torch.as_tensor(slots)
        except (TypeError, ValueError, RuntimeError) as error:
            raise TypeError(f"slots must be a tensor or a list of ints, got {type(slots).__name__}") from error
    if slots.dtype.is_floating_point or slots.dtype.is_complex or slots.dtype == torch.bool or slots.dim() < 1:
        raise TypeError(f"slots must be a tensor of int slot indices with at least one dim, got "
                        f"{slots.dtype} of shape {tuple(slots.shape)}")
    if slots.numel() and (slots.min() < 0 or slots.max() >= n_slots):
        raise ValueError(f"slots must lie in [0, n_slots={n_slots}), got values from {int(slots.min())} to "
                         f"{int(slots.max())}")
    one_hot = torch.nn.functional.one_hot(slots.long(), n_slots).to(dtype)
    return (1 - leak) * one_hot + leak / n_slots


def store_and_recall(gamma_k: torch.Tensor, values: torch.Tensor, gamma_q: torch.Tensor | None = None, *,
                     decay: float = 1.0, eps: float = 1e-6) -> torch.Tensor:
    """Write every pair into the K-slot memory, then read every query: GMA's write and read, nothing else.

    With ``decay = 1`` the memory is :func:`gma_teach.mixing.write_memory`'s; with ``decay < 1`` the keys are
    written in order (row 0 first) through :func:`decayed_state`, so key ``j`` of ``n`` enters with weight
    ``decay^(n - 1 - j)`` when the queries read.

    Args:
        gamma_k: ``(..., n, K)`` key responsibilities.
        values: ``(..., n, d_v)`` values.
        gamma_q: ``(..., n_q, K)`` query responsibilities; ``None`` reads with the keys' own (query ``i`` asks key
            ``i``).
        decay: ``lambda`` in ``(0, 1]``.
        eps: the normalizer's floor of :func:`gma_teach.mixing.read_memory`.

    Returns:
        ``(..., n_q, d_v)``: query ``i``'s read, ``Gamma^Q memory / (Gamma^Q Z + eps)``.
    """
    _checks.tensor("gamma_k", gamma_k, min_rank=2)
    _checks.tensor("values", values, min_rank=2)
    gamma_q = gamma_k if gamma_q is None else _checks.tensor("gamma_q", gamma_q, min_rank=2)
    if gamma_q.shape[-1] != gamma_k.shape[-1]:
        raise ValueError(f"gamma_q and gamma_k must have the same K (last dim), got {tuple(gamma_q.shape)} and "
                         f"{tuple(gamma_k.shape)}")
    if values.shape[-2] != gamma_k.shape[-2]:
        raise ValueError(f"values must have one row per key: gamma_k {tuple(gamma_k.shape)}, values "
                         f"{tuple(values.shape)}")
    eps = _checks.positive_number("eps", eps)
    decay = _check_decay(decay)
    if decay == 1.0:
        memory, normalizer = write_memory(gamma_k, values)
    else:
        memory, normalizer = decayed_state(gamma_k, values, decay)
    return read_memory(gamma_q, memory, normalizer, eps)


def recall_credit(outputs: torch.Tensor, targets: torch.Tensor, *, ties: str = "share",
                  rtol: float | None = None) -> torch.Tensor:
    """Score each read by its arg-max: 1 when the correct value is the unique largest entry.

    Entries within ``rtol`` (relative) of a read's largest entry tie with it: the demo's shared slots give equal
    entries in exact arithmetic, and the rounding of a matrix product can split them by an ulp. With
    ``ties="share"`` a read whose correct value is one of ``m`` tied maxima scores ``1/m`` (the expected score of
    breaking the tie with a fair coin); with ``ties="fail"`` it scores 0.

    Args:
        outputs: ``(..., n, d_v)`` reads.
        targets: ``(n,)`` or ``(..., n)`` int64: the index of each read's correct value.
        ties: one of :data:`TIES`.
        rtol: the tie tolerance; ``None`` is 1000 units of rounding of ``outputs``' dtype (``2.2e-13`` in float64).

    Returns:
        ``(..., n)`` float64 credits in ``[0, 1]``.
    """
    _checks.tensor("outputs", outputs, min_rank=2)
    _checks.one_of("ties", ties, TIES)
    if not isinstance(targets, torch.Tensor) or targets.dtype != torch.int64:
        raise TypeError(f"targets must be an int64 tensor of value indices, got "
                        f"{targets.dtype if isinstance(targets, torch.Tensor) else type(targets).__name__}")
    if targets.shape[-1:] != outputs.shape[-2:-1]:
        raise ValueError(f"targets must have one entry per read: outputs {tuple(outputs.shape)}, targets "
                         f"{tuple(targets.shape)}")
    if targets.numel() and (targets.min() < 0 or targets.max() >= outputs.shape[-1]):
        raise ValueError(f"targets must lie in [0, d_v={outputs.shape[-1]}), got values from {int(targets.min())} "
                         f"to {int(targets.max())}")
    rtol = 1000 * torch.finfo(outputs.dtype).eps if rtol is None else _checks.nonnegative_number("rtol", rtol)
    top = outputs.max(dim=-1, keepdim=True).values
    winners = outputs >= top - rtol * top.abs()  # (..., n, d_v): every tied maximum
    index = targets.expand(outputs.shape[:-1]).unsqueeze(-1)
    hit = winners.gather(-1, index).squeeze(-1).double()
    count = winners.sum(-1).double()
    return hit / count if ties == "share" else hit * (count == 1)


def recall_accuracy(outputs: torch.Tensor, targets: torch.Tensor, *, ties: str = "share",
                    rtol: float | None = None) -> float:
    """The mean of :func:`recall_credit` over every read: a float in ``[0, 1]``."""
    return recall_credit(outputs, targets, ties=ties, rtol=rtol).mean().item()


def routed_recall(n_pairs: int, n_slots: int, *, slots=None, decay: float = 1.0, leak: float = 0.0,
                  ties: str = "share", eps: float = 1e-6) -> float:
    """The exact demo: ``n_pairs`` one-hot values (value ``i`` is ``e_i``) stored in ``n_slots`` slots by hand-built
    routing, each key then asked once; returns the recall accuracy (float64 throughout).

    Args:
        n_pairs, n_slots: ``n >= 1`` pairs, ``K >= 1`` slots.
        slots: ``(n_pairs,)`` slot of each key; ``None`` is :func:`round_robin`.
        decay: ``lambda`` of :func:`decayed_state` (1: no forgetting). Keys are written in order ``0 .. n-1``.
        leak: see :func:`slot_routing`.
        ties: see :data:`TIES`.
        eps: the normalizer's floor.
    """
    n_pairs = _checks.positive_int("n_pairs", n_pairs)
    slots = round_robin(n_pairs, n_slots) if slots is None else slots
    gamma = slot_routing(slots, n_slots, leak=leak)
    if gamma.shape[-2] != n_pairs:
        raise ValueError(f"slots must give one slot per pair: n_pairs={n_pairs}, got {gamma.shape[-2]} slots")
    values = torch.eye(n_pairs, dtype=torch.float64)
    outputs = store_and_recall(gamma, values, decay=decay, eps=eps)
    return recall_accuracy(outputs, torch.arange(n_pairs), ties=ties)


def capacity_formula(n_pairs: int, n_slots: int, *, decay: float = 1.0, leak: float = 0.0,
                     ties: str = "share") -> float:
    r"""The exact accuracy of :func:`routed_recall` with round-robin routing, from counting alone.

    Write ``n = q K + r``. Without forgetting (``decay = 1``) a slot holding ``m`` keys returns the plain average of
    their ``m`` values, a tie between them (a leak adds the same amount to every key of a slot, so the tie stays):

    * ``ties="share"``: each occupied slot answers one of its keys in expectation, so the accuracy is
      ``min(n, K) / n``, which is ``min(1, K / n)``;
    * ``ties="fail"``: only keys alone in their slot count: ``n / n`` if ``q = 0``, ``(K - r) / n`` if ``q = 1``,
      else 0.

    With forgetting (``decay = lambda < 1``) the newest key of every slot outweighs the older ones, so no ties are
    left. A key of age ``d`` (``d`` keys were written after it) that is the newest of its slot competes with the
    newest key of another slot through the leak, ``c = (2 (1 - leak) leak + leak^2) / K`` against its own
    ``s = (1 - leak)^2 + c``; it wins when ``d = 0`` or ``lambda^d s > c``. The newest keys of the slots are the last
    ``min(n, K)``, so the accuracy is ``#{d < min(n, K): d = 0 or lambda^d s > c} / n``, for either ``ties``.
    """
    n_pairs = _checks.positive_int("n_pairs", n_pairs)
    n_slots = _checks.positive_int("n_slots", n_slots)
    decay = _check_decay(decay)
    leak = _checks.nonnegative_number("leak", leak)
    if leak >= 1:
        raise ValueError(f"leak must be in [0, 1), got {leak}")
    _checks.one_of("ties", ties, TIES)
    newest = min(n_pairs, n_slots)
    if decay == 1.0:
        if ties == "share":
            return newest / n_pairs
        full_rounds, remainder = divmod(n_pairs, n_slots)
        alone = n_pairs if full_rounds == 0 else (n_slots - remainder if full_rounds == 1 else 0)
        return alone / n_pairs
    cross = (2 * (1 - leak) * leak + leak * leak) / n_slots
    own = (1 - leak) ** 2 + cross
    recalled = sum(1 for age in range(newest) if age == 0 or decay ** age * own > cross)
    return recalled / n_pairs


def recency_horizon(n_slots: int, *, decay: float, leak: float) -> float:
    r"""How many of the newest pairs a decayed memory with a leaky router can return, whatever its number of slots:
    the ages ``d`` with ``lambda^d s > c`` (see :func:`capacity_formula`), ``ln(s / c) / ln(1 / lambda)``
    (``inf`` without a leak or without decay). The demo recalls ``min(n, K, ceil(horizon))`` pairs."""
    n_slots = _checks.positive_int("n_slots", n_slots)
    decay = _check_decay(decay)
    leak = _checks.nonnegative_number("leak", leak)
    if leak >= 1:
        raise ValueError(f"leak must be in [0, 1), got {leak}")
    if decay == 1.0 or leak == 0.0:
        return math.inf
    cross = (2 * (1 - leak) * leak + leak * leak) / n_slots
    own = (1 - leak) ** 2 + cross
    return math.log(own / cross) / math.log(1 / decay)


def random_slot_recall(n_pairs: int, n_slots: int, n_trials: int, *, seed: int = 0,
                       ties: str = "share") -> tuple[float, float]:
    """A Monte Carlo of the demo with every key in a slot drawn uniformly and independently.

    Returns:
        ``(mean accuracy, its standard error)`` over ``n_trials`` trials (all run through GMA's write and read as a
        batch).
    """
    n_pairs = _checks.positive_int("n_pairs", n_pairs)
    n_slots = _checks.positive_int("n_slots", n_slots)
    n_trials = _checks.positive_int("n_trials", n_trials)
    seed = _checks.integer("seed", seed, minimum=0)
    generator = torch.Generator().manual_seed(seed)
    slots = torch.randint(0, n_slots, (n_trials, n_pairs), generator=generator)
    gamma = slot_routing(slots, n_slots)
    outputs = store_and_recall(gamma, torch.eye(n_pairs, dtype=torch.float64))
    per_trial = recall_credit(outputs, torch.arange(n_pairs), ties=ties).mean(-1)
    error = per_trial.std().item() / math.sqrt(n_trials) if n_trials > 1 else math.inf
    return per_trial.mean().item(), error


# ---------------------------------------------------------------------------------------------------- forgetting
def _check_decay(decay) -> float:
    decay = _checks.positive_number("decay", decay)
    if decay > 1:
        raise ValueError(f"decay must be in (0, 1] (1: no forgetting), got {decay}")
    return decay


def decayed_state(gamma_k: torch.Tensor, values: torch.Tensor, decay: float):
    """The memory after writing every key in order with a fixed decay: ``memory_t = lambda memory_{t-1} +
    gamma_t v_t^T`` and ``Z_t = lambda Z_{t-1} + gamma_t``.

    Args:
        gamma_k: ``(..., n, K)``; values: ``(..., n, d_v)``; decay: ``lambda`` in ``(0, 1]``.

    Returns:
        ``(memory (..., K, d_v), normalizer (..., K))`` after the last key.
    """
    decay = _check_decay(decay)
    memory, normalizer = write_memory(gamma_k[..., :0, :], values[..., :0, :])  # zeros of the right shapes
    for t in range(gamma_k.shape[-2]):
        memory = decay * memory + gamma_k[..., t, :, None] * values[..., t, None, :]
        normalizer = decay * normalizer + gamma_k[..., t, :]
    return memory, normalizer


def decayed_gma(gamma_q: torch.Tensor, gamma_k: torch.Tensor, values: torch.Tensor, decay: float, *,
                eps: float = 1e-6) -> torch.Tensor:
    """Causal GMA with a fixed decay on ``Ṽ`` and ``Z``, token by token: position ``t`` writes its key, then reads.

    Output ``t`` is ``sum_{j<=t} lambda^(t-j) (gamma^Q_t . gamma^K_j) v_j`` over
    ``sum_{j<=t} lambda^(t-j) (gamma^Q_t . gamma^K_j) + eps``; ``lambda = 1`` is causal GMA.

    Args:
        gamma_q, gamma_k: ``(..., N, K)``; values: ``(..., N, d_v)``; decay: ``lambda`` in ``(0, 1]``; eps: the
            normalizer's floor.

    Returns:
        ``(..., N, d_v)``.
    """
    for name, value in (("gamma_q", gamma_q), ("gamma_k", gamma_k), ("values", values)):
        _checks.tensor(name, value, min_rank=2)
    if gamma_q.shape[-2:] != gamma_k.shape[-2:] or values.shape[-2] != gamma_k.shape[-2]:
        raise ValueError(f"causal GMA needs gamma_q and gamma_k of one shape (..., N, K) and values (..., N, d_v), "
                         f"got {tuple(gamma_q.shape)}, {tuple(gamma_k.shape)} and {tuple(values.shape)}")
    decay = _check_decay(decay)
    eps = _checks.positive_number("eps", eps)
    memory, normalizer = write_memory(gamma_k[..., :0, :], values[..., :0, :])
    outputs = []
    for t in range(gamma_k.shape[-2]):
        memory = decay * memory + gamma_k[..., t, :, None] * values[..., t, None, :]
        normalizer = decay * normalizer + gamma_k[..., t, :]
        outputs.append(read_memory(gamma_q[..., t, None, :], memory, normalizer, eps)[..., 0, :])
    return torch.stack(outputs, dim=-2) if outputs else values.new_zeros(values.shape)

