"""Statements of the book's pages that rest on a record or on a formula, checked against them.

Chapter 10 prints the pairs of LM-study arms that change places between the last two evaluations, naming the two
steps from one record: every record must have the same last two evaluation steps, and the pairs must be those that
the two orders put differently. Chapter 10 also says where a KV cache becomes larger than GMA's fixed state (equal
at ``t* = K/2 (1 + H / d_model)``, larger from the next token); that is checked on the study's own model sizes.
"""
import itertools
from types import SimpleNamespace

import pytest

from gma_teach import designs, experiments, study


def _lm_records():
    records = [study.load_arm(designs.LM_STUDY, arm) for arm in designs.LM_STUDY["arms"]]
    return [record for record in records if record is not None]


def test_every_lm_record_shares_the_last_two_evaluation_steps():
    records = _lm_records()
    if not records:
        pytest.skip("no LM study record")
    last_two = {tuple(run["history"]["steps"][-2:]) for record in records for run in record["runs"]}
    assert len(last_two) == 1, f"the records evaluate at different steps: {sorted(last_two)}"
    (before, last), = last_two
    assert last == records[0]["config"]["n_steps"] and before < last


def test_the_pairs_that_change_places_are_those_the_two_orders_disagree_on():
    ordering = study.study_table(designs.LM_STUDY).get("ordering", {})
    if not ordering.get("seeds"):
        pytest.skip("no LM study ordering")
    last, previous = ordering["last"], ordering["previous"]
    disagree = [[a, b] for a, b in itertools.combinations(last, 2) if previous.index(a) > previous.index(b)]
    assert ordering["swapped"] == disagree
    assert ordering["stable"] is (not disagree)
    assert all(pair in ordering["swapped"] for pair in ordering["told_apart_swapped"])


def test_the_validation_text_is_one_for_every_arm():
    """Chapter 10's bytes a token is read from one record; every arm must have been scored on the same text."""
    counts = {(run["validation_tokens"], run["validation_bytes"]) for record in _lm_records() for run in record["runs"]}
    if not counts:
        pytest.skip("no LM study record")
    assert len(counts) == 1


@pytest.mark.parametrize("n_components, d_model, n_heads", [(64, 128, 4), (32, 32, 2)])
def test_the_kv_cache_equals_gma_state_at_the_formula_and_is_larger_from_the_next_token(n_components, d_model,
                                                                                       n_heads):
    crossing = n_components / 2 * (1 + n_heads / d_model)
    assert crossing == int(crossing), "choose sizes where the crossing is a whole token"
    sizes = SimpleNamespace(**{**designs.LM_SETTING, "d_model": d_model, "n_heads": n_heads, "d_ff": 2 * d_model,
                               "n_components": n_components, "seq_len": int(crossing) + 4})
    steps = int(crossing) + 3
    gma_bytes = experiments.decoding_state_bytes(experiments.build_lm(sizes, "gma", 50), steps)
    cache_bytes = experiments.decoding_state_bytes(experiments.build_lm(sizes, "sdpa", 50), steps)
    equal = [t + 1 for t, (g, c) in enumerate(zip(gma_bytes, cache_bytes)) if c == g]
    larger = next(t + 1 for t, (g, c) in enumerate(zip(gma_bytes, cache_bytes)) if c > g)
    assert equal == [int(crossing)] and larger == int(crossing) + 1
    assert len(set(gma_bytes)) == 1  # GMA's state does not grow
