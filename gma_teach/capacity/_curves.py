"""The capacity study's curves: what each arm keeps as the number of stored pairs ``S`` grows, beside the slot
predictions of the chapter's exact demo and the state each arm keeps.

* :func:`capacity_curves` reads the runs of each arm's record (``gma_teach.designs.CAPACITY_STUDY``, one record per
  arm as the runner writes it) into, at each ``S``, the mean and spread over the recorded seeds of the retrieval
  accuracy and the loss, the arm's state bytes, its steps and how its runs stopped.
* :func:`slot_predictions` gives, for a memory of ``K`` slots, the two lines the chapter draws over them: the
  perfect router's ``min(1, K/S)`` (:func:`gma_teach.capacity.capacity_formula`) and the random router's Monte
  Carlo mean (:func:`gma_teach.capacity.random_slot_recall`).
* :func:`state_at` reads the accuracy of every arm at one ``S`` against its state bytes, the x axis on which arms of
  equal state are compared.
* :func:`routing_curves` reads what a GMA arm's routing carries at each ``S``: the information of its key and
  query responsibilities and the number of slots that information amounts to.
* :func:`published_comparison` sets each arm's loss beside the published run of its counterpart
  (:data:`PUBLISHED_COUNTERPARTS`, module ``_published``) at every ``S`` both have.
"""
from __future__ import annotations

import math
import statistics

from .. import _checks
from ._exact import capacity_formula, random_slot_recall
from ._published import PUBLISHED_CURVES, TARGET_LOSS, published_final
from ._table import gma_size

__all__ = ["PUBLISHED_COUNTERPARTS", "capacity_curves", "published_comparison", "routing_curves",
           "key_routing_phrase", "routing_sentences", "slot_predictions", "state_at"]

PUBLISHED_COUNTERPARTS = {"sdpa": "softmax", "linear": "linear", "performer_m128": "favor_m64"}
"""Each arm of the capacity study with a published counterpart of the same kind and feature count: softmax,
linear attention with ``elu + 1`` (64 features), and Performer with 128 positive features against their FAVOR with
``m = 64``, whose ``[exp(u), exp(-u)]`` features number ``2m = 128``. Their other FAVOR runs (256 and 1,024
features) have no arm here, and the arms at 64 and 512 features no published run."""


def _arm_runs(arm: str, record) -> list[dict]:
    if not isinstance(record, dict) or not isinstance(record.get("runs"), list) or not record["runs"]:
        raise ValueError(f"record of arm {arm!r} must be a capacity record with at least one run, got "
                         f"{type(record).__name__}")
    runs = record["runs"]
    for run in runs:
        missing = {"retrieval_accuracy", "loss", "state_bytes", "steps", "stopped"} - set(run)
        if missing:
            raise ValueError(f"a run of arm {arm!r} lacks {sorted(missing)}: not a capacity run")
    return runs


def capacity_curves(records) -> dict:
    """Each arm's retrieval accuracy and loss against ``S``, over its recorded seeds.

    Args:
        records: ``{arm: record}``, each the capacity study's record of one arm (its ``"runs"``, one per seed, each
            with per-``S`` entries keyed by ``str(S)``).

    Returns:
        ``{arm: {"n_pairs": (S, ...) ascending, "seeds": (seed, ...), "accuracy", "accuracy_sd", "loss",
        "loss_sd": tuples over ``n_pairs`` (mean and sample standard deviation over the seeds; the deviation is
        0.0 for one seed), "state_bytes": (bytes at each S), "steps": (mean steps at each S), "stopped": ({reason:
        count} at each S)}}``. Only the sizes every recorded seed holds are kept.
    """
    if not isinstance(records, dict) or not records:
        raise ValueError(f"records must be a non-empty dict {{arm: record}}, got {type(records).__name__}")
    curves = {}
    for arm, record in records.items():
        runs = _arm_runs(arm, record)
        common = set.intersection(*(set(run["retrieval_accuracy"]) for run in runs))
        sizes = tuple(sorted(int(n) for n in common))

        def over_seeds(part, n, runs=runs):
            return [float(run[part][str(n)]) for run in runs]

        def spread(values):
            return statistics.stdev(values) if len(values) > 1 else 0.0

        curves[arm] = {
            "n_pairs": sizes,
            "seeds": tuple(run["seed"] for run in runs),
            "accuracy": tuple(statistics.fmean(over_seeds("retrieval_accuracy", n)) for n in sizes),
            "accuracy_sd": tuple(spread(over_seeds("retrieval_accuracy", n)) for n in sizes),
            "loss": tuple(statistics.fmean(over_seeds("loss", n)) for n in sizes),
            "loss_sd": tuple(spread(over_seeds("loss", n)) for n in sizes),
            "state_bytes": tuple(int(runs[0]["state_bytes"][str(n)]) for n in sizes),
            "steps": tuple(statistics.fmean(over_seeds("steps", n)) for n in sizes),
            "stopped": tuple({reason: sum(run["stopped"][str(n)] == reason for run in runs)
                              for reason in sorted({run["stopped"][str(n)] for run in runs})} for n in sizes),
        }
    return curves


def routing_curves(records) -> dict:
    """What the routing of each GMA arm carries at each ``S``, over its recorded seeds.

    A key router that carries ``I`` bits about which pair a token is spreads the pairs as evenly as one that gives
    each pair one of ``2^I`` slots at random would: ``2^I`` is its number of *effective slots*, at most
    ``min(S, K)``. The accuracy such a router would give is the random router's over ``2^I`` slots
    (:func:`gma_teach.capacity.random_slot_recall`, rounded to whole slots): a trained GMA arm near that line
    spends its state as its routing says; one far above it reads more than its slots' averages.

    Args:
        records: ``{arm: record}`` as for :func:`capacity_curves`; arms whose runs hold no ``"routing"`` (every
            arm that is not GMA, and GMA runs made before the routing was recorded) are left out.

    Returns:
        ``{arm: {"n_pairs", "seeds", "key_bits", "key_bits_sd", "query_bits", "untrained_key_bits",
        "shuffled_key_bits", "bound_bits" (``log2 min(S, K)``, when the record's ``spec`` names ``K``),
        "effective_slots" (``2^key_bits``),
        "predicted_accuracy" (random router over the effective slots, 400 draws), "states" ({state: count} of
        the key router at each S)}}``, each a tuple over ``n_pairs``.
    """
    if not isinstance(records, dict):
        raise TypeError(f"records must be a dict {{arm: record}}, got {type(records).__name__}")
    curves = {}
    for arm, record in records.items():
        runs = [run for run in _arm_runs(arm, record) if "routing" in run]
        if not runs:
            continue
        sizes = tuple(sorted(int(n) for n in set.intersection(*(set(run["routing"]) for run in runs))))

        def over_seeds(side, name, n, runs=runs):
            return [float(run["routing"][str(n)][side][name]) for run in runs]

        key_bits = tuple(statistics.fmean(over_seeds("key", "bits", n)) for n in sizes)
        n_slots = gma_size(arm, record["spec"])[0]  # a run with routing is a GMA arm's
        slots = tuple(2.0 ** bits for bits in key_bits)
        curves[arm] = {
            "n_pairs": sizes, "seeds": tuple(run["seed"] for run in runs), "key_bits": key_bits,
            "key_bits_sd": tuple(statistics.stdev(v) if len(v := over_seeds("key", "bits", n)) > 1 else 0.0
                                 for n in sizes),
            "query_bits": tuple(statistics.fmean(over_seeds("query", "bits", n)) for n in sizes),
            "untrained_key_bits": tuple(statistics.fmean(over_seeds("key", "untrained_bits", n)) for n in sizes),
            "shuffled_key_bits": tuple(statistics.fmean(over_seeds("key", "shuffled_bits", n)) for n in sizes),
            "effective_slots": slots,
            "predicted_accuracy": tuple(random_slot_recall(n, max(1, round(k)), 400, seed=0)[0]
                                        for n, k in zip(sizes, slots)),
            "states": tuple({state: sum(run["routing"][str(n)]["key"]["state"] == state for run in runs)
                             for state in sorted({run["routing"][str(n)]["key"]["state"] for run in runs})}
                            for n in sizes),
        }
        if n_slots is not None:
            curves[arm]["bound_bits"] = tuple(math.log2(min(n, n_slots)) for n in sizes)
    return curves


def routing_sentences(records, arm: str) -> list[str]:
    """What ``arm``'s key routing carries and what it lets the memory hold, in sentences computed from its record.

    Args:
        records: ``{arm: record}`` as for :func:`capacity_curves`, holding ``arm`` with its routing recorded.
        arm: a GMA arm of the capacity study.

    Returns:
        Three sentences: the bits and effective slots over ``S`` with what training added to the untrained
        router's; the accuracy against a random router over those slots and against the perfect router
        ``min(1, K/S)``; how chapter 11's rule names the key router at each ``S``.
    """
    if arm not in records:
        raise ValueError(f"arm {arm!r} is not in records ({', '.join(records) or 'none'})")
    routing = routing_curves({arm: records[arm]}).get(arm)
    if routing is None:
        raise ValueError(f"the runs of arm {arm!r} hold no routing (only GMA runs record it)")
    curve = capacity_curves({arm: records[arm]})[arm]
    sizes = [n for n in routing["n_pairs"] if n in curve["n_pairs"]]
    at = {n: i for i, n in enumerate(routing["n_pairs"])}
    accuracy = {n: curve["accuracy"][curve["n_pairs"].index(n)] for n in sizes}
    bits = [routing["key_bits"][at[n]] for n in sizes]
    slots = [routing["effective_slots"][at[n]] for n in sizes]
    gained = [routing["key_bits"][at[n]] - routing["untrained_key_bits"][at[n]] for n in sizes]
    to_random = [accuracy[n] - routing["predicted_accuracy"][at[n]] for n in sizes]
    n_slots = records[arm]["spec"]["options"]["n_components"]
    to_perfect = [accuracy[n] - capacity_formula(n, n_slots) for n in sizes]
    states = {}
    for n in sizes:
        for state, count in routing["states"][at[n]].items():
            states[state] = states.get(state, 0) + count
    runs = len(routing["seeds"]) * len(sizes)
    seeds = f"{len(routing['seeds'])} seed{'s' if len(routing['seeds']) > 1 else ''}"
    return [
        f"{arm} ({seeds}, S = {sizes[0]} to {sizes[-1]}): its key routing carries {min(bits):.1f} to "
        f"{max(bits):.1f} bits, {min(slots):.0f} to {max(slots):.0f} effective slots of its {n_slots}; training "
        f"changed the untrained router's bits by {min(gained):+.1f} to {max(gained):+.1f}.",
        f"Its accuracy differs from a random router's over those slots by {min(to_random):+.2f} to "
        f"{max(to_random):+.2f}, and from the perfect router's min(1, K/S) by {min(to_perfect):+.2f} to "
        f"{max(to_perfect):+.2f}.",
        "Chapter 11's rule names the key router " + ", ".join(f"{state} in {count} of {runs} runs and sizes"
                                                              for state, count in sorted(states.items())) + ".",
    ]


def key_routing_phrase(record: dict | None, sizes) -> str:
    """``"; its key routing carrying a to b bits at S = ... (c to d effective slots of K)"``: what a GMA arm's key
    routing carries at ``sizes``, averaged over its seeds, for a claim's scope; ``""`` when the record holds no
    routing at those sizes (no record, an arm that is not GMA, runs made before the routing was recorded)."""
    if not record or not record.get("runs"):
        return ""
    routing = next(iter(routing_curves({"arm": record}).values()), None)
    if routing is None or not set(sizes) <= set(routing["n_pairs"]):
        return ""
    bits = [routing["key_bits"][routing["n_pairs"].index(n)] for n in sizes]
    slots = [2.0 ** b for b in bits]
    return (f"; its key routing carrying {min(bits):.1f} to {max(bits):.1f} bits at S = "
            f"{', '.join(str(n) for n in sizes)} ({min(slots):.0f} to {max(slots):.0f} effective slots of "
            f"K = {record['spec']['options']['n_components']}, chapter 12)")


def slot_predictions(n_pairs, n_slots: int, *, n_trials: int = 400, seed: int = 0) -> dict:
    """The chapter's two predictions for a memory of ``n_slots`` slots holding each of ``n_pairs`` pairs.

    Returns:
        ``{"n_pairs": (S, ...), "perfect": (min(1, K/S), ...), "random": (Monte Carlo mean, ...)}``: a router that
        gives every key a slot of its own while slots last, and one that puts every key in a uniformly random
        slot (ties shared fairly, ``n_trials`` draws from ``seed``).
    """
    n_slots = _checks.positive_int("n_slots", n_slots)
    sizes = tuple(_checks.positive_int("n_pairs", n) for n in n_pairs)
    if not sizes:
        raise ValueError("n_pairs must hold at least one size")
    return {"n_pairs": sizes,
            "perfect": tuple(capacity_formula(n, n_slots) for n in sizes),
            "random": tuple(random_slot_recall(n, n_slots, n_trials, seed=seed)[0] for n in sizes)}


def state_at(curves: dict, n_pairs: int) -> dict:
    """``{arm: {"state_bytes", "accuracy", "accuracy_sd"}}`` of every arm of :func:`capacity_curves` at ``S =
    n_pairs`` (arms that did not record that size are left out; a ``ValueError`` if none did)."""
    n_pairs = _checks.positive_int("n_pairs", n_pairs)
    points = {}
    for arm, curve in curves.items():
        if n_pairs in curve["n_pairs"]:
            i = curve["n_pairs"].index(n_pairs)
            points[arm] = {"state_bytes": curve["state_bytes"][i], "accuracy": curve["accuracy"][i],
                           "accuracy_sd": curve["accuracy_sd"][i]}
    if not points:
        raise ValueError(f"no arm recorded S = {n_pairs}")
    return points


def published_comparison(curves: dict, *, counterparts: dict | None = None) -> list[dict]:
    """Each arm's loss beside its counterpart's published run, at every ``S`` both hold.

    Args:
        curves: :func:`capacity_curves`.
        counterparts: ``{arm: published model}`` (default :data:`PUBLISHED_COUNTERPARTS`); arms not in ``curves``
            are skipped.

    Returns:
        one dict per (arm, ``S``), in the order of ``counterparts`` then ``S``: ``{"arm", "published", "n_pairs",
        "loss" (the arm's mean over seeds), "reached" (the share of its seeds stopped at the target loss),
        "published_loss" (their last logged loss), "published_reached" (bool), "published_steps"}``.
    """
    counterparts = PUBLISHED_COUNTERPARTS if counterparts is None else counterparts
    rows = []
    for arm, model in counterparts.items():
        if arm not in curves:
            continue
        if model not in PUBLISHED_CURVES:
            raise ValueError(f"counterparts[{arm!r}] must be a published model ({', '.join(PUBLISHED_CURVES)}), "
                             f"got {model!r}")
        theirs, curve = published_final(model), curves[arm]
        for i, n in enumerate(curve["n_pairs"]):
            if n not in theirs:
                continue
            stopped = curve["stopped"][i]
            rows.append({"arm": arm, "published": model, "n_pairs": n, "loss": curve["loss"][i],
                         "reached": stopped.get("target", 0) / sum(stopped.values()),
                         "published_loss": theirs[n]["loss"], "published_reached": theirs[n]["loss"] <= TARGET_LOSS,
                         "published_steps": theirs[n]["steps"]})
    return rows
