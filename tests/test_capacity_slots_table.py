"""The slots, stopping and primary family of a capacity-form study (``gma_teach.capacity``, module
``_slots_table``), read from small hand-made records written to ``tmp_path`` through the run store. Every expected
number is derived by hand in the comments beside it."""
import math

import pytest

from gma_teach import capacity, designs, study
from gma_teach.designs import Arm, Study
from gma_teach.records import write_run

TOY = Study(
    name="toy",
    experiment="capacity",
    scale=None,
    setting={**designs.CAPACITY_STUDY.setting, "n_pairs": (40, 64), "max_steps": 300},
    seeds=(0, 1, 2),
    arms={"linear": Arm("linear"),
          "gma_k64_tied": Arm("gma", {"n_components": 64, "tied_routing": True}),
          "gma_k64": Arm("gma", {"n_components": 64})},
    metrics=("retrieval_accuracy_s40", "retrieval_accuracy_s64"),
    primary=[("gma_k64_tied", "linear")],
    test="paired t over seeds 0-2 at S = 40 and 64; Holm over the family (2 tests)",
    exploratory={"seeds": (0,), "arms": ("gma_k64",), "why": "a control", "pairs": "none"},
)

FALLING = [0.5, 0.45, 0.40]  # three evaluations: the last below the one two before, so still improving
FLAT = [0.2, 0.3, 0.25]  # the last (0.25) above the one two before (0.2): no longer improving


def split(retrieved, n_pairs, collisions, misrouted):
    """A run's ``split`` as ``slot_summary`` records it: lost = n - retrieved, blur = lost - collisions -
    misrouted, beyond_slots = -blur where blur < 0."""
    lost = n_pairs - retrieved
    blur = lost - collisions - misrouted
    return {"n_pairs": n_pairs, "lost": lost, "collisions": collisions, "misrouted": misrouted, "blur": blur,
            "beyond_slots": max(0.0, -blur)}


def make_run(seed, accuracy, *, stopped=None, steps=None, curves=None, slots=None):
    sizes = [str(n) for n in accuracy]
    stopped = {n: "max_steps" for n in sizes} | {str(k): v for k, v in (stopped or {}).items()}
    steps = {n: 300 if stopped[n] == "max_steps" else 200 for n in sizes} | {str(k): v for k, v in
                                                                            (steps or {}).items()}
    curves = {n: {"steps": [100, 200, 300], "loss": FALLING, "accuracy": [0.1, 0.2, 0.3]} for n in sizes} | {
        str(k): {"steps": [100, 200, 300], "loss": v, "accuracy": [0.1, 0.2, 0.3]} for k, v in (curves or {}).items()}
    run = {"seed": seed, "lr": 1e-3, "n_pairs": [int(n) for n in sizes],
           "loss": {n: 0.1 for n in sizes}, "retrieval_accuracy": {str(k): v for k, v in accuracy.items()},
           "steps": steps, "stopped": stopped, "state_bytes": {n: 16_640 for n in sizes},
           "parameters": {n: 1 for n in sizes}, "curves": curves, "train_seconds": {n: 1.0 for n in sizes}}
    if slots is not None:
        run["slots"] = {str(k): v for k, v in slots.items()}
    return run


def store(folder, arm, runs):
    """Write each run to the run store of ``arm``'s record, as the runner does."""
    path = study.record_path(TOY, arm, folder)
    for run in runs:
        write_run(path, f"seed-{run['seed']}", {"study": TOY.name, "arm": arm, "run": run})


def slot_entry(retrieved, n_pairs, collisions, misrouted, *, solitary, agreement, predicted):
    return {"solitary": solitary, "agreement": agreement, "predicted_pairs": predicted, "retrieved": retrieved,
            "split": split(retrieved, n_pairs, collisions, misrouted)}


# The tied arm (GMA) at seeds 0-2; its slots at S = 40 for every seed, at S = 64 for seeds 0 and 1 only.
TIED_ACCURACY = {0: {40: 0.5, 64: 0.6}, 1: {40: 0.6, 64: 0.7}, 2: {40: 0.7, 64: 0.8}}
LINEAR_ACCURACY = {40: 0.4, 64: 0.3}  # the same at every seed
TIED_SLOTS = {
    0: {40: slot_entry(30.0, 40, 6.0, 3.0, solitary=34.0, agreement=0.9, predicted=31.0),  # blur 1
        64: slot_entry(40.0, 64, 20.0, 8.0, solitary=44.0, agreement=0.8, predicted=36.0)},  # blur -4
    1: {40: slot_entry(20.0, 40, 12.0, 6.0, solitary=28.0, agreement=0.7, predicted=22.0),  # blur 2
        64: slot_entry(32.0, 64, 24.0, 4.0, solitary=40.0, agreement=0.9, predicted=36.0)},  # blur 4
    2: {40: slot_entry(28.0, 40, 3.0, 6.0, solitary=37.0, agreement=0.8, predicted=31.0)},  # blur 3
}


def full_records(folder):
    """Every declared run: the primary pair at seeds 0-2, the exploratory gma_k64 at seed 0 (no slots: recorded
    before they were), and a linear run at seed 5, outside the declared seeds."""
    store(folder, "gma_k64_tied", [
        make_run(0, TIED_ACCURACY[0], slots=TIED_SLOTS[0]),
        make_run(1, TIED_ACCURACY[1], slots=TIED_SLOTS[1], curves={40: FLAT}),
        make_run(2, TIED_ACCURACY[2], slots=TIED_SLOTS[2], stopped={64: "target"}, steps={64: 200})])
    store(folder, "linear", [make_run(seed, LINEAR_ACCURACY, **({"stopped": {40: "plateau"}, "steps": {40: 100}}
                                                              if seed == 0 else {}))
                             for seed in (0, 1, 2, 5)])
    store(folder, "gma_k64", [make_run(0, {40: 0.2, 64: 0.1})])
    return {arm: study.load_arm(TOY, arm, folder) for arm in TOY.arms}


def test_family_sizes_reads_the_declared_metrics():
    assert capacity.family_sizes(TOY) == (40, 64)
    assert capacity.family_sizes(designs.CAPACITY_STUDY) == (80, 120, 160, 200)
    assert capacity.family_sizes(designs.SLOT_ROUTING_STUDY) == (40, 64, 80, 120)
    with pytest.raises(ValueError, match="capacity-form"):
        capacity.family_sizes(designs.LM_STUDY)
    with pytest.raises(TypeError, match="Study"):
        capacity.family_sizes({"name": "toy"})


def test_lost_pair_table_means_over_the_seeds_that_recorded_slots(tmp_path):
    table = capacity.lost_pair_table(TOY, full_records(tmp_path))
    assert list(table["arms"]) == ["gma_k64_tied"]  # linear is not GMA; gma_k64 holds no slots
    assert table["without_slots"] == ["gma_k64"] and table["not_recorded"] == []
    at40, at64 = table["arms"]["gma_k64_tied"][40], table["arms"]["gma_k64_tied"][64]
    # S = 40, seeds 0-2: retrieved (30 + 20 + 28) / 3 = 26, lost 14, collisions (6 + 12 + 3) / 3 = 7,
    # misrouted (3 + 6 + 6) / 3 = 5, blur (1 + 2 + 3) / 3 = 2
    assert at40["seeds"] == [0, 1, 2] and at40["n_seeds"] == 3 and at40["n_pairs"] == 40
    expected40 = {"retrieved": 26.0, "lost": 14.0, "collisions": 7.0, "misrouted": 5.0, "blur": 2.0,
                  "beyond_slots": 0.0, "solitary": 33.0, "agreement": 0.8, "predicted_pairs": 28.0}
    for name, value in expected40.items():
        assert at40[name] == pytest.approx(value), name
    # S = 64, seeds 0 and 1 (seed 2 has no slot record there): retrieved 36, lost 28, collisions 22,
    # misrouted 6, blur (-4 + 4) / 2 = 0, beyond_slots (4 + 0) / 2 = 2
    assert at64["seeds"] == [0, 1] and at64["n_seeds"] == 2
    expected64 = {"retrieved": 36.0, "lost": 28.0, "collisions": 22.0, "misrouted": 6.0, "blur": 0.0,
                  "beyond_slots": 2.0, "agreement": 0.85}
    for name, value in expected64.items():
        assert at64[name] == pytest.approx(value), name
    for entry in (at40, at64):
        assert entry["collisions"] + entry["misrouted"] + entry["blur"] == pytest.approx(entry["lost"])


def test_stopping_table_gives_each_runs_reason_steps_and_whether_it_still_improved(tmp_path):
    table = capacity.stopping_table(TOY, full_records(tmp_path), window=2)
    assert table["max_steps"] == 300 and table["not_recorded"] == []
    runs = {(run["arm"], run["seed"]): run for run in table["runs"]}
    assert list(runs) == [("linear", 0), ("linear", 1), ("linear", 2), ("linear", 5), ("gma_k64_tied", 0),
                          ("gma_k64_tied", 1), ("gma_k64_tied", 2), ("gma_k64", 0)]
    assert runs["linear", 0]["stopped"] == {40: "plateau", 64: "max_steps"}
    assert runs["linear", 0]["steps"] == {40: 100, 64: 300}
    assert runs["linear", 0]["improving"] == {40: None, 64: True}  # only a run at the ceiling is read
    assert runs["gma_k64_tied", 1]["improving"] == {40: False, 64: True}  # FLAT: 0.25 is not below 0.2
    assert runs["gma_k64_tied", 2]["stopped"][64] == "target" and runs["gma_k64_tied", 2]["steps"][64] == 200
    # the default window (5 evaluations) is longer than these 3-evaluation curves: nothing can be told
    default = capacity.stopping_table(TOY, full_records(tmp_path / "again"))
    assert {value for run in default["runs"] for value in run["improving"].values()} == {None}
    lines = capacity.format_stopping(table)
    assert all(len(line) <= 75 for line in lines)
    row = next(line for line in lines if line.startswith("gma_k64_tied 2"))
    assert row.split()[2:] == ["cap", "t200"]
    row = next(line for line in lines if line.startswith("gma_k64_tied 1"))
    assert row.split()[2:] == ["cap-", "cap"]
    assert next(line for line in lines if line.startswith("linear 0")).split()[2:] == ["p100", "cap"]


def test_ceiling_count_counts_the_primary_familys_runs_only(tmp_path):
    count = capacity.ceiling_count(TOY, full_records(tmp_path), window=2)
    # 2 arms x 3 declared seeds x 2 sizes = 12 runs; linear seed 5 and the exploratory gma_k64 are not counted.
    assert count["arms"] == ["gma_k64_tied", "linear"] and count["sizes"] == (40, 64)
    assert count["declared"] == 12 and count["recorded"] == 12 and count["max_steps"] == 300
    # at the ceiling: tied 5 (seed 2 at S = 64 reached the target), linear 5 (seed 0 at S = 40 by the plateau)
    assert count["by_arm"]["gma_k64_tied"] == {"recorded": 6, "at_ceiling": 5, "improving": 4}  # seed 1, S=40 flat
    assert count["by_arm"]["linear"] == {"recorded": 6, "at_ceiling": 5, "improving": 5}
    assert (count["at_ceiling"], count["improving"]) == (10, 9)


def test_primary_family_of_a_complete_study_reads_the_declared_comparisons(tmp_path):
    records = full_records(tmp_path)
    declared = study.declared_comparisons(TOY, tmp_path)
    family = capacity.primary_family(TOY, declared, records)
    assert family["complete"] and family["recorded"] == family["family_size"] == 2
    at40, at64 = family["entries"]
    assert (at40["n_pairs"], at64["n_pairs"]) == (40, 64)
    assert at40["status"] == at64["status"] == "recorded" and at40["missing"] == []
    # S = 40: differences 0.1, 0.2, 0.3: mean 0.2, sd 0.1, se 0.1 / sqrt 3, t = 2 sqrt 3; with 2 degrees of freedom
    # the two-sided p is 1 - t / sqrt(2 + t^2) = 1 - sqrt(12 / 14) = 0.074180; the interval is
    # 0.2 -+ 4.302653 x 0.057735 = [-0.048414, 0.448414].
    assert at40["mean"] == pytest.approx(0.2)
    assert at40["ci95"] == pytest.approx([-0.048414, 0.448414], abs=1e-5)
    assert at40["p"] == pytest.approx(1 - math.sqrt(12 / 14), abs=1e-6)
    # S = 64: differences 0.3, 0.4, 0.5: mean 0.4, t = 4 sqrt 3, p = 1 - sqrt(48 / 50) = 0.020204.
    assert at64["p"] == pytest.approx(1 - math.sqrt(48 / 50), abs=1e-6)
    # Holm over the 2: the smaller p times 2 = 0.040408 (told apart), the larger times 1, 0.074180 (not).
    assert at64["p_holm"] == pytest.approx(2 * (1 - math.sqrt(48 / 50)), abs=1e-6) and at64["told_apart"]
    assert at40["p_holm"] == pytest.approx(1 - math.sqrt(12 / 14), abs=1e-6) and not at40["told_apart"]
    lines = capacity.format_primary_family(family)
    assert all(len(line) <= 75 for line in lines)
    assert "  S=40: +20.0 [-4.8, +44.8], Holm p 0.074, not told apart" in lines
    assert "  S=64: +40.0 [+15.2, +64.8], Holm p 0.04, told apart" in lines
    assert not any("provisional" in line for line in lines)


def test_an_incomplete_study_gives_not_yet_recorded_entries_and_no_verdict(tmp_path):
    # linear at seeds 0 and 1 only; the tied arm complete. declared_comparisons pairs them on seeds 0 and 1 (an
    # interim comparison); the family must not read it as recorded.
    store(tmp_path, "gma_k64_tied", [make_run(s, TIED_ACCURACY[s], slots=TIED_SLOTS[s]) for s in (0, 1, 2)])
    store(tmp_path, "linear", [make_run(s, LINEAR_ACCURACY) for s in (0, 1)])
    records = {arm: study.load_arm(TOY, arm, tmp_path) for arm in TOY.arms}
    declared = study.declared_comparisons(TOY, tmp_path)
    assert [c["seeds"] for c in declared["comparisons"]] == [[0, 1], [0, 1]]  # interim, on two seeds
    family = capacity.primary_family(TOY, declared, records)
    assert not family["complete"] and family["recorded"] == 0
    for entry in family["entries"]:
        assert entry["status"] == capacity.NOT_YET == "not yet recorded"
        assert entry["seeds"] == [0, 1] and entry["missing"] == [2]
        assert "mean" not in entry and "p_holm" not in entry
    lines = capacity.format_primary_family(family)
    assert "Holm p provisional until every comparison is recorded: no verdict yet" in lines
    assert "  S=40: not yet recorded (2 of 3 seeds)" in lines
    assert not any("told apart" in line for line in lines)
    # With one seed in common, declared_comparisons lists nothing; the seeds come from the records.
    folder = tmp_path / "one"
    store(folder, "gma_k64_tied", [make_run(0, TIED_ACCURACY[0])])
    store(folder, "linear", [make_run(s, LINEAR_ACCURACY) for s in (0, 1)])
    records = {arm: study.load_arm(TOY, arm, folder) for arm in TOY.arms}
    declared = study.declared_comparisons(TOY, folder)
    assert declared["comparisons"] == []
    family = capacity.primary_family(TOY, declared, records)
    assert [(e["seeds"], e["missing"]) for e in family["entries"]] == [([0], [1, 2]), ([0], [1, 2])]
    # and without the records, nothing is held
    assert capacity.primary_family(TOY, declared)["entries"][0]["missing"] == [0, 1, 2]
    # the rest of the incomplete study
    progress = capacity.study_progress(TOY, records)
    assert (progress["declared"], progress["recorded"]) == (7, 3)  # 3 + 3 primary, 1 exploratory; 1 + 2 held
    assert progress["by_arm"]["linear"]["missing"] == [2] and progress["by_arm"]["gma_k64"]["recorded"] == []
    table = capacity.lost_pair_table(TOY, records)
    assert table["arms"] == {} and table["without_slots"] == ["gma_k64_tied"]
    assert table["not_recorded"] == ["gma_k64"]
    assert capacity.stopping_table(TOY, records)["not_recorded"] == ["gma_k64"]
    count = capacity.ceiling_count(TOY, records)
    assert (count["declared"], count["recorded"], count["at_ceiling"]) == (12, 6, 6)


def test_study_progress_counts_declared_runs(tmp_path):
    progress = capacity.study_progress(TOY, full_records(tmp_path))
    assert (progress["declared"], progress["recorded"]) == (7, 7)  # linear's seed 5 is not declared
    assert progress["by_arm"]["gma_k64"] == {"declared": [0], "recorded": [0], "missing": []}
    empty = capacity.study_progress(designs.SLOT_ROUTING_STUDY, {})
    assert empty["declared"] == 4 * 12 + 6 and empty["recorded"] == 0  # the study's own declaration


def test_records_must_be_arm_records():
    with pytest.raises(TypeError, match="records"):
        capacity.stopping_table(TOY, [])
    with pytest.raises(ValueError, match="runs"):
        capacity.stopping_table(TOY, {"linear": {"no": "runs"}})
    with pytest.raises(TypeError, match="declared_comparisons"):
        capacity.primary_family(TOY, [], {})


TOY_GOAL = {"share": 0.55, "sizes": (40,), "against": "linear", "margin": 0.05}


def test_slot_goal_says_how_far_each_routing_got_and_what_remains(tmp_path):
    records = full_records(tmp_path)
    declared = study.declared_comparisons(TOY, tmp_path)
    table = capacity.slot_goal(TOY, declared, records, TOY_GOAL)
    assert table["sizes"] == (40, 64) and table["at"] == 40 and list(table["arms"]) == ["gma_k64_tied", "gma_k64"]
    tied = table["arms"]["gma_k64_tied"]
    # accuracy at S = 40: (0.5 + 0.6 + 0.7) / 3 = 0.6 >= 0.55; linear 0.4 on the same seeds; pairs 40 x 0.6 = 24
    assert tied["accuracy"] == pytest.approx({40: 0.6, 64: 0.7}) and tied["against"] == pytest.approx({40: 0.4,
                                                                                                     64: 0.3})
    assert tied["pairs"] == pytest.approx({40: 24.0, 64: 44.8})
    # at S = 40 (the largest S of the goal's sizes): collisions 7, misrouted 5 (the lost-pair table's means)
    assert (tied["collisions"], tied["misrouted"]) == pytest.approx((7.0, 5.0))
    # the intervals' lower ends: -0.048414 at S = 40 (above -0.05) and +0.152 at S = 64: the goal is reached
    assert tied["difference"][40]["ci95"][0] == pytest.approx(-0.048414, abs=1e-5)
    assert tied["status"] == "reached" and tied["short"] == []
    control = table["arms"]["gma_k64"]
    assert control["status"] == "exploratory" and control["accuracy"] == pytest.approx({40: 0.2, 64: 0.1})
    assert control["collisions"] is None and control["misrouted"] is None  # recorded before the slots were
    # a margin of 0.04 is crossed at S = 40, and a share of 0.65 is not met there: each failure is named
    strict = capacity.slot_goal(TOY, declared, records, {**TOY_GOAL, "share": 0.65, "margin": 0.04})
    assert strict["arms"]["gma_k64_tied"]["status"] == "not reached"
    assert strict["arms"]["gma_k64_tied"]["short"] == ["S=40: 24.0 of 40 pairs, short of 65%",
                                                       "S=40: the interval reaches -0.048 below linear"]
    won = capacity.slot_winner(table)
    assert won == {"arm": "gma_k64_tied", "reached": True, "mean_accuracy": pytest.approx({"gma_k64_tied": 0.65}),
                   "complete": True}
    assert capacity.slot_winner(strict)["reached"] is False


def test_slot_goal_names_no_winner_while_a_seed_is_missing(tmp_path):
    store(tmp_path, "gma_k64_tied", [make_run(s, TIED_ACCURACY[s], slots=TIED_SLOTS[s]) for s in (0, 1, 2)])
    store(tmp_path, "linear", [make_run(s, LINEAR_ACCURACY) for s in (0, 1)])
    records = {arm: study.load_arm(TOY, arm, tmp_path) for arm in TOY.arms}
    table = capacity.slot_goal(TOY, study.declared_comparisons(TOY, tmp_path), records, TOY_GOAL)
    tied = table["arms"]["gma_k64_tied"]
    assert tied["status"] == capacity.NOT_YET and tied["difference"] == {}
    assert tied["against"] == pytest.approx({40: 0.4, 64: 0.3})  # linear on the seeds both hold (0 and 1)
    assert table["arms"]["gma_k64"]["accuracy"] == {40: None, 64: None}  # no run yet
    assert capacity.slot_winner(table)["arm"] is None
    with pytest.raises(TypeError, match="declared"):
        capacity.slot_goal(TOY, [], records, TOY_GOAL)
    with pytest.raises(ValueError, match="margin"):
        capacity.slot_goal(TOY, {"comparisons": []}, records, {"share": 0.9, "sizes": (40,), "against": "linear"})


def test_slot_winner_prefers_a_routing_that_reached_the_goal_then_the_highest_mean():
    def entry(status, accuracy):
        return {"status": status, "accuracy": dict(zip((40, 64), accuracy))}

    table = {"sizes": (40, 64), "arms": {"a": entry("not reached", (0.95, 0.95)),  # the best mean, short elsewhere
                                         "b": entry("reached", (0.92, 0.90)),
                                         "c": entry("reached", (0.91, 0.90)),
                                         "x": entry("exploratory", (1.0, 1.0))}}  # never the winner
    assert capacity.slot_winner(table)["arm"] == "b"
    table["arms"]["b"]["status"] = table["arms"]["c"]["status"] = "not reached"
    won = capacity.slot_winner(table)
    assert (won["arm"], won["reached"]) == ("a", False) and set(won["mean_accuracy"]) == {"a", "b", "c"}
    with pytest.raises(TypeError, match="slot_goal"):
        capacity.slot_winner({"entries": []})
    # two studies' tables read together: a routing of the second that reached the goal wins over the first's
    other = {"sizes": (40, 64), "arms": {"d": entry("reached", (0.93, 0.91)), "y": entry("exploratory", (1, 1))}}
    won = capacity.slot_winner(table, other)
    assert (won["arm"], won["reached"]) == ("d", True) and set(won["mean_accuracy"]) == {"a", "b", "c", "d"}
    other["arms"]["d"]["status"] = capacity.NOT_YET
    assert capacity.slot_winner(table, other)["arm"] is None  # no winner while one study is incomplete
    with pytest.raises(ValueError, match="share their family"):
        capacity.slot_winner(table, {**other, "sizes": (40,)})
    with pytest.raises(TypeError, match="at least one"):
        capacity.slot_winner()


def test_format_stopping_keeps_five_digit_steps_apart():
    table = {"max_steps": 20_000, "runs": [
        {"arm": "linear", "seed": 0, "stopped": {40: "target", 120: "plateau"}, "steps": {40: 3300, 120: 12000},
         "improving": {40: None, 120: None}},
        {"arm": "gma_k64_distilled", "seed": 1, "stopped": {40: "plateau", 120: "max_steps"},
         "steps": {40: 15400, 120: 20000}, "improving": {40: None, 120: True}}]}
    lines = capacity.format_stopping(table)
    assert lines[-2].split() == ["linear", "0", "t3300", "p12000"]
    assert lines[-1].split() == ["gma_k64_distilled", "1", "p15400", "cap"]
    assert len({len(line) for line in lines[-3:]}) == 1  # header and rows aligned
