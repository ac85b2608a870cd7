"""The capacity study's curves (gma_teach.capacity, module _curves): records read into curves over seeds, the slot
predictions, and accuracy against state bytes."""
from __future__ import annotations

import math
import statistics

import pytest

from gma_teach.capacity import (
    PUBLISHED_COUNTERPARTS,
    capacity_curves,
    capacity_formula,
    published_comparison,
    published_final,
    random_slot_recall,
    routing_curves,
    routing_sentences,
    slot_predictions,
    state_at,
)


def _run(seed: int, accuracy: dict, *, state: int = 16_640, stopped: str = "max_steps") -> dict:
    """A capacity run as fast_weight_seed records it, with the given accuracy at each S."""
    sizes = [str(n) for n in accuracy]
    return {"seed": seed, "retrieval_accuracy": {str(n): a for n, a in accuracy.items()},
            "loss": {str(n): 0.5 * (1 - a) for n, a in accuracy.items()}, "state_bytes": dict.fromkeys(sizes, state),
            "steps": {n: 100 * (seed + 1) for n in sizes}, "stopped": dict.fromkeys(sizes, stopped)}


def test_curves_average_over_seeds_in_order_of_s():
    records = {"linear": {"runs": [_run(0, {120: 0.3, 20: 1.0}), _run(1, {20: 0.9, 120: 0.5}),
                                   _run(2, {20: 0.95, 120: 0.4}, stopped="plateau")]}}
    curve = capacity_curves(records)["linear"]
    assert curve["n_pairs"] == (20, 120) and curve["seeds"] == (0, 1, 2)
    assert curve["accuracy"] == pytest.approx((0.95, 0.4))
    spread = (statistics.stdev([1.0, 0.9, 0.95]), statistics.stdev([0.3, 0.5, 0.4]))
    assert curve["accuracy_sd"] == pytest.approx(spread)
    assert curve["loss"] == pytest.approx((0.025, 0.3))
    assert curve["state_bytes"] == (16_640, 16_640) and curve["steps"] == (200.0, 200.0)
    assert curve["stopped"][1] == {"max_steps": 2, "plateau": 1}


def test_one_seed_has_no_spread_and_sizes_not_held_by_every_seed_are_dropped():
    records = {"gma_k64": {"runs": [_run(0, {20: 0.5, 40: 0.25}), _run(1, {20: 0.7})]},
               "sdpa": {"runs": [_run(0, {20: 1.0}, state=5_376)]}}
    curves = capacity_curves(records)
    assert curves["gma_k64"]["n_pairs"] == (20,) and curves["gma_k64"]["accuracy"] == pytest.approx((0.6,))
    assert curves["sdpa"]["accuracy_sd"] == (0.0,)


@pytest.mark.parametrize("records", [{}, [], {"linear": {"runs": []}}, {"linear": {"runs": [{"seed": 0}]}}])
def test_bad_records_are_refused(records):
    with pytest.raises(ValueError, match="record|runs|lacks"):
        capacity_curves(records)


def test_slot_predictions_are_the_exact_demo_and_a_random_router_below_it():
    predictions = slot_predictions([20, 64, 200], 64, n_trials=200)
    assert predictions["perfect"] == (1.0, 1.0, pytest.approx(64 / 200))
    assert predictions["perfect"] == tuple(capacity_formula(n, 64) for n in (20, 64, 200))
    for n, random, perfect in zip((20, 64, 200), predictions["random"], predictions["perfect"]):
        expected = 64 * (1 - (1 - 1 / 64) ** n) / n  # occupied slots over n: the random router's expectation
        assert random == pytest.approx(expected, abs=0.02) and random < perfect
    with pytest.raises(ValueError, match="n_slots"):
        slot_predictions([20], 0)
    with pytest.raises(ValueError, match="n_pairs"):
        slot_predictions([], 64)


def test_state_at_sets_accuracy_beside_state_bytes():
    curves = capacity_curves({"linear": {"runs": [_run(0, {80: 0.7, 120: 0.5})]},
                              "sdpa": {"runs": [_run(0, {120: 1.0}, state=30_976)]}})
    points = state_at(curves, 120)
    assert points == {"linear": {"state_bytes": 16_640, "accuracy": 0.5, "accuracy_sd": 0.0},
                      "sdpa": {"state_bytes": 30_976, "accuracy": 1.0, "accuracy_sd": 0.0}}
    assert set(state_at(curves, 80)) == {"linear"}
    with pytest.raises(ValueError, match="S = 60"):
        state_at(curves, 60)


def test_published_comparison_pairs_each_arm_with_its_counterpart_at_shared_sizes():
    records = {"linear": {"runs": [_run(0, {60: 0.9, 80: 0.7, 70: 0.8}, stopped="target"),
                                   _run(1, {60: 0.8, 80: 0.6, 70: 0.8})]},
               "gma_k64_remedy": {"runs": [_run(0, {60: 0.4})]}}
    rows = published_comparison(capacity_curves(records))
    assert [(r["arm"], r["n_pairs"]) for r in rows] == [("linear", 60), ("linear", 80)]  # no published S = 70
    theirs = published_final(PUBLISHED_COUNTERPARTS["linear"])
    first = rows[0]
    assert first["published"] == "linear" and first["reached"] == 0.5
    assert first["loss"] == pytest.approx(0.5 * (1 - 0.85))
    assert first["published_loss"] == theirs[60]["loss"] and first["published_reached"] is False
    assert first["published_steps"] == theirs[60]["steps"]
    with pytest.raises(ValueError, match="published model"):
        published_comparison(capacity_curves(records), counterparts={"linear": "mamba"})


def _routed(run: dict, key_bits: dict) -> dict:
    """``run`` with a routing entry at each S: the key router's bits as given, the query's one bit less."""
    def side(bits):
        return {"bits": bits, "untrained_bits": 0.5, "shuffled_bits": 0.25, "state": "in use"}
    return {**run, "routing": {str(n): {"key": side(b), "query": side(b - 1)} for n, b in key_bits.items()}}


def test_routing_curves_read_effective_slots_and_the_random_router_over_them():
    spec = {"mixer": "gma", "options": {"n_components": 64}}
    records = {"gma_k64_remedy": {"spec": spec, "runs": [_routed(_run(0, {20: 0.5, 80: 0.2}), {20: 3.0, 80: 4.0}),
                                                         _routed(_run(1, {20: 0.5, 80: 0.2}), {20: 3.0, 80: 5.0})]},
               "linear": {"runs": [_run(0, {20: 1.0, 80: 0.7})]}}
    curves = routing_curves(records)
    assert set(curves) == {"gma_k64_remedy"}  # an arm without routing is left out
    curve = curves["gma_k64_remedy"]
    assert curve["n_pairs"] == (20, 80) and curve["key_bits"] == pytest.approx((3.0, 4.5))
    assert curve["query_bits"] == pytest.approx((2.0, 3.5))
    assert curve["effective_slots"] == pytest.approx((8.0, 2 ** 4.5))
    assert curve["bound_bits"] == pytest.approx((math.log2(20), 6.0))
    assert curve["predicted_accuracy"][0] == pytest.approx(random_slot_recall(20, 8, 400, seed=0)[0])
    assert curve["predicted_accuracy"][1] == pytest.approx(random_slot_recall(80, 23, 400, seed=0)[0])
    assert curve["states"][1] == {"in use": 2}


def test_routing_sentences_are_computed_from_the_record():
    spec = {"mixer": "gma", "options": {"n_components": 64}}
    runs = [_routed(_run(0, {20: 0.5, 80: 0.2}), {20: 3.0, 80: 4.0}),
            _routed(_run(1, {20: 0.7, 80: 0.2}), {20: 3.0, 80: 5.0})]
    runs[1]["routing"]["80"]["key"]["state"] = "at baseline"
    first, second, third = routing_sentences({"gma_k64_remedy": {"spec": spec, "runs": runs}}, "gma_k64_remedy")
    assert first.startswith("gma_k64_remedy (2 seeds, S = 20 to 80): its key routing carries 3.0 to 4.5 bits, 8 to 23 "
                            "effective slots of its 64; training changed the untrained router's bits by +2.5 to +4.0.")
    low = min(0.6 - random_slot_recall(20, 8, 400, seed=0)[0], 0.2 - random_slot_recall(80, 23, 400, seed=0)[0])
    assert second.startswith(f"Its accuracy differs from a random router's over those slots by {low:+.2f} to ")
    assert second.endswith(f"by {0.2 - 0.8:+.2f} to {0.6 - 1.0:+.2f}.")
    assert third == ("Chapter 11's rule names the key router at baseline in 1 of 4 runs and sizes, in use in 3 of 4 "
                     "runs and sizes.")
    with pytest.raises(ValueError, match="no routing"):
        routing_sentences({"linear": {"runs": [_run(0, {20: 1.0})]}}, "linear")
