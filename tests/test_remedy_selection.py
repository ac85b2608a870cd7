"""The remedy study's declared rule picks its arm from the declared comparisons, computed, never typed."""
import pytest

import gma_teach
from gma_teach import designs, study
from gma_teach.study import selected_arm


def _comparison(arm, metric, mean, told_apart):
    return {"arm": arm, "against": "default", "metric": metric, "mean": mean, "told_apart": told_apart}


def _declared(rows):
    comparisons = [_comparison(arm, metric, mean, told) for arm, metric, mean, told in rows]
    return {"comparisons": comparisons, "family_size": 10}


STUDY = designs.REMEDY_STUDY
INFO, BPB = "routing_information", "val_bits_per_byte"


def test_the_arm_with_most_information_among_those_that_pass_the_guard():
    rows = [("balance", INFO, 2.0, True), ("balance", BPB, 0.01, False),
            ("variance", INFO, -0.5, True), ("variance", BPB, -0.04, True),
            ("variance_and_balance", INFO, -1.0, True), ("variance_and_balance", BPB, -0.02, False),
            ("information", INFO, 3.0, True), ("information", BPB, 0.08, True),
            ("variance_and_information", INFO, 2.5, True), ("variance_and_information", BPB, -0.01, False)]
    means = {"default": 2.0, "balance": 4.0, "variance": 1.5, "variance_and_balance": 1.0, "information": 5.0,
             "variance_and_information": 4.5}
    picked = selected_arm(STUDY, _declared(rows), means)
    assert picked["arm"] == "variance_and_information" and picked["complete"]
    assert picked["qualified"] == ["variance_and_information", "balance"]
    assert "worse" in picked["failed"]["information"]  # most information, but told apart worse on bits per byte
    assert "not told apart better" in picked["failed"]["variance"]  # less information than the default
    assert "not told apart better" in picked["failed"]["variance_and_balance"]


def test_no_arm_qualifies_and_the_default_stays():
    rows = [(arm, INFO, 0.1, False) for arm, _ in STUDY.primary] + [(arm, BPB, 0.0, False) for arm, _ in
                                                                    STUDY.primary]
    picked = selected_arm(STUDY, _declared(rows), {arm: 1.0 for arm in STUDY.arms})
    assert picked["arm"] == "default" and picked["qualified"] == []
    partial = selected_arm(STUDY, {"comparisons": [], "family_size": 10}, {})
    assert partial["arm"] == "default" and not partial["complete"]
    assert set(partial["failed"].values()) == {"not recorded"}


def test_a_family_short_of_a_declared_seed_is_not_complete():
    rows = [(arm, metric, 0.1, False) for arm, _ in STUDY.primary for metric in (INFO, BPB)]
    declared = {**_declared(rows), "seeds": [0, 1, 2]}
    for comparison in declared["comparisons"]:
        comparison["seeds"] = [0, 1, 2]
    assert selected_arm(STUDY, declared, {arm: 1.0 for arm in STUDY.arms})["complete"]
    declared["comparisons"][-1]["seeds"] = [0, 1]  # one comparison read over two of the three seeds
    assert not selected_arm(STUDY, declared, {arm: 1.0 for arm in STUDY.arms})["complete"]


def test_a_study_without_a_rule_is_refused():
    with pytest.raises(ValueError, match="selection"):
        selected_arm(designs.LM_STUDY, {"comparisons": [], "family_size": 0}, {})


def test_lm_routing_remedy_is_what_the_recorded_studies_pick():
    """Once every declared comparison is recorded: on its own arms the remedy study's rule picks the balance loss
    (``designs.BALANCE_REMEDY``); the slot memory's follow-on meets the conditions for reading the rule again with it
    as one more arm, and ``LM_ROUTING_REMEDY`` holds the routing options of the arm it then picks."""
    on_its_own = study.study_selection(designs.REMEDY_STUDY)
    follow, arm = designs.SLOT_FOLLOW_ONS["lm"], designs.SLOT_MEMORY_ARM
    choice = study.follow_on_choice(designs.REMEDY_STUDY, follow, arm, cost_against="balance")
    if not (on_its_own["complete"] and choice["complete"]):
        pytest.skip("the remedy study or its slot-memory follow-on is not recorded in full")
    balance = dict(designs.REMEDY_STUDY.arms[on_its_own["arm"]].options)
    balance.pop("n_components")
    assert balance == designs.BALANCE_REMEDY
    assert choice["carries"] and choice["not_worse"] and choice["selection"]["complete"]
    picked = choice["selection"]["arm"]
    options = dict((follow if picked == arm else designs.REMEDY_STUDY).arms[picked].options)
    options.pop("n_components")
    assert gma_teach.LM_ROUTING_REMEDY == options == designs.REMEDY == gma_teach.SLOT_MEMORY_ROUTING


def test_the_rule_read_again_with_one_more_arm_from_a_follow_on(tmp_path):
    """``extra=(follow_on, arm)`` reads the arm from the follow-on's own record, widens the family by its two
    comparisons with the default (Holm over 12), and judges it by the same rule: a copy of a recorded remedy's runs
    in its place passes or fails as that remedy does."""
    import shutil

    follow, arm = designs.SLOT_FOLLOW_ONS["lm"], designs.SLOT_MEMORY_ARM
    for name in STUDY.arms:
        shutil.copy(study.record_path(STUDY, name), tmp_path)
    base = study.study_selection(STUDY, tmp_path)
    missing = study.study_selection(STUDY, tmp_path, extra=(follow, arm))
    assert base["declared"]["family_size"] == 10 and missing["declared"]["family_size"] == 12
    assert missing["failed"][arm] == "not recorded" and not missing["complete"]
    for source in ("balance", "information", "variance"):
        shutil.copy(study.record_path(STUDY, source), study.record_path(follow, arm, tmp_path))
        picked = study.study_selection(STUDY, tmp_path, extra=(follow, arm))
        assert picked["complete"] and picked["means"][arm] == base["means"][source]
        if source in base["qualified"]:
            assert arm in picked["qualified"]
        else:
            assert picked["failed"][arm] == base["failed"][source]
    with pytest.raises(ValueError, match="setting and seeds"):
        study.study_selection(STUDY, tmp_path, extra=(designs.SLOT_FOLLOW_ONS["recall"], arm))
    with pytest.raises(ValueError, match="extra's arm"):
        study.study_selection(STUDY, tmp_path, extra=(follow, "balance"))


def test_a_follow_on_arm_enters_the_rule_only_when_it_carries_information_at_no_told_apart_cost(tmp_path):
    """:func:`study.follow_on_choice` waits for the follow-on's whole family, then asks for information told apart
    above the default's and bits per byte not told apart worse than the balance remedy's, and only then reads the
    remedy rule again with the arm: a copy of the balance remedy's runs passes, the information loss's (told apart
    worse on bits per byte) does not, and the default's own runs carry no information beyond the default's."""
    import shutil

    follow, arm = designs.SLOT_FOLLOW_ONS["lm"], designs.SLOT_MEMORY_ARM
    for name in STUDY.arms:
        shutil.copy(study.record_path(STUDY, name), tmp_path)
    assert study.follow_on_choice(STUDY, follow, arm, cost_against="balance", folder=tmp_path) == {"complete": False}
    outcomes = {}
    for source in ("balance", "information", "default"):
        shutil.copy(study.record_path(STUDY, source), study.record_path(follow, arm, tmp_path))
        outcomes[source] = study.follow_on_choice(STUDY, follow, arm, cost_against="balance", folder=tmp_path)
    assert outcomes["balance"]["carries"] and outcomes["balance"]["not_worse"]
    assert outcomes["balance"]["cost"]["mean"] == 0 and outcomes["balance"]["selection"]["complete"]
    assert arm in outcomes["balance"]["selection"]["qualified"]
    assert outcomes["information"]["carries"] and not outcomes["information"]["not_worse"]
    assert outcomes["information"]["selection"] is None
    assert not outcomes["default"]["carries"] and outcomes["default"]["selection"] is None
