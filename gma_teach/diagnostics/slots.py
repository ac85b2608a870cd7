"""Reading a slot memory: whether each key of a sequence holds a slot of its own, and whether its query finds it.

GMA's memory is ``K`` slots: a key is written into the slots its key responsibilities pick, and a query reads the
slots its query responsibilities pick. Such a memory gives a pair back cleanly only when two things hold: the pair's
key is alone in its slot (no other key of the sequence was written there), and the query that asks for that key
lands in the same slot. Two keys in one slot are read back as one average of their values, so neither pair is
returned cleanly (a collision); a query that lands in another slot reads another pair's value (a misrouted query).
Linear attention keeps no slots: each key is a direction in its feature space, each value is added along it, and a
query reads every pair at once through an inner product. Keys that are not orthogonal only add cross-talk to each
read, spread over all the features, and no key needs any part of the state to itself. So a slot memory needs a
router that gives each key of a sequence a slot of its own and sends each query to its key's slot, and linear
attention's superposed memory needs neither.

The functions here read that from HARD assignments, per head: a key's slot is the argmax of its key
responsibilities over ``K``, a query's the argmax of its query responsibilities (ties go to the lowest slot). Each
takes either integer slots ``(B, H, N)`` in ``[0, K)`` or responsibilities ``(B, H, N, K)``; key ``n`` and query
``n`` belong to one item (pair ``n``: the key it is stored under, the query that asks for it).

* :func:`slot_occupancy`: per sequence and head, the occupied slots, the solitary slots (exactly one key) and the
  colliding keys (sharing their slot with another key).
* :func:`slot_agreement`: the share of keys whose query lands in the key's slot.
* :func:`predicted_pairs`: the pairs the hard slots predict the memory returns, keys alone in their slot whose
  query lands there, and the solitary keys whose query lands elsewhere.
* :func:`slot_report`: all of these averaged over the sequences, per head, as plain numbers for a record.
* :func:`lost_pair_split`: a measured number of lost pairs split into collisions, misrouted queries and blur.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass

import torch

__all__ = ["LostPairSplit", "PredictedPairs", "SlotOccupancy", "lost_pair_split", "predicted_pairs",
           "slot_agreement", "slot_occupancy", "slot_report"]

_SHAPES = "integer slots of shape (B, H, N) or responsibilities of shape (B, H, N, K)"


def _slots(name: str, value, n_slots) -> tuple[torch.Tensor, int | None]:
    """``value`` checked and read as hard slots: an int64 ``(B, H, N)`` CPU tensor, and ``K`` (``None`` when
    ``value`` holds integer slots and ``n_slots`` is ``None``)."""
    if n_slots is not None and (isinstance(n_slots, bool) or not isinstance(n_slots, numbers.Integral)):
        raise TypeError(f"n_slots must be an int or None, got {type(n_slots).__name__}")
    if n_slots is not None and n_slots < 1:
        raise ValueError(f"n_slots must be >= 1 (K slots), got {n_slots}")
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor ({_SHAPES}), got {type(value).__name__}")
    shape = tuple(value.shape)
    if value.dtype == torch.bool or value.is_complex():
        raise TypeError(f"{name} must be {_SHAPES}, got dtype {value.dtype}")
    if value.is_floating_point():
        if value.dim() != 4:
            raise ValueError(f"{name} is floating point, so it must be responsibilities of shape (B, H, N, K); "
                             f"got shape {shape} (integer slots (B, H, N) need an integer dtype)")
        if value.shape[-1] < 1:
            raise ValueError(f"{name} must have K >= 1 slots on its last axis, got shape {shape}")
        if n_slots is not None and value.shape[-1] != n_slots:
            raise ValueError(f"{name} has K = {value.shape[-1]} slots on its last axis, but n_slots = {n_slots}")
        if not torch.isfinite(value).all():
            raise ValueError(f"{name} must be finite, got {int((~torch.isfinite(value)).sum())} NaN or infinite "
                             "values")
        slots, n_slots = value.detach().argmax(dim=-1), value.shape[-1]
    else:
        if value.dim() != 3:
            raise ValueError(f"{name} holds integers, so it must be slots of shape (B, H, N); got shape {shape}")
        slots = value.detach()
    if min(slots.shape) < 1:
        raise ValueError(f"{name} must hold at least one sequence, head and key (B, H, N >= 1), got shape {shape}")
    if int(slots.min()) < 0:
        raise ValueError(f"{name} must hold slots in [0, K), got {int(slots.min())}")
    if n_slots is not None and int(slots.max()) >= n_slots:
        raise ValueError(f"{name} must hold slots in [0, K) with K = n_slots = {n_slots}, got {int(slots.max())}")
    return slots.to(device="cpu", dtype=torch.int64), n_slots


def _pair(key_slots, query_slots, n_slots) -> tuple[torch.Tensor, torch.Tensor, int | None]:
    """Both sides checked (:func:`_slots`) and of one shape; ``K`` from whichever side gives it."""
    keys, k_from_keys = _slots("key_slots", key_slots, n_slots)
    queries, k_from_queries = _slots("query_slots", query_slots, n_slots)
    if keys.shape != queries.shape:
        raise ValueError(f"key_slots and query_slots must give one (B, H, N) shape (query n asks for key n), got "
                         f"{tuple(keys.shape)} and {tuple(queries.shape)}")
    if k_from_keys is not None and k_from_queries is not None and k_from_keys != k_from_queries:
        raise ValueError(f"key_slots and query_slots must have the same K, got {k_from_keys} and {k_from_queries}")
    n_slots = k_from_keys if k_from_keys is not None else k_from_queries
    if n_slots is not None:  # integer slots on one side are checked against the K the other side gives
        for name, slots in (("key_slots", keys), ("query_slots", queries)):
            if int(slots.max()) >= n_slots:
                raise ValueError(f"{name} must hold slots in [0, K) with K = {n_slots}, got {int(slots.max())}")
    return keys, queries, n_slots


def _keys_per_slot(keys: torch.Tensor, n_slots: int | None) -> torch.Tensor:
    """``(B, H, K')`` int64: how many keys of each sequence and head each slot holds (``K' = K``, or the largest
    slot + 1 when ``K`` is not known)."""
    width = n_slots if n_slots is not None else int(keys.max()) + 1
    counts = torch.zeros(*keys.shape[:-1], width, dtype=torch.int64)
    return counts.scatter_add_(-1, keys, torch.ones_like(keys))


@dataclass(frozen=True)
class SlotOccupancy:
    """How a sequence's keys fill the slots, per sequence and head.

    Attributes:
        occupied: ``(B, H)`` int64, the slots that hold at least one key of the sequence.
        solitary: ``(B, H)`` int64, the slots that hold exactly one key; each holds a key alone, so this is also the
            number of keys alone in their slot.
        colliding: ``(B, H)`` int64, the keys that share their slot with at least one other key
            (``solitary + colliding == n_keys``).
        n_keys: ``N``, the keys of a sequence.
        n_slots: ``K`` where it is known (responsibilities, or ``n_slots`` given), else ``None``.
    """

    occupied: torch.Tensor
    solitary: torch.Tensor
    colliding: torch.Tensor
    n_keys: int
    n_slots: int | None

    @property
    def solitary_share(self) -> torch.Tensor:
        """``(B, H)`` float64: the share of the ``N`` keys that are alone in their slot."""
        return self.solitary.double() / self.n_keys

    @property
    def collision_share(self) -> torch.Tensor:
        """``(B, H)`` float64: the share of the ``N`` keys that share their slot."""
        return self.colliding.double() / self.n_keys


def slot_occupancy(key_slots, *, n_slots: int | None = None) -> SlotOccupancy:
    """How the keys of each sequence fill the slots, per head, from hard assignments.

    Args:
        key_slots: the slot of each key, int ``(B, H, N)`` in ``[0, K)``, or key responsibilities
            ``(B, H, N, K)`` (floating point), read as their argmax over ``K``.
        n_slots: ``K``; checks that every slot is below it. Optional for integer slots; for responsibilities it
            must equal their last axis.

    Returns:
        :class:`SlotOccupancy` of ``(B, H)`` tensors: occupied slots, solitary slots (one key each) and colliding
        keys.
    """
    keys, n_slots = _slots("key_slots", key_slots, n_slots)
    counts = _keys_per_slot(keys, n_slots)
    own = counts.gather(-1, keys)  # (B, H, N): the keys in each key's slot, itself included
    return SlotOccupancy(occupied=(counts > 0).sum(-1), solitary=(counts == 1).sum(-1), colliding=(own > 1).sum(-1),
                         n_keys=keys.shape[-1], n_slots=n_slots)


def slot_agreement(key_slots, query_slots, *, n_slots: int | None = None) -> torch.Tensor:
    """The share of keys whose query lands in the key's slot, per sequence and head.

    Args:
        key_slots: the slot of each key, int ``(B, H, N)`` in ``[0, K)`` or responsibilities ``(B, H, N, K)``.
        query_slots: the slot of the query that asks for each key, in the same form and shape (query ``n`` asks
            for key ``n``).
        n_slots: ``K``, optional as in :func:`slot_occupancy`.

    Returns:
        ``(B, H)`` float64 in ``[0, 1]``.
    """
    keys, queries, _ = _pair(key_slots, query_slots, n_slots)
    return (keys == queries).double().mean(-1)


@dataclass(frozen=True)
class PredictedPairs:
    """The pairs the hard slots predict a slot memory returns, per sequence and head.

    Attributes:
        returned: ``(B, H, N)`` bool, key ``n`` is alone in its slot and its query lands in that slot.
        count: ``(B, H)`` int64, the predicted pairs (``returned`` summed over ``N``).
        misrouted: ``(B, H)`` int64, the keys alone in their slot whose query lands in another slot.
        colliding: ``(B, H)`` int64, the keys that share their slot (lost whatever their query does).
        n_keys: ``N``, the pairs of a sequence (``count + misrouted + colliding == n_keys``).
    """

    returned: torch.Tensor
    count: torch.Tensor
    misrouted: torch.Tensor
    colliding: torch.Tensor
    n_keys: int

    @property
    def share(self) -> torch.Tensor:
        """``(B, H)`` float64: the predicted pairs as a share of the ``N`` pairs."""
        return self.count.double() / self.n_keys


def predicted_pairs(key_slots, query_slots, *, n_slots: int | None = None) -> PredictedPairs:
    """The pairs a slot memory is predicted to return: keys alone in their slot whose query lands in that slot.

    Args:
        key_slots, query_slots, n_slots: as in :func:`slot_agreement`.

    Returns:
        :class:`PredictedPairs`: the returned keys ``(B, H, N)``, their count, the misrouted solitary keys and the
        colliding keys, each ``(B, H)``.
    """
    keys, queries, n_slots = _pair(key_slots, query_slots, n_slots)
    alone = _keys_per_slot(keys, n_slots).gather(-1, keys) == 1
    agree = keys == queries
    returned = alone & agree
    return PredictedPairs(returned=returned, count=returned.sum(-1), misrouted=(alone & ~agree).sum(-1),
                          colliding=(~alone).sum(-1), n_keys=keys.shape[-1])


def slot_report(key_slots, query_slots, *, n_slots: int | None = None) -> dict:
    """Every slot diagnostic averaged over the ``B`` sequences, per head, as plain numbers for a record.

    Args:
        key_slots, query_slots, n_slots: as in :func:`slot_agreement`.

    Returns:
        ``{"n_keys": N, "n_slots": K or None, "sequences": B, "occupied", "solitary", "solitary_share",
        "colliding", "collision_share", "agreement", "misrouted", "predicted_pairs", "predicted_share"}``: each
        name after ``"sequences"`` a list of ``H`` floats, the mean over the sequences of :func:`slot_occupancy`'s,
        :func:`slot_agreement`'s and :func:`predicted_pairs`'s values of that head (counts in keys or slots, shares
        of ``N``).
    """
    keys, queries, n_slots = _pair(key_slots, query_slots, n_slots)
    occupancy = slot_occupancy(keys, n_slots=n_slots)
    predicted = predicted_pairs(keys, queries, n_slots=n_slots)
    values = {"occupied": occupancy.occupied, "solitary": occupancy.solitary,
              "solitary_share": occupancy.solitary_share, "colliding": occupancy.colliding,
              "collision_share": occupancy.collision_share, "agreement": slot_agreement(keys, queries),
              "misrouted": predicted.misrouted, "predicted_pairs": predicted.count, "predicted_share": predicted.share}
    return {"n_keys": keys.shape[-1], "n_slots": n_slots, "sequences": keys.shape[0],
            **{name: [float(v) for v in value.double().mean(0)] for name, value in values.items()}}


@dataclass(frozen=True)
class LostPairSplit:
    """A measured number of lost pairs split by what the hard slots say about them (float64 tensors, 0-d for
    numbers; ``collisions + misrouted + blur == lost``).

    Attributes:
        n_pairs: the pairs stored. lost: ``n_pairs - retrieved``.
        collisions: the pairs whose key shares its slot with another key.
        misrouted: the pairs whose key is alone in its slot but whose query lands in another slot.
        blur: the rest, ``lost - collisions - misrouted``, which equals the predicted pairs minus the retrieved
            ones: pairs lost although their key is alone and their query lands in its slot, read wrong because the
            soft read mixes in other slots. Negative where the model retrieves more pairs than the hard slots
            predict (soft reads that give back some colliding or misrouted pairs); kept signed, never clipped, and
            :attr:`beyond_slots` names that excess.
    """

    n_pairs: torch.Tensor
    lost: torch.Tensor
    collisions: torch.Tensor
    misrouted: torch.Tensor
    blur: torch.Tensor

    @property
    def beyond_slots(self) -> torch.Tensor:
        """The pairs retrieved beyond the hard slots' prediction, ``-blur`` where ``blur < 0``, else 0."""
        return torch.where(self.blur < 0, -self.blur, torch.zeros_like(self.blur))

    def as_dict(self) -> dict:
        """``{"n_pairs", "lost", "collisions", "misrouted", "blur", "beyond_slots"}``, floats for 0-d values and
        nested lists otherwise."""
        names = ("n_pairs", "lost", "collisions", "misrouted", "blur", "beyond_slots")
        return {name: getattr(self, name).tolist() for name in names}


def _count(name: str, value) -> torch.Tensor:
    """``value`` (a real number or a real tensor) as a finite, non-negative float64 CPU tensor."""
    if isinstance(value, torch.Tensor):
        if value.dtype == torch.bool or value.is_complex():
            raise TypeError(f"{name} must be a real number or a real tensor, got dtype {value.dtype}")
        tensor = value.detach().to(device="cpu", dtype=torch.float64)
    elif isinstance(value, numbers.Real) and not isinstance(value, bool):
        tensor = torch.tensor(float(value), dtype=torch.float64)
    else:
        raise TypeError(f"{name} must be a real number or a real tensor, got {type(value).__name__}")
    if not torch.isfinite(tensor).all():
        raise ValueError(f"{name} must be finite, got {tensor.tolist()}")
    if (tensor < 0).any():
        raise ValueError(f"{name} must be >= 0 (a number of pairs), got a minimum of {float(tensor.min())}")
    return tensor


def lost_pair_split(retrieved, *, n_pairs, colliding, misrouted) -> LostPairSplit:
    """Split the pairs a memory lost into collisions, misrouted queries and blur.

    Args:
        retrieved: the pairs the memory gave back, as measured (e.g. retrieval accuracy times ``n_pairs``).
        n_pairs: the pairs stored, ``N`` (> 0).
        colliding: the keys sharing their slot (:attr:`PredictedPairs.colliding`, or its mean over sequences).
        misrouted: the solitary keys whose query lands elsewhere (:attr:`PredictedPairs.misrouted`, or its mean).

    Each argument is a real number or a tensor; tensors broadcast against each other (per sequence, per head, or
    means over sequences). ``retrieved`` and ``colliding + misrouted`` must lie in ``[0, n_pairs]``.

    Returns:
        :class:`LostPairSplit`: ``lost = n_pairs - retrieved`` into ``collisions`` (= ``colliding``),
        ``misrouted`` and ``blur`` (the rest, signed: negative where the model retrieves beyond the slots).
    """
    n = _count("n_pairs", n_pairs)
    if (n <= 0).any():
        raise ValueError(f"n_pairs must be > 0, got {n.tolist()}")
    got, collisions, missed = _count("retrieved", retrieved), _count("colliding", colliding), _count("misrouted",
                                                                                                      misrouted)
    try:
        n, got, collisions, missed = torch.broadcast_tensors(n, got, collisions, missed)
    except RuntimeError as error:
        raise ValueError(f"retrieved {tuple(got.shape)}, n_pairs {tuple(n.shape)}, colliding "
                         f"{tuple(collisions.shape)} and misrouted {tuple(missed.shape)} must broadcast") from error
    tolerance = 1e-9 * n
    if (got > n + tolerance).any():
        raise ValueError(f"retrieved must be at most n_pairs, got {got.tolist()} of {n.tolist()}")
    if (collisions + missed > n + tolerance).any():
        raise ValueError(f"colliding + misrouted must be at most n_pairs, got {(collisions + missed).tolist()} of "
                         f"{n.tolist()}")
    lost = n - got
    return LostPairSplit(n_pairs=n, lost=lost, collisions=collisions, misrouted=missed,
                         blur=lost - collisions - missed)
