"""Slot diagnostics (gma_teach.diagnostics.slots) on hand cases and against a brute-force count, and their record in
every GMA run of the capacity test."""
from __future__ import annotations

import random
from collections import Counter

import pytest
import torch

from gma_teach import designs
from gma_teach.capacity import (
    FastWeightBatch,
    FastWeightModel,
    fast_weight_data,
    routing_sample,
    slot_summary,
)
from gma_teach.diagnostics import (
    capture_responsibilities,
    lost_pair_split,
    predicted_pairs,
    slot_agreement,
    slot_occupancy,
    slot_report,
)
from gma_teach.study import run_arm

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _brute_force(keys: list[int], queries: list[int]) -> dict:
    """One sequence and head counted in plain Python: the slots and keys of every diagnostic."""
    per_slot = Counter(keys)
    alone = [per_slot[slot] == 1 for slot in keys]
    agree = [key == query for key, query in zip(keys, queries)]
    return {"occupied": len(per_slot), "solitary": sum(count == 1 for count in per_slot.values()),
            "colliding": sum(not a for a in alone), "agreement": sum(agree) / len(keys),
            "predicted": sum(a and g for a, g in zip(alone, agree)),
            "misrouted": sum(a and not g for a, g in zip(alone, agree))}


# ------------------------------------------------------------------------------------------------ hand cases
def test_a_permutation_gives_every_key_a_slot_and_every_pair_back():
    """N = 7 keys on distinct slots of K = 11 (a different draw per sequence and head), each query in its key's
    slot: 7 occupied slots, 7 solitary, no collision, agreement 1, all 7 pairs predicted."""
    n_keys, n_slots = 7, 11
    rng = random.Random(0)
    keys = torch.tensor([[rng.sample(range(n_slots), n_keys) for _ in range(3)] for _ in range(2)])  # (2, 3, 7)
    occupancy = slot_occupancy(keys, n_slots=n_slots)
    assert occupancy.occupied.shape == (2, 3)
    assert (occupancy.occupied == 7).all() and (occupancy.solitary == 7).all() and (occupancy.colliding == 0).all()
    assert (occupancy.solitary_share == 1.0).all() and (occupancy.collision_share == 0.0).all()
    assert (slot_agreement(keys, keys.clone()) == 1.0).all()
    predicted = predicted_pairs(keys, keys.clone(), n_slots=n_slots)
    assert (predicted.count == 7).all() and (predicted.share == 1.0).all() and predicted.returned.all()
    assert (predicted.misrouted == 0).all() and (predicted.colliding == 0).all()


def test_all_keys_in_one_slot_collide_and_none_is_predicted():
    """N = 5 keys all in slot 2 of K = 4: one occupied slot, no solitary one, all 5 collide, 0 predicted even with
    every query in slot 2 (agreement 1). With N = 1 the one key is alone: 1 solitary slot and 1 pair predicted."""
    keys = torch.full((1, 2, 5), 2)
    occupancy = slot_occupancy(keys, n_slots=4)
    assert occupancy.occupied.tolist() == [[1, 1]] and occupancy.solitary.tolist() == [[0, 0]]
    assert occupancy.colliding.tolist() == [[5, 5]]
    assert slot_agreement(keys, keys).tolist() == [[1.0, 1.0]]
    predicted = predicted_pairs(keys, keys, n_slots=4)
    assert predicted.count.tolist() == [[0, 0]] and predicted.misrouted.tolist() == [[0, 0]]
    assert predicted.colliding.tolist() == [[5, 5]]
    single = torch.full((1, 1, 1), 2)
    assert slot_occupancy(single).solitary.tolist() == [[1]] and slot_occupancy(single).colliding.tolist() == [[0]]
    assert predicted_pairs(single, single).count.tolist() == [[1]]


def test_a_small_hand_case_counted_by_hand():
    """Keys in slots 0, 1, 1, 2, 3 and queries in 0, 1, 2, 3, 3: slots 0, 2, 3 hold one key each (3 solitary) and
    slot 1 two (2 colliding keys, 4 occupied slots); queries 0, 1 and 4 land in their key's slot (agreement 3/5);
    keys 0 and 4 are alone and agree (2 predicted), key 3 is alone and misrouted."""
    keys, queries = torch.tensor([[[0, 1, 1, 2, 3]]]), torch.tensor([[[0, 1, 2, 3, 3]]])
    occupancy = slot_occupancy(keys)
    assert (occupancy.occupied.item(), occupancy.solitary.item(), occupancy.colliding.item()) == (4, 3, 2)
    assert slot_agreement(keys, queries).item() == pytest.approx(0.6)
    predicted = predicted_pairs(keys, queries, n_slots=5)
    assert predicted.returned.tolist() == [[[True, False, False, False, True]]]
    assert (predicted.count.item(), predicted.misrouted.item(), predicted.colliding.item()) == (2, 1, 2)
    assert predicted.share.item() == pytest.approx(0.4)


def test_queries_routed_elsewhere_agree_nowhere_and_predict_nothing():
    """Every query one slot past its key's (mod K): agreement 0, no pair predicted, every solitary key misrouted."""
    n_keys, n_slots = 9, 6
    keys = torch.randint(0, n_slots, (4, 2, n_keys), generator=torch.Generator().manual_seed(1))
    queries = (keys + 1) % n_slots
    assert (slot_agreement(keys, queries) == 0.0).all()
    predicted = predicted_pairs(keys, queries, n_slots=n_slots)
    assert (predicted.count == 0).all() and not predicted.returned.any()
    solitary = slot_occupancy(keys, n_slots=n_slots).solitary
    assert torch.equal(predicted.misrouted, solitary)
    assert torch.equal(predicted.colliding, n_keys - solitary)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_random_hash_against_a_brute_force_count(seed):
    """N = 37 keys hashed into K = 13 slots, B = 3 sequences of H = 5 heads, queries half on their key's slot and
    half anywhere: every diagnostic equals a plain Counter count of each sequence and head."""
    n_batch, n_heads, n_keys, n_slots = 3, 5, 37, 13
    generator = torch.Generator().manual_seed(seed)
    keys = torch.randint(0, n_slots, (n_batch, n_heads, n_keys), generator=generator)
    anywhere = torch.randint(0, n_slots, keys.shape, generator=generator)
    queries = torch.where(torch.rand(keys.shape, generator=generator) < 0.5, keys, anywhere)
    occupancy = slot_occupancy(keys, n_slots=n_slots)
    agreement = slot_agreement(keys, queries, n_slots=n_slots)
    predicted = predicted_pairs(keys, queries, n_slots=n_slots)
    report = slot_report(keys, queries, n_slots=n_slots)
    counts = [[_brute_force(keys[b, h].tolist(), queries[b, h].tolist()) for h in range(n_heads)]
              for b in range(n_batch)]
    for b in range(n_batch):
        for h in range(n_heads):
            expected = counts[b][h]
            assert int(occupancy.occupied[b, h]) == expected["occupied"]
            assert int(occupancy.solitary[b, h]) == expected["solitary"]
            assert int(occupancy.colliding[b, h]) == expected["colliding"]
            assert float(agreement[b, h]) == pytest.approx(expected["agreement"], abs=1e-12)
            assert int(predicted.count[b, h]) == expected["predicted"]
            assert int(predicted.misrouted[b, h]) == expected["misrouted"]
    assert report["sequences"] == n_batch and report["n_keys"] == n_keys and report["n_slots"] == n_slots
    for h in range(n_heads):
        assert report["predicted_pairs"][h] == pytest.approx(sum(c[h]["predicted"] for c in counts) / n_batch)
        assert report["solitary_share"][h] == pytest.approx(
            sum(c[h]["solitary"] for c in counts) / (n_batch * n_keys))
        assert report["agreement"][h] == pytest.approx(sum(c[h]["agreement"] for c in counts) / n_batch)


def test_responsibilities_are_read_by_their_argmax_with_ties_to_the_lowest_slot():
    """Responsibilities (B, H, N, K) give the diagnostics of their argmax slots, found here by a Python loop; a
    tie between two slots goes to the lower one."""
    generator = torch.Generator().manual_seed(4)
    gamma_k = torch.rand(2, 3, 11, 5, generator=generator, dtype=torch.float64).softmax(-1)
    gamma_q = torch.rand(2, 3, 11, 5, generator=generator, dtype=torch.float64).softmax(-1)

    def argmax(row):
        return max(range(len(row)), key=lambda k: (row[k], -k))

    key_slots = torch.tensor([[[argmax(r) for r in h] for h in b] for b in gamma_k.tolist()])
    query_slots = torch.tensor([[[argmax(r) for r in h] for h in b] for b in gamma_q.tolist()])
    assert torch.equal(predicted_pairs(gamma_k, gamma_q).count, predicted_pairs(key_slots, query_slots).count)
    assert torch.equal(slot_agreement(gamma_k, query_slots), slot_agreement(key_slots, query_slots))
    assert slot_occupancy(gamma_k).n_slots == 5
    tied = torch.tensor([[[[0.4, 0.4, 0.2], [0.2, 0.4, 0.4]]]])  # keys to slots 0 and 1: apart
    assert slot_occupancy(tied).solitary.tolist() == [[2]]


# ------------------------------------------------------------------------------------------------ the split
def test_the_split_adds_up_to_the_lost_pairs_and_keeps_a_negative_blur():
    """N = 10 pairs, 3 colliding keys, 2 misrouted queries: 5 pairs predicted. Retrieving 4 loses 6 = 3 + 2 + 1
    (blur 1); retrieving 7 loses 3 = 3 + 2 - 2 (blur -2: 2 pairs beyond the slots)."""
    short = lost_pair_split(4, n_pairs=10, colliding=3, misrouted=2)
    assert (float(short.lost), float(short.collisions), float(short.misrouted), float(short.blur)) == (6, 3, 2, 1)
    assert float(short.beyond_slots) == 0.0
    beyond = lost_pair_split(7, n_pairs=10, colliding=3, misrouted=2)
    assert float(beyond.lost) == 3 and float(beyond.blur) == -2 and float(beyond.beyond_slots) == 2
    assert beyond.as_dict() == {"n_pairs": 10.0, "lost": 3.0, "collisions": 3.0, "misrouted": 2.0, "blur": -2.0,
                                "beyond_slots": 2.0}


def test_the_split_of_a_random_hash_adds_up_per_sequence_and_head():
    generator = torch.Generator().manual_seed(7)
    keys = torch.randint(0, 13, (4, 3, 37), generator=generator)
    queries = torch.where(torch.rand(keys.shape, generator=generator) < 0.7, keys,
                          torch.randint(0, 13, keys.shape, generator=generator))
    predicted = predicted_pairs(keys, queries, n_slots=13)
    retrieved = torch.randint(0, 38, (4, 3), generator=generator)
    split = lost_pair_split(retrieved, n_pairs=37, colliding=predicted.colliding, misrouted=predicted.misrouted)
    assert split.lost.shape == (4, 3)
    torch.testing.assert_close(split.collisions + split.misrouted + split.blur, 37.0 - retrieved.double())
    torch.testing.assert_close(split.blur, predicted.count.double() - retrieved.double())  # predicted - retrieved
    assert torch.equal(split.beyond_slots > 0, retrieved > predicted.count)


# ------------------------------------------------------------------------------------------------ bad input
def test_bad_input_is_refused_with_the_argument_named():
    keys = torch.tensor([[[0, 1, 2]]])
    with pytest.raises(TypeError, match="key_slots"):
        slot_occupancy([[[0, 1]]])
    with pytest.raises(TypeError, match="key_slots.*bool"):
        slot_occupancy(torch.ones(1, 1, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"key_slots.*\(B, H, N, K\).*\(1, 3\)"):
        slot_occupancy(torch.rand(1, 3))  # floating point but not 4-D: not responsibilities
    with pytest.raises(ValueError, match=r"key_slots.*\(B, H, N\).*\(3,\)"):
        slot_occupancy(torch.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match=r"key_slots.*\[0, K\).*n_slots = 3.*5"):
        slot_occupancy(torch.tensor([[[0, 5, 1]]]), n_slots=3)
    with pytest.raises(ValueError, match=r"key_slots.*\[0, K\).*-1"):
        slot_occupancy(torch.tensor([[[0, -1, 1]]]))
    with pytest.raises(ValueError, match="n_slots must be >= 1.*0"):
        slot_occupancy(keys, n_slots=0)
    with pytest.raises(TypeError, match="n_slots"):
        slot_occupancy(keys, n_slots=2.0)
    with pytest.raises(ValueError, match="key_slots.*K >= 1"):
        slot_occupancy(torch.rand(1, 1, 3, 0))
    with pytest.raises(ValueError, match="key_slots.*K = 4.*n_slots = 5"):
        slot_occupancy(torch.rand(1, 1, 3, 4), n_slots=5)
    with pytest.raises(ValueError, match="key_slots.*N >= 1"):
        slot_occupancy(torch.zeros(1, 1, 0, dtype=torch.int64))
    with pytest.raises(ValueError, match="key_slots.*finite"):
        slot_occupancy(torch.full((1, 1, 2, 3), float("nan")))
    with pytest.raises(ValueError, match=r"key_slots and query_slots.*\(1, 1, 3\).*\(1, 1, 4\)"):
        slot_agreement(keys, torch.tensor([[[0, 1, 2, 3]]]))
    with pytest.raises(TypeError, match="query_slots"):
        predicted_pairs(keys, None)
    with pytest.raises(ValueError, match="query_slots.*K = 3.*7"):
        predicted_pairs(torch.rand(1, 1, 3, 3), torch.tensor([[[0, 7, 1]]]))
    with pytest.raises(ValueError, match="same K.*3.*4"):
        slot_agreement(torch.rand(1, 1, 3, 3), torch.rand(1, 1, 3, 4))
    with pytest.raises(ValueError, match="retrieved must be at most n_pairs"):
        lost_pair_split(11, n_pairs=10, colliding=0, misrouted=0)
    with pytest.raises(ValueError, match="colliding \\+ misrouted"):
        lost_pair_split(1, n_pairs=10, colliding=6, misrouted=5)
    with pytest.raises(ValueError, match="n_pairs must be > 0"):
        lost_pair_split(0, n_pairs=0, colliding=0, misrouted=0)
    with pytest.raises(ValueError, match="misrouted must be >= 0"):
        lost_pair_split(1, n_pairs=10, colliding=0, misrouted=-1)
    with pytest.raises(TypeError, match="retrieved"):
        lost_pair_split("3", n_pairs=10, colliding=0, misrouted=0)
    with pytest.raises(ValueError, match="broadcast"):
        lost_pair_split(torch.zeros(2), n_pairs=10, colliding=torch.zeros(3), misrouted=0)


# ------------------------------------------------------------------------------------------------ capacity test
def test_the_query_for_each_key_is_routed_as_the_query_token_that_asks_it():
    """The per-token premise of :func:`slot_summary`: the query responsibilities of the S query tokens, read in one
    forward, equal those the query token has at the end of the real sequence for the key it asks."""
    torch.manual_seed(3)
    model = FastWeightModel(5, "gma", d_model=16, n_components=7)
    data = fast_weight_data(9, 5, seed=2)
    (every,) = capture_responsibilities(model.mixer, model.query_tokens(data.keys), side="query").values()
    asked = every[torch.arange(9), 0, data.query]  # (9, K)
    torch.testing.assert_close(asked, routing_sample(model, data)["query"])


def test_slot_summary_against_one_real_sequence_per_asked_key():
    """Agreement and predicted pairs of :func:`slot_summary` equal a count over S full forwards per sequence, one
    asking each stored key in turn (its query slot read from the real query position)."""
    torch.manual_seed(5)
    n_pairs, n_slots = 6, 4  # few slots: collisions happen
    model = FastWeightModel(n_pairs, "gma", d_model=16, n_components=n_slots)
    data = fast_weight_data(10, n_pairs, seed=8)
    sample = routing_sample(model, data)
    summary = slot_summary(model, data, sample, accuracy=0.5)
    key_slots = sample["key"].argmax(-1).reshape(10, n_pairs).tolist()
    repeated = FastWeightBatch(data.keys.repeat_interleave(n_pairs, 0), data.values.repeat_interleave(n_pairs, 0),
                               torch.arange(n_pairs).repeat(10))  # sequence b asked key j at row b * S + j
    query_slots = routing_sample(model, repeated)["query"].argmax(-1).reshape(10, n_pairs).tolist()
    counts = [_brute_force(k, q) for k, q in zip(key_slots, query_slots)]
    assert summary["sequences"] == 10
    for name in ("agreement", "predicted", "misrouted", "colliding", "solitary", "occupied"):
        recorded = summary["predicted_pairs" if name == "predicted" else name]
        assert recorded == pytest.approx(sum(c[name] for c in counts) / 10)
    split = summary["split"]
    assert summary["retrieved"] == pytest.approx(3.0) and split["lost"] == pytest.approx(3.0)
    assert split["collisions"] + split["misrouted"] + split["blur"] == pytest.approx(3.0)
    assert split["blur"] == pytest.approx(summary["predicted_pairs"] - 3.0)
    with pytest.raises(ValueError, match="accuracy"):
        slot_summary(model, data, sample, accuracy=1.5)
    with pytest.raises(ValueError, match="sample"):
        slot_summary(model, data.rows(0, 4), sample, accuracy=0.5)
    other = {"key": sample["key"], "query": sample["query"].roll(1, dims=-1)}  # not how the asked queries route
    with pytest.raises(RuntimeError, match="query routing"):
        slot_summary(model, data, other, accuracy=0.5)


def test_a_gma_capacity_run_records_its_slots_at_every_size_and_another_mixer_none(tmp_path):
    study = designs.CAPACITY_STUDY.with_changes(
        seeds=(0,), setting={"n_pairs": (4, 6), "d_model": 16, "max_steps": 2, "eval_every": 2, "n_eval": 8,
                             "n_test": 8})
    gma = run_arm(study, "gma_k64_remedy", folder=tmp_path, command="test")["runs"][0]
    assert set(gma["slots"]) == set(gma["routing"]) == {"4", "6"}
    for size in (4, 6):
        slots = gma["slots"][str(size)]
        assert slots["sequences"] == 8 and slots["n_slots"] == 64
        assert slots["solitary"] + slots["colliding"] == pytest.approx(size)
        assert slots["predicted_pairs"] + slots["misrouted"] + slots["colliding"] == pytest.approx(size)
        assert 0.0 <= slots["agreement"] <= 1.0 and 0.0 <= slots["solitary_share"] <= 1.0
        assert 1.0 <= slots["occupied"] <= size
        assert slots["retrieved"] == pytest.approx(gma["retrieval_accuracy"][str(size)] * size)
        split = slots["split"]
        assert split["lost"] == pytest.approx(size - slots["retrieved"])
        assert split["collisions"] + split["misrouted"] + split["blur"] == pytest.approx(split["lost"])
    assert "slots" not in run_arm(study, "linear", folder=tmp_path, command="test")["runs"][0]
