"""The record store loses no run: each finished run is a file of its own, merged when read, and a run is claimed
before it trains (``gma_teach.records``: ``write_run``, ``read_runs``, ``claim_run``; the runner,
``gma_teach.study.run_arm``). Real processes share one folder here, as a study's do."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from gma_teach import designs, records, study
from gma_teach.designs import Arm
from gma_teach.runs.arm_records import read_record

TINY = designs.Study("tiny_text", "text", "tiny", {"epochs": 1, "n_train": 64, "n_test": 32}, (0, 1, 2),
                     {"linear": Arm("linear")})
SLOW = TINY.with_changes(name="slow_text", setting={"epochs": 100})  # long enough to be killed mid-run

RUN_ONE = """
import sys, torch
from gma_teach import designs, study
from gma_teach.designs import Arm
torch.set_num_threads(1)
name, epochs, folder, *seeds = sys.argv[1:]
tiny = designs.Study(name, "text", "tiny", {"epochs": int(epochs), "n_train": 64, "n_test": 32}, (0, 1, 2),
                     {"linear": Arm("linear")})
study.run_arm(tiny, "linear", seeds=[int(s) for s in seeds], folder=folder, command="test")
"""


def _start(design, folder, *seeds):
    env = {**os.environ, "GMA_TEACH_SCALE": "tiny", "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-c", RUN_ONE, design.name, str(design.setting["epochs"]), str(folder),
                             *map(str, seeds)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _finish(process, timeout=300):
    out, _ = process.communicate(timeout=timeout)
    assert process.returncode == 0, out
    return out


def test_two_processes_on_one_arm_keep_both_seeds(tmp_path):
    first, second = _start(TINY, tmp_path, 0), _start(TINY, tmp_path, 1)
    _finish(first), _finish(second)
    record = study.load_arm(TINY, "linear", tmp_path)
    assert [run["seed"] for run in record["runs"]] == [0, 1]
    assert record["summary"]["seeds"] == [0, 1] and record["complete"] is False
    assert sorted(path.name for path in records.run_folder(study.record_path(TINY, "linear", tmp_path)).iterdir()) \
        == ["seed-0.json", "seed-1.json"]


def test_two_processes_given_one_seed_run_it_once(tmp_path):
    first, second = _start(TINY, tmp_path, 2), _start(TINY, tmp_path, 2)
    outputs = [_finish(first), _finish(second)]
    trained = [out for out in outputs if "seed-2.json" in out]
    assert len(trained) == 1, outputs
    other = outputs[1 - outputs.index(trained[0])]
    assert "test accuracy" not in other, other  # the second trained nothing: it was told, or found it recorded
    record = study.load_arm(TINY, "linear", tmp_path)
    assert [run["seed"] for run in record["runs"]] == [2]


def test_a_killed_run_leaves_the_earlier_runs_and_resumes(tmp_path):
    _finish(_start(SLOW, tmp_path, 0))  # seed 0 of the same arm, finished
    path = study.record_path(SLOW, "linear", tmp_path)
    before = study.load_arm(SLOW, "linear", tmp_path)
    process = _start(SLOW, tmp_path, 1)
    claim = records.run_folder(path) / "seed-1.claim"
    deadline = time.monotonic() + 120
    while not claim.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert claim.exists(), "the run never started"
    time.sleep(1.0)  # into its training
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not (records.run_folder(path) / "seed-1.json").exists() and claim.exists()
    after = study.load_arm(SLOW, "linear", tmp_path)
    assert after["runs"] == before["runs"]  # the earlier run is intact, and reads
    assert after["summary"]["seeds"] == [0]
    out = _finish(_start(SLOW, tmp_path, 1))  # the stale claim is taken over
    assert "seed-1.json" in out and not claim.exists()
    assert [run["seed"] for run in study.load_arm(SLOW, "linear", tmp_path)["runs"]] == [0, 1]


def test_a_claim_held_by_a_live_process_is_honoured_and_a_dead_ones_is_taken(tmp_path):
    path = tmp_path / "arm.json"
    assert records.claim_run(path, "seed-0", "mine") is None
    holder = records.claim_run(path, "seed-0", "again")  # this process holds it and is alive
    assert holder["pid"] == os.getpid() and holder["command"] == "mine"
    records.release_run(path, "seed-0")
    assert records.claim_run(path, "seed-0") is None
    records.release_run(path, "seed-0")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    claim = records.run_folder(path) / "seed-1.claim"
    claim.write_text(json.dumps({"host": __import__("socket").gethostname(), "pid": int(dead.stdout),
                                 "date": "then", "command": "killed"}))
    assert records.claim_run(path, "seed-1") is None and json.loads(claim.read_text())["pid"] == os.getpid()
    other_machine = records.run_folder(path) / "seed-2.claim"
    other_machine.write_text(json.dumps({"host": "elsewhere", "pid": 1, "date": "now", "command": "x"}))
    assert records.claim_run(path, "seed-2")["host"] == "elsewhere"


def test_run_files_win_over_the_record_file_and_old_records_read_as_before(tmp_path):
    recorded = study.load_arm(designs.TEXT_STUDY, "linear")
    assert recorded is not None and not records.run_folder(study.record_path(designs.TEXT_STUDY, "linear")).exists()
    assert recorded == json.loads(study.record_path(designs.TEXT_STUDY, "linear").read_text())
    path = tmp_path / "text_standin_linear.json"
    path.write_text(json.dumps(recorded))
    again = json.loads(json.dumps(recorded["runs"][0]))
    again["test"]["accuracy"] = 0.123
    records.write_run(path, "seed-0", {"run": again, "declared_seeds": recorded["summary"]["seeds"]})
    merged = read_record(path)
    assert len(merged["runs"]) == len(recorded["runs"]) and merged["runs"][0]["test"]["accuracy"] == 0.123
    assert merged["summary"]["test_accuracy"]["mean"] != recorded["summary"]["test_accuracy"]["mean"]
    with pytest.raises(ValueError, match="name must be"):
        records.write_run(path, "../elsewhere", {})
