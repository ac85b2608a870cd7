"""The recall study's records read as every study's are: found by the one lookup (``load_arm``), their spec and
setting read by the one reader of both record forms, and the recorded table unchanged by that."""
from __future__ import annotations

import json
import shutil

import pytest

from gma_teach import study as studies
from gma_teach.designs import RECALL_STUDY, thawed
from gma_teach.records import results_folder
from gma_teach.runs.arm_records import load_arm, record_path, record_setting, record_spec

RECORDED = results_folder()


def _raw(arm: str, width: int) -> dict | None:
    """The recorded file of ``arm`` at ``width``, read as plain JSON (not through the package's lookup)."""
    path = RECORDED / f"{RECALL_STUDY['name']}_study_{arm}_d{width}.json"
    return json.loads(path.read_text()) if path.exists() else None


def test_the_table_reads_the_declared_arms_records_and_nothing_else(tmp_path):
    declared = record_path(RECALL_STUDY, "linear", RECORDED, width=64)
    shutil.copy(declared, tmp_path / declared.name)
    for stray in ("recall_study_bogus_d64.json", "recall_study_linear_d32.json"):  # no such arm, no such width
        shutil.copy(declared, tmp_path / stray)
    table = studies.recall_table(tmp_path)
    assert list(table["arms"]) == ["linear"] and list(table["arms"]["linear"]) == [64]
    record = load_arm(RECALL_STUDY, "linear", tmp_path, width=64)
    assert table["arms"]["linear"][64]["lr"] == studies.chosen_lr(record) == record["chosen_lr"]


def test_an_arm_without_a_record_at_a_width_is_left_out(tmp_path):
    assert studies.recall_table(tmp_path)["arms"] == {}


def test_both_record_forms_give_the_same_spec_and_their_own_setting():
    recall_record = load_arm(RECALL_STUDY, "linear", RECORDED, width=64)
    spec = RECALL_STUDY.arms["linear"]
    config = {**thawed(RECALL_STUDY.setting), "d_model": 64, "lr": 1e-3}
    ordinary_record = {"study": "some_study", "arm": "linear", "spec": spec.as_dict(), "config": config, "runs": []}
    assert record_spec(recall_record) == record_spec(ordinary_record) == spec
    assert record_setting(ordinary_record) == config
    setting = record_setting(recall_record)
    assert "arm" not in setting and setting["lr_seed"] == RECALL_STUDY.seeds[0]
    assert setting["learning_rates"] == list(RECALL_STUDY.learning_rates)
    assert {key: setting[key] for key in RECALL_STUDY.setting} == json.loads(json.dumps(thawed(RECALL_STUDY.setting)))


def test_a_record_without_a_spec_has_none_and_a_non_record_is_refused():
    bare = {"arm": "linear", "runs": []}
    assert record_spec(bare) is None and record_setting(bare) is None
    with pytest.raises(TypeError, match="record"):
        record_spec(["linear"])
    with pytest.raises(TypeError, match="record"):
        record_setting("linear")


def test_every_recorded_recall_arm_reads_as_its_declared_spec():
    found = 0
    for arm, spec in RECALL_STUDY.arms.items():
        for width in RECALL_STUDY.widths:
            record = load_arm(RECALL_STUDY, arm, RECORDED, width=width)
            if record is not None:
                found += 1
                assert record_spec(record) == spec, (arm, width)
    assert found > 0


def test_the_recorded_table_keeps_each_arms_best_rate_on_the_first_seed():
    table = studies.recall_table()
    expected = {}
    for arm in RECALL_STUDY.arms:
        for width in RECALL_STUDY.widths:
            raw = _raw(arm, width)
            if raw is None:
                continue
            sweep = [r for r in raw["runs"] if r["seed"] == RECALL_STUDY.seeds[0]]
            if {r["lr"] for r in sweep} != set(RECALL_STUDY.learning_rates):
                continue
            best = max(sweep, key=lambda r: r["val_mean"])["lr"]
            kept = sorted((r for r in raw["runs"] if r["lr"] == best), key=lambda r: r["seed"])
            expected[arm, width] = (best, [r["seed"] for r in kept], [r["test_mean"] for r in kept])
    found = {(arm, width): (entry["lr"], entry["seeds"], entry["test_mean"])
             for arm, by_width in table["arms"].items() for width, entry in by_width.items()}
    assert expected and found == expected
