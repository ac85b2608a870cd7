r"""Chapter 12: what a K-slot memory holds.

GMA's decoding state is a memory of K slots, :math:`\tilde V = (\Gamma^K)^\top V` and :math:`Z = (\Gamma^K)^\top
\mathbf 1` (:func:`gma_teach.mixing.write_memory`), read by :func:`gma_teach.mixing.read_memory`. This module holds
the chapter's exact demo of what such a memory can store, the forgetting variant, and the sentences the chapter
reads off the recall study's table.

* **The exact demo.** :func:`slot_routing` builds hand-made responsibilities that send key ``i`` to slot
  ``slots[i]`` (with an optional ``leak`` spread evenly over every slot, as a soft router would);
  :func:`store_and_recall` writes one-hot values with them and reads them back; :func:`recall_credit` scores each
  read by its arg-max, with ties either shared fairly or counted as failures. :func:`routed_recall` runs the whole
  demo for ``n_pairs`` pairs in ``n_slots`` slots and :func:`capacity_formula` predicts its accuracy exactly.
* **Random routing.** :func:`random_slot_recall` repeats the demo with every key in a random slot (a Monte Carlo
  estimate; Exercise 12.3 derives its expectation).
* **Forgetting.** :func:`decayed_gma` and :func:`decayed_state` are causal GMA with a fixed decay ``lambda`` on both
  :math:`\tilde V` and :math:`Z` (RetNet's recurrence with GMA's normalizer).
* **State bytes.** :func:`measured_state_bytes` builds a causal mixer, decodes ``seq_len`` tokens and returns its
  decoding state's ``nbytes()``.
* **The live run.** :func:`shrink_study` copies a study design with a few sizes replaced; :func:`routing_share`
  measures how a trained model's GMA layer spreads its queries over the components.
* **The guessing floor.** :func:`guessing_floor` is the accuracy of a model that stores nothing but knows the answer
  is one of the ``n`` values in its context: ``1/n`` at each kv count (:func:`mean_guessing_floor` averages it over
  the counts, as the study's metric averages accuracy).
* **The study's table.** :func:`check_recall_table` validates the table the recall study's records give (format in
  its docstring); :func:`recall_findings` (with its part :func:`forgetting_findings`) and
  :func:`when_to_choose_gma` turn it into sentences, every number computed from the table;
  :func:`uses_default_routing` tells which arms route with GMA's default (collapsing) routing,
  :func:`default_routing_floor` sets those arms beside the guessing floor and :func:`equal_state_points` finds the
  GMA arms that keep exactly linear attention's state.
"""
from __future__ import annotations

import copy
import math

import torch

from . import _checks
from .baselines import MIXERS, make_mixer
from .layer import LM_ROUTING_REMEDY
from .mixing import read_memory, write_memory
from .stats import paired_difference

TIES = ("share", "fail")
"""The two ways a tied arg-max is scored. ``"share"`` gives ``1/m`` to a read whose correct value is one of ``m`` tied
maxima (a fair coin's expected score), ``"fail"`` counts any tie as a miss."""


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


# --------------------------------------------------------------------------------------------------- state bytes
def measured_state_bytes(mixer: str, d_model: int, n_heads: int, seq_len: int, **options) -> int:
    """Bytes of a causal mixer's decoding state after ``seq_len`` tokens at batch size 1, measured: the mixer is
    built by :func:`gma_teach.baselines.make_mixer`, decodes ``seq_len`` zero tokens with ``step``, and the final
    state's ``nbytes()`` is returned.

    Args:
        mixer: a name of :data:`gma_teach.baselines.MIXERS` that decodes (not ``linformer``).
        d_model, n_heads: the layer's width and heads.
        seq_len: tokens decoded (>= 0).
        **options: the mixer's options (``n_components`` for GMA, ...).
    """
    if mixer not in MIXERS:
        raise ValueError(f"mixer must be one of {sorted(MIXERS)}, got {mixer!r}")
    seq_len = _checks.integer("seq_len", seq_len, minimum=0)
    layer = make_mixer(mixer, d_model, n_heads, causal=True, **options)
    if not hasattr(layer, "step"):
        raise ValueError(f"mixer {mixer!r} has no decoding form (no step), so no decoding state")
    state = layer.init_state(1)
    x = torch.zeros(1, d_model)
    with torch.no_grad():
        for _ in range(seq_len):
            _, state = layer.step(x, state)
    return state.nbytes()


# ------------------------------------------------------------------------------------------------- the live run
def shrink_study(study: dict, **sizes) -> dict:
    """A copy of a study design (a dict such as ``gma_teach.runs.settings.RECALL_STUDY``) with some of its sizes
    replaced (``seq_len=32, steps=300, ...``); every key given must already be in the design."""
    if not isinstance(study, dict):
        raise TypeError(f"study must be a dict (a study design), got {type(study).__name__}")
    unknown = sorted(set(sizes) - set(study))
    if unknown:
        raise ValueError(f"unknown study keys {unknown}; the design has {sorted(study)}")
    shrunk = copy.deepcopy(study)
    shrunk.update(copy.deepcopy(sizes))
    return shrunk


def routing_share(gamma: torch.Tensor) -> dict:
    """How one layer's responsibilities spread over the components: ``gamma (..., K)``, rows summing to 1 (the query
    rows of a trained model, e.g. from :func:`gma_teach.diagnostics.capture_responsibilities`).

    Returns:
        ``{"rows", "n_components", "mean_top"`` (the mean of each row's largest responsibility), ``"busiest"``
        (the component that is the arg-max of the most rows), ``"busiest_share"`` (the share of rows whose arg-max it
        is), ``"used"`` (how many components are the arg-max of at least one row)``}``. A memory whose queries all
        route to one component has ``busiest_share`` 1 and ``used`` 1: one slot, whatever K.
    """
    _checks.tensor("gamma", gamma, min_rank=1)
    if not gamma.dtype.is_floating_point:
        raise TypeError(f"gamma must be a floating-point tensor of responsibilities, got {gamma.dtype}")
    rows = gamma.detach().reshape(-1, gamma.shape[-1]).double()
    if rows.shape[0] == 0 or rows.shape[1] == 0:
        raise ValueError(f"gamma must hold at least one row of at least one component, got {tuple(gamma.shape)}")
    top = rows.argmax(-1)
    counts = torch.bincount(top, minlength=rows.shape[1])
    return {"rows": rows.shape[0], "n_components": rows.shape[1], "mean_top": rows.max(-1).values.mean().item(),
            "busiest": int(counts.argmax()), "busiest_share": counts.max().item() / rows.shape[0],
            "used": int((counts > 0).sum())}


# -------------------------------------------------------------------------------------------- the guessing floor
def guessing_floor(kv_pairs) -> dict[int, float]:
    """The accuracy of a model that stores nothing but knows the answer is one of the ``n`` values of its context:
    ``{n: 1/n}`` for each kv count ``n`` (an MQAR query's value is one of the ``n`` values shown, and a guess among
    them is right once in ``n``). A memory whose every query reads one slot, a blend of everything written, can tell
    which tokens were values but not which value went with the key asked for: it scores about this floor.

    Args:
        kv_pairs: the kv-pair counts, positive ints (a list, a tuple or the keys of a table's ``by_count``).
    """
    counts = [_checks.positive_int("kv_pairs[...]", n) for n in kv_pairs]
    if not counts:
        raise ValueError("kv_pairs must hold at least one kv-pair count")
    return {n: 1.0 / n for n in counts}


def mean_guessing_floor(kv_pairs) -> float:
    """The mean of :func:`guessing_floor` over the counts: the floor of the recall study's metric (the mean accuracy
    over the kv counts). For the study's 4, 6, 8, 12 and 16 pairs it is 0.1375."""
    floor = guessing_floor(kv_pairs)
    return sum(floor.values()) / len(floor)


# ----------------------------------------------------------------------------------------- the study's table
_RUN_KEYS = ("mixer", "options", "lr", "seeds", "state_bytes", "test_mean", "by_count")
_COMPARISON_KEYS = ("arm", "against", "width", "difference", "ci95", "p", "p_holm", "told_apart", "seeds")


def check_recall_table(table) -> dict:
    """Validate the recall study's table and return it. Its format::

        {"design": {"seq_len": int, "vocab_size": int, "kv_pairs": [int, ...], "widths": [int, ...]},
         "arms": {arm: {width: {"mixer": str, "options": dict, "lr": float, "seeds": [int, ...],
                                "state_bytes": int, "test_mean": [float per seed],
                                "by_count": {n_pairs: [float per seed]}}}},
         "comparisons": [{"arm": str, "against": str, "width": int, "difference": float, "ci95": [lo, hi],
                          "p": float, "p_holm": float, "told_apart": bool, "seeds": [int, ...]}]}

    Widths and kv counts may be ints or their strings (as JSON keeps them).

    Raises:
        TypeError, ValueError: naming the first entry that does not fit.
    """
    if not isinstance(table, dict):
        raise TypeError(f"table must be a dict (the recall study's table), got {type(table).__name__}")
    missing = [key for key in ("design", "arms", "comparisons") if key not in table]
    if missing:
        raise ValueError(f"table lacks {missing}; it needs 'design', 'arms' and 'comparisons'")
    design = table["design"]
    for key in ("seq_len", "vocab_size", "kv_pairs", "widths"):
        if key not in design:
            raise ValueError(f"table['design'] lacks {key!r}")
    if not isinstance(table["arms"], dict):
        raise TypeError(f"table['arms'] must be a dict of arms, got {type(table['arms']).__name__}")
    for arm, by_width in table["arms"].items():
        if not isinstance(by_width, dict):
            raise TypeError(f"table['arms'][{arm!r}] must map widths to runs, got {type(by_width).__name__}")
        for width, entry in by_width.items():
            where = f"table['arms'][{arm!r}][{width!r}]"
            lacking = [key for key in _RUN_KEYS if key not in entry]
            if lacking:
                raise ValueError(f"{where} lacks {lacking}")
            n_seeds = len(entry["seeds"])
            if len(entry["test_mean"]) != n_seeds:
                raise ValueError(f"{where}: {len(entry['test_mean'])} test means for {n_seeds} seeds")
            for count, values in entry["by_count"].items():
                if len(values) != n_seeds:
                    raise ValueError(f"{where}['by_count'][{count!r}]: {len(values)} values for {n_seeds} seeds")
    if not isinstance(table["comparisons"], list):
        raise TypeError(f"table['comparisons'] must be a list, got {type(table['comparisons']).__name__}")
    for index, comparison in enumerate(table["comparisons"]):
        lacking = [key for key in _COMPARISON_KEYS if key not in comparison]
        if lacking:
            raise ValueError(f"table['comparisons'][{index}] lacks {lacking}")
    return table


def table_entries(table) -> dict:
    """The table's runs as ``{(arm, width): entry}``, with int widths, int kv counts in ``by_count`` (sorted), and
    the arms in the table's order."""
    found = {}
    for arm, by_width in table["arms"].items():
        for width, entry in by_width.items():
            by_count = {int(count): [float(v) for v in values] for count, values in entry["by_count"].items()}
            found[arm, int(width)] = {**entry, "by_count": dict(sorted(by_count.items()))}
    return found


def _mean(values) -> float:
    values = list(values)
    return sum(values) / len(values)


def gma_size(arm: str) -> tuple[int, bool] | None:
    """``(K, remedy)`` for an arm named ``gma_k{K}`` or ``gma_k{K}_remedy``, else ``None``."""
    if not arm.startswith("gma_k"):
        return None
    rest, remedy = arm[len("gma_k"):], False
    if rest.endswith("_remedy"):
        rest, remedy = rest[: -len("_remedy")], True
    return (int(rest), remedy) if rest.isdigit() else None


def _list(numbers) -> str:
    numbers = [str(n) for n in numbers]
    return numbers[0] if len(numbers) == 1 else ", ".join(numbers[:-1]) + " and " + numbers[-1]


def _bytes(n: int) -> str:
    return f"{int(n):,} bytes"


def _comparison(table, arm, against, width):
    for comparison in table["comparisons"]:
        if comparison["arm"] == arm and comparison["against"] == against and int(comparison["width"]) == width:
            return comparison
    return None


def _verdict(difference: float, told_apart: bool) -> str:
    if not told_apart:
        return "not told apart"
    return "higher" if difference > 0 else "lower"


def _exploratory(entries, arm, against, width) -> dict | None:
    """A paired difference of mean test accuracy over the seeds both arms share (``None`` under 2 seeds)."""
    a, b = entries.get((arm, width)), entries.get((against, width))
    if a is None or b is None:
        return None
    seeds_a, seeds_b = dict(zip(a["seeds"], a["test_mean"])), dict(zip(b["seeds"], b["test_mean"]))
    common = [seed for seed in a["seeds"] if seed in seeds_b]
    if len(common) < 2:
        return None
    paired = paired_difference([seeds_a[s] for s in common], [seeds_b[s] for s in common])
    low, high = paired["ci95"]
    return {"difference": paired["mean"], "ci95": [low, high], "told_apart": low > 0 or high < 0,
            "seeds": common}


_FORGETTING_AND_HYBRIDS = ("window", "local_gma", "decay_linear", "decay_gma")


def _references(entries, arm, width) -> list[str]:
    """What a forgetting or hybrid arm is compared with: the arm it changes (same K for GMA's)."""
    options = entries[arm, width].get("options") or {}
    k = options.get("n_components")
    gma = [f"gma_k{k}"] if k is not None else []
    return {"window": ["sdpa"], "local_gma": ["window", *gma], "decay_linear": ["linear"],
            "decay_gma": gma}.get(arm, [])


def recall_findings(table, *, solved: float = 0.99, near: float = 0.05) -> list[str]:
    """What the recall study found, one sentence per finding, every number read from ``table``.

    Args:
        table: the recall study's table (:func:`check_recall_table`).
        solved: the accuracy that counts as solving a kv count (Zoology's 0.99).
        near: how close to SDPA's mean accuracy an arm must come to count as matching it.

    Returns:
        Sentences: SDPA's anchor at each width; linear attention from the fewest to the most kv pairs; the arms that
        recall no more than guessing one of the n values of the context (:func:`mean_guessing_floor`); each family
        of primary comparisons (GMA against linear attention and against SDPA, after Holm); the best GMA arm and the
        smallest state within ``near`` of SDPA at each width; and every forgetting or hybrid arm against the arm it
        changes (from the table's comparisons when there, else an exploratory paired interval).
    """
    check_recall_table(table)
    solved = _checks.fraction("solved", solved)
    near = _checks.fraction("near", near)
    entries = table_entries(table)
    widths = sorted({width for _, width in entries})
    counts = [int(n) for n in table["design"]["kv_pairs"]]
    found = []
    for width in widths:
        found.extend(_anchor_sentences(entries, width, counts, solved))
        found.extend(_floor_sentences(entries, width, counts))
        found.extend(_family_sentences(table, entries, width))
        found.extend(_best_and_smallest(entries, width, near))
        found.extend(_forgetting_sentences(table, entries, width))
    return found


def _anchor_sentences(entries, width, counts, solved) -> list[str]:
    found = []
    sdpa = entries.get(("sdpa", width))
    if sdpa is None:
        found.append(f"SDPA is not in the records at width {width}.")
    else:
        means = {n: _mean(v) for n, v in sdpa["by_count"].items()}
        reached = [n for n in means if means[n] >= solved - 1e-9]  # a mean of 0.99s may round below 0.99
        short = [f"{n} ({means[n]:.3f})" for n in means if n not in reached]
        head = f"SDPA at width {width} ({len(sdpa['seeds'])} seeds) reaches {solved:g}"
        if not short:
            found.append(f"{head} at every kv count ({_list(list(means))} pairs).")
        elif reached:
            found.append(f"{head} at {_list(reached)} kv pairs and falls short at {_list(short)}.")
        else:
            found.append(f"{head} at no kv count: {_list(short)}.")
    linear = entries.get(("linear", width))
    if linear is not None and len(linear["by_count"]) >= 2:
        first, last = min(linear["by_count"]), max(linear["by_count"])
        low, high = _mean(linear["by_count"][first]), _mean(linear["by_count"][last])
        trend = "falls" if high < low else "does not fall"
        found.append(f"Linear attention at width {width} {trend} from {low:.3f} at {first} kv pairs to "
                     f"{high:.3f} at {last}.")
    return found


def _floor_sentences(entries, width, counts) -> list[str]:
    floor = mean_guessing_floor(counts)
    at_floor = sorted(((_mean(entry["test_mean"]), arm) for (arm, w), entry in entries.items()
                       if w == width and _mean(entry["test_mean"]) <= floor), reverse=True)
    head = (f"Guessing one of the n values in the context scores 1/n, {floor:.3f} in the mean over "
            f"{_list(counts)} pairs; at width {width}")
    if not at_floor:
        return [f"{head} every arm recalls more."]
    arms = _list([f"{arm} ({mean:.3f})" for mean, arm in at_floor])
    verb = "recalls" if len(at_floor) == 1 else "recall"
    return [f"{head} {arms} {verb} no more than that."]


def _family_sentences(table, entries, width) -> list[str]:
    found = []
    for against, name in (("linear", "linear attention"), ("sdpa", "SDPA")):
        for remedy in (False, True):
            groups = {"higher": [], "lower": [], "not told apart": []}
            seeds = set()
            for comparison in table["comparisons"]:
                size = gma_size(comparison["arm"])
                if (size is None or size[1] != remedy or comparison["against"] != against
                        or int(comparison["width"]) != width):
                    continue
                verdict = _verdict(comparison["difference"], comparison["told_apart"])
                groups[verdict].append(size[0])
                seeds.add(len(comparison["seeds"]))
            if not any(groups.values()):
                continue
            routing = "with the routing remedy" if remedy else "with the default routing"
            parts = [f"{verdict} at K = {_list(sorted(ks))}" for verdict, ks in groups.items() if ks]
            n_seeds = _list(sorted(seeds))
            found.append(f"Against {name} at width {width}, GMA {routing} is " + "; ".join(parts)
                         + f" (paired over {n_seeds} seeds, Holm-corrected).")
    return found


def _best_and_smallest(entries, width, near) -> list[str]:
    found = []
    gma = {arm: entry for (arm, w), entry in entries.items() if w == width and gma_size(arm) is not None}
    sdpa = entries.get(("sdpa", width))
    if gma:
        best = max(gma, key=lambda arm: _mean(gma[arm]["test_mean"]))
        line = (f"The best GMA arm at width {width} is {best}: mean accuracy "
                f"{_mean(gma[best]['test_mean']):.3f} with a state of {_bytes(gma[best]['state_bytes'])}")
        if sdpa is not None:
            line += (f", against SDPA's {_mean(sdpa['test_mean']):.3f} with "
                     f"{_bytes(sdpa['state_bytes'])} of KV cache")
        found.append(line + ".")
    if sdpa is not None:
        target = _mean(sdpa["test_mean"]) - near
        close = [(entry["state_bytes"], arm) for (arm, w), entry in entries.items()
                 if w == width and arm != "sdpa" and _mean(entry["test_mean"]) >= target]
        if close:
            size, arm = min(close)
            ratio = size / sdpa["state_bytes"]
            found.append(f"The smallest state within {near:g} of SDPA at width {width} is {arm}'s: "
                         f"{_bytes(size)} ({ratio:.2f} of SDPA's), mean accuracy "
                         f"{_mean(entries[arm, width]['test_mean']):.3f}.")
        else:
            found.append(f"No arm but SDPA comes within {near:g} of SDPA's mean accuracy at width {width}.")
    return found


def forgetting_findings(table) -> list[str]:
    """The part of :func:`recall_findings` about forgetting and the hybrid: each of ``window``, ``local_gma``,
    ``decay_linear`` and ``decay_gma`` against the arm it changes (``sdpa``; ``window`` and the GMA arm of the same
    K; ``linear``; the GMA arm of the same K), at every width where both are recorded."""
    check_recall_table(table)
    entries = table_entries(table)
    found = []
    for width in sorted({width for _, width in entries}):
        found.extend(_forgetting_sentences(table, entries, width))
    return found


def _forgetting_sentences(table, entries, width) -> list[str]:
    found = []
    for arm in _FORGETTING_AND_HYBRIDS:
        if (arm, width) not in entries:
            continue
        for against in _references(entries, arm, width):
            recorded = _comparison(table, arm, against, width)
            if recorded is not None:
                low, high = recorded["ci95"]
                how = f"paired over {len(recorded['seeds'])} seeds, Holm-corrected"
                difference, told_apart = recorded["difference"], recorded["told_apart"]
            else:
                exploratory = _exploratory(entries, arm, against, width)
                if exploratory is None:
                    continue
                low, high = exploratory["ci95"]
                how = f"paired over {len(exploratory['seeds'])} seeds, exploratory"
                difference, told_apart = exploratory["difference"], exploratory["told_apart"]
            found.append(f"{arm} against {against} at width {width}: {difference:+.3f} "
                         f"[{low:+.3f}, {high:+.3f}] ({how}): {_verdict(difference, told_apart)}.")
    return found


_GMA_MIXERS = ("gma", "local_gma", "decay_gma")


def uses_default_routing(entry) -> bool:
    """Whether a run of the table (``table_entries(table)[arm, width]``, or a study's arm spec ``{"mixer",
    "options"}``) routes with GMA's default routing: a GMA-based mixer (``gma``, ``local_gma``'s GMA heads,
    ``decay_gma``) built without any option of the routing remedy (:data:`gma_teach.layer.LM_ROUTING_REMEDY`). That
    routing collapses onto one component in causal models (chapter 11), so such an arm measures a one-slot memory."""
    if not isinstance(entry, dict) or "mixer" not in entry:
        raise TypeError("entry must be a run of the table or an arm spec: a dict with 'mixer' and 'options'")
    options = entry.get("options") or {}
    return entry["mixer"] in _GMA_MIXERS and not any(key in options for key in LM_ROUTING_REMEDY)


def equal_state_points(table) -> list[dict]:
    """The GMA arms with the routing remedy that keep exactly linear attention's decoding state at the same width,
    each with its primary comparison against linear attention: ``[{"width", "arm", "state_bytes", "mean",
    "linear_mean", "comparison"}]`` (the comparison is ``None`` when the table does not list it), by width."""
    check_recall_table(table)
    entries = table_entries(table)
    points = []
    for (arm, width), entry in entries.items():
        size, linear = gma_size(arm), entries.get(("linear", width))
        if size is None or not size[1] or linear is None or entry["state_bytes"] != linear["state_bytes"]:
            continue
        points.append({"width": width, "arm": arm, "state_bytes": int(entry["state_bytes"]),
                       "mean": _mean(entry["test_mean"]), "linear_mean": _mean(linear["test_mean"]),
                       "comparison": _comparison(table, arm, "linear", width)})
    return sorted(points, key=lambda point: (point["width"], point["arm"]))


def default_routing_floor(table) -> dict:
    """The GMA arms with the default routing (``gma_k{K}``) against the guessing floor, read off the table.

    Returns:
        ``{"kv_pairs", "floor": {n: 1/n}, "mean_floor", "widths": {width: {"arms": [...], "by_count": {n: the
        mean over those arms of their mean accuracy at n}, "mean": the mean of their means over the counts}},
        "means": {(arm, width): mean over the counts}, "ratios": (lowest, highest) accuracy / (1/n) over every arm
        and count, "sentence"}``; ``sentence`` says how the arms' means compare with the mean floor and, at every
        count, with ``1/n``. ``widths`` is empty, and the sentence says so, when no such arm is recorded.
    """
    check_recall_table(table)
    entries = table_entries(table)
    counts = [int(n) for n in table["design"]["kv_pairs"]]
    floor, mean_floor = guessing_floor(counts), mean_guessing_floor(counts)
    default = {(arm, width): entry for (arm, width), entry in entries.items()
               if gma_size(arm) is not None and not gma_size(arm)[1]}
    found = {"kv_pairs": counts, "floor": floor, "mean_floor": mean_floor, "widths": {}, "means": {},
             "ratios": None}
    if not default:
        found["sentence"] = "No GMA arm with the default routing is recorded."
        return found
    ratios = []
    for width in sorted({width for _, width in default}):
        arms = sorted((arm for arm, w in default if w == width), key=lambda arm: gma_size(arm)[0])
        by_arm = {arm: {n: _mean(default[arm, width]["by_count"][n]) for n in counts} for arm in arms}
        for arm in arms:
            found["means"][arm, width] = _mean(default[arm, width]["test_mean"])
            ratios.extend(by_arm[arm][n] / floor[n] for n in counts)
        found["widths"][width] = {"arms": arms, "by_count": {n: _mean(by_arm[arm][n] for arm in arms) for n in counts},
                                  "mean": _mean(found["means"][arm, width] for arm in arms)}
    low, high = min(found["means"].values()), max(found["means"].values())
    found["ratios"] = (min(ratios), max(ratios))
    where = "at most" if high <= mean_floor else "above" if low > mean_floor else "about"
    found["sentence"] = (f"GMA with the default routing, {len(default)} arms: {low:.3f} to {high:.3f} in the mean "
                         f"over the counts, {where} the mean of 1/n, {mean_floor:.3f}; at every count each arm "
                         f"recalls {min(ratios):.2f} to {max(ratios):.2f} of 1/n.")
    return found


_COLLAPSE = "the default routing, which collapses onto one component in causal models (chapter 11)"


def _against_floor(low: float, high: float, floor: float) -> str:
    """Recall from ``low`` to ``high`` against the guessing floor; at or under it, a one-slot memory's signature."""
    span = f"{low:.3f}" if abs(high - low) < 5e-4 else f"{low:.3f} to {high:.3f}"
    guess = f"the {floor:.3f} of guessing one of the n values in the context"
    if high <= floor:
        return f"{span}, no more than {guess}: the signature of one slot"
    return f"{span}, {'above' if low > floor else 'against'} {guess}"


def _broken_note(arm, entry, floor) -> str:
    """Why a default-routing arm measures a broken memory, with its mean against the guessing floor."""
    who = "its GMA heads use" if entry["mixer"] == "local_gma" else "it uses"
    mean = _mean(entry["test_mean"])
    return f"{who} {_COLLAPSE}, and it recalls {_against_floor(mean, mean, floor)}"


def when_to_choose_gma(table, *, near: float = 0.05) -> list[str]:
    """The chapter's advice, one sentence per rule, every one computed from ``table``; it recommends an arm only
    where the table tells it apart, and names a broken configuration in the sentence about its arm.

    * **Equal state.** Where GMA with the routing remedy keeps exactly linear attention's state
      (:func:`equal_state_points`): which recalls more in the means, the saved comparison's verdict (Holm) and the
      largest difference the comparison's 95% interval allows.
    * **Against linear attention**, for each width and routing: the GMA arms told apart above it (with no larger a
      state, or a larger one), those told apart below it, and those not told apart (with the direction of their
      means). Sentences about arms with the default routing say that it collapses and how their mean compares
      with the guessing floor (:func:`mean_guessing_floor`).
    * **Against SDPA**: whether any GMA arm comes within ``near`` of it, and with what share of its KV cache.
    * **Forgetting and the hybrid**: each of ``window``, ``local_gma``, ``decay_linear`` and ``decay_gma`` is
      recommended only when it recalls more than every arm it changes (Holm-corrected when the table lists the
      comparison, else an exploratory paired interval) and does not use the default routing; otherwise the
      sentence says what the comparisons found and, for a default-routing arm, that its routing collapses.
    """
    check_recall_table(table)
    near = _checks.fraction("near", near)
    entries = table_entries(table)
    floor = mean_guessing_floor(table["design"]["kv_pairs"])
    advice = _equal_state_lead(table)
    for width in sorted({width for _, width in entries}):
        linear, sdpa = entries.get(("linear", width)), entries.get(("sdpa", width))
        if linear is not None:
            advice.extend(_equal_state_sentences(table, width))
            for remedy in (True, False):
                advice.extend(_against_linear(table, entries, width, remedy, floor))
        if sdpa is not None:
            target = _mean(sdpa["test_mean"]) - near
            matching = sorted(((entry["state_bytes"], arm) for (arm, w), entry in entries.items()
                               if w == width and gma_size(arm) is not None
                               and _mean(entry["test_mean"]) >= target))
            if matching:
                size, arm = matching[0]
                advice.append(f"At width {width}, {arm} comes within {near:g} of SDPA with "
                              f"{size / sdpa['state_bytes']:.2f} of its KV cache at {table['design']['seq_len']} "
                              f"tokens: choose it when that cache is too large.")
            else:
                advice.append(f"At width {width}, choose SDPA when recall must be near perfect: no GMA arm comes "
                              f"within {near:g} of it.")
        advice.extend(_forgetting_advice(table, entries, width, floor))
    return advice


def _equal_state_lead(table) -> list[str]:
    points = equal_state_points(table)
    if len(points) < 2 or any(point["comparison"] is None for point in points):
        return []
    less = [point["mean"] < point["linear_mean"] for point in points]
    if all(less) or not any(less):
        how = "less" if all(less) else "more"
        told = sum(bool(point["comparison"]["told_apart"]) for point in points)
        verdict = ("no difference is told apart" if told == 0 else
                   f"{told} of the {len(points)} differences are told apart")
        where = _list([f"K={gma_size(point['arm'])[0]} at width {point['width']}" for point in points])
        return [f"At equal state, GMA with the routing remedy recalls {how} than linear attention in the means at "
                f"all {len(points)} points where their states match ({where}); after Holm {verdict}."]
    return []


def _equal_state_sentences(table, width) -> list[str]:
    found = []
    for point in equal_state_points(table):
        if point["width"] != width:
            continue
        how = "less" if point["mean"] < point["linear_mean"] else "more"
        line = (f"At width {width} and equal state ({_bytes(point['state_bytes'])} each), {point['arm']} recalls "
                f"{how} than linear attention in the means, {point['mean']:.3f} against {point['linear_mean']:.3f}")
        comparison = point["comparison"]
        if comparison is None:
            found.append(line + " (the table lists no comparison of the two).")
            continue
        low, high = comparison["ci95"]
        verdict = "told apart" if comparison["told_apart"] else "not told apart"
        line += (f" ({comparison['difference']:+.3f}, {verdict} after Holm, p {comparison['p_holm']:.2f}); its 95% "
                 f"interval, {low:+.3f} to {high:+.3f}, allows ")
        if comparison["difference"] < 0:
            line += f"linear attention ahead by up to {-low:.3f}."
        else:
            line += f"GMA ahead by up to {high:.3f}."
        found.append(line)
    return found


def _against_linear(table, entries, width, remedy, floor) -> list[str]:
    """Sentences about GMA arms of one routing against linear attention at one width (Holm-corrected)."""
    linear = entries["linear", width]
    rows = []
    for comparison in table["comparisons"]:
        size = gma_size(comparison["arm"])
        if (size is None or size[1] != remedy or comparison["against"] != "linear"
                or int(comparison["width"]) != width or (comparison["arm"], width) not in entries):
            continue
        rows.append((size[0], comparison["arm"], comparison))
    if not rows:
        return []
    rows.sort()
    routing = "with the routing remedy" if remedy else "with the default routing"
    higher = [(k, arm) for k, arm, c in rows if c["told_apart"] and c["difference"] > 0]
    lower = [(k, arm) for k, arm, c in rows if c["told_apart"] and c["difference"] <= 0]
    unsure = [(k, arm, c) for k, arm, c in rows if not c["told_apart"]]
    linear_bytes = linear["state_bytes"]
    found = []
    if not remedy:
        means = [_mean(entries[arm, width]["test_mean"]) for _, arm, _ in rows]
        note = f"{_COLLAPSE}, and they recall {_against_floor(min(means), max(means), floor)}"
    cheaper = [arm for k, arm in higher if entries[arm, width]["state_bytes"] <= linear_bytes]
    dearer = [arm for k, arm in higher if arm not in cheaper]
    if cheaper:
        head = ("choose GMA over linear attention" if remedy else "GMA with the default routing recalls more than "
                "linear attention")
        line = (f"At width {width}, {head}: {_list(cheaper)} recall more (Holm) with no more state than linear "
                f"attention's {_bytes(linear_bytes)}")
        found.append(line + ("." if remedy else f", though they use {note}."))
    if dearer:
        line = (f"At width {width}, {_list(dearer)} recall more than linear attention (Holm) but keep a larger state "
                f"than its {_bytes(linear_bytes)}")
        found.append(line + (": choose them when recall matters more than memory." if remedy
                             else f", though they use {note}."))
    if lower:
        arms = _list([arm for _, arm in lower])
        verb = "recalls" if len(lower) == 1 else "recall"
        if remedy:
            found.append(f"At width {width}, prefer linear attention to {arms}, which {verb} less (Holm).")
        else:
            found.append(f"At width {width}, do not choose GMA with the default routing: {arms} {verb} less than "
                         f"linear attention's {_mean(linear['test_mean']):.3f} (Holm); they use {note}.")
    if unsure:
        ks = _list([k for k, _, _ in unsure])
        below = [k for k, _, c in unsure if c["difference"] < 0]
        above = [(k, arm) for k, arm, c in unsure if c["difference"] >= 0]
        parts = []
        if below:
            parts.append(f"lower at K = {_list(below)}")
        if above:
            parts.append(f"higher at K = {_list([k for k, _ in above])}")
        line = (f"At width {width}, GMA {routing} is not told apart from linear attention after Holm at K = {ks}: "
                f"its means are " + " and ".join(parts))
        larger = [(k, arm) for k, arm in above if entries[arm, width]["state_bytes"] > linear_bytes]
        if larger:
            line += (f", the higher ones with a larger state than linear attention's {_bytes(linear_bytes)} "
                     f"({_list([_bytes(entries[arm, width]['state_bytes']) for _, arm in larger])})")
        line += "; recall alone does not choose between them" if remedy else f"; these arms use {note}"
        found.append(line + ".")
    return found


def _forgetting_advice(table, entries, width, floor) -> list[str]:
    found = []
    for arm in _FORGETTING_AND_HYBRIDS:
        if (arm, width) not in entries:
            continue
        results = []
        for against in _references(entries, arm, width):
            recorded, how = _comparison(table, arm, against, width), "Holm-corrected"
            if recorded is None:
                recorded, how = _exploratory(entries, arm, against, width), "exploratory"
            if recorded is not None:
                results.append((against, recorded["difference"], recorded["told_apart"], how))
        if not results:
            continue
        entry = entries[arm, width]
        broken = uses_default_routing(entry)
        parts = []
        for against, difference, told_apart, how in results:
            name = "SDPA" if against == "sdpa" else "linear attention" if against == "linear" else against
            verdict = _verdict(difference, told_apart)
            phrase = {"higher": "recalls more than", "lower": "recalls less than",
                      "not told apart": "is not told apart from"}[verdict]
            parts.append(f"{phrase} {name} ({difference:+.3f}, {how})")
        better = all(told_apart and difference > 0 for _, difference, told_apart, _ in results)
        if better and not broken:
            found.append(f"At width {width}, {arm} {_list(parts)}: prefer it when its state of "
                         f"{_bytes(entry['state_bytes'])} fits.")
            continue
        line = f"At width {width}, the records do not recommend {arm}: it {_list(parts)}"
        if broken:
            line += f"; {_broken_note(arm, entry, floor)}"
        found.append(line + ".")
    return found
