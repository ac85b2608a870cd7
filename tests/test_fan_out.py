"""A study fans out on Dask's local mode (``python -m gma_teach.study <study> --executor dask``,
``gma_teach.runs.fan_out``): two single-threaded workers give the records a serial run gives, number for number
except the costs, and an interrupted study resumes with only its missing runs."""
import json

import pytest

from gma_teach import designs, records, study
from gma_teach.designs import Arm
from gma_teach.runs import fan_out, study_cli

pytest.importorskip("distributed")

TINY = designs.Study("tiny_fan", "text", "tiny", {"epochs": 1, "n_train": 64, "n_test": 32}, (0, 1),
                     {"linear": Arm("linear"), "none": Arm("none")})
COSTS = {"wall_seconds", "cpu_seconds", "train_seconds", "provenance", "tokens_per_second", *records.PROVENANCE_KEYS}


@pytest.fixture(autouse=True)
def _tiny(monkeypatch, tmp_path, one_torch_thread):  # one thread, as every task runs (--threads 1)
    monkeypatch.setenv("GMA_TEACH_SCALE", "tiny")
    monkeypatch.setenv("GMA_TEACH_CACHE", str(tmp_path / "cache"))


def _numbers(value):
    """A record without its costs and origin, at every depth."""
    if isinstance(value, dict):
        return {key: _numbers(item) for key, item in value.items() if key not in COSTS}
    if isinstance(value, list):
        return [_numbers(item) for item in value]
    return value


def test_two_local_workers_record_what_a_serial_run_records(tmp_path, monkeypatch, capsys):
    serial, fanned = tmp_path / "serial", tmp_path / "fanned"
    for arm in TINY.arms:
        study.run_arm(TINY, arm, folder=serial, command="serial")
    study.run_arm(TINY, "linear", seeds=(0,), folder=fanned, command="serial")  # an interrupted study
    monkeypatch.setitem(study_cli.STUDIES, "tiny_fan", TINY)
    results = study_cli.main(["tiny_fan", "--executor", "dask", "--workers", "2", "--out-dir", str(fanned)])
    assert sorted((r["arm"], r["seed"]) for r in results) == [("linear", 1), ("none", 0), ("none", 1)]
    shown = capsys.readouterr()
    assert "3 done, 0 left" in shown.out + shown.err
    for arm in TINY.arms:
        one, other = study.load_arm(TINY, arm, serial), study.load_arm(TINY, arm, fanned)
        assert _numbers(json.loads(json.dumps(one))) == _numbers(json.loads(json.dumps(other)))
        assert [run["seed"] for run in other["runs"]] == [0, 1] and other["complete"] is True
    again = fan_out.submit_study(TINY, folder=fanned, command="again", workers=2)
    assert again == []  # nothing is left to run


def test_bad_worker_counts_are_refused():
    with pytest.raises(ValueError, match="workers must be a positive int, got 0"):
        fan_out.submit_study(TINY, command="x", workers=0)
    with pytest.raises(ValueError, match="threads must be a positive int"):
        fan_out.submit_study(TINY, command="x", threads=True)



def test_a_swept_study_sends_its_later_seeds_once_the_sweep_is_recorded(tmp_path):
    recall = designs.RECALL_STUDY.with_changes(
        name="tiny_recall", setting=dict(seq_len=16, vocab_size=32, kv_pairs=(2, 3), n_train=32, n_val=8, n_test=8,
                                         steps=2, warmup=1, batch_size=8),
        widths=(16,), learning_rates=(1e-2, 3e-3), seeds=(0, 1), arms={"linear": designs.RECALL_STUDY.arms["linear"]},
        primary=(), reruns=None, exploratory=None, chapter=None, what=None)
    assert study.planned_runs(recall, "linear", width=16, folder=tmp_path) == [(0, 1e-2), (0, 3e-3)]
    results = fan_out.submit_study(recall, folder=tmp_path / "fanned", command="fanned", workers=2)
    assert [(r["seed"], r["lr"]) for r in results][-1] == (1, None)  # after both rates of the sweep
    serial = study.run_arm(recall, "linear", width=16, folder=tmp_path / "serial", command="serial")
    fanned = study.load_arm(recall, "linear", tmp_path / "fanned", width=16)
    assert fanned["chosen_lr"] == serial["chosen_lr"] and len(fanned["runs"]) == 3
    assert _numbers(json.loads(json.dumps(serial))) == _numbers(fanned)
