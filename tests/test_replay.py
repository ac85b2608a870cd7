"""Records reproduce: a first seed of every kind of run, re-run from the command its record stores at the record's
own commit (``reproduce(..., at_commit=True)``), lands within ``REPLAY_TOLERANCE`` of its record.

The replays are opt-in (``GMA_TEACH_REPLAY=1 pytest tests/test_replay.py``): together they train for about 20
CPU-minutes, beyond CI's budget. What CI checks without them: every kind has a replayed record, each made from
committed code (so its commit can be checked out), and the numbers a replay compares for each kind.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gma_teach import designs
from gma_teach.runs import reproduce as reproducing

RESULTS = Path(__file__).resolve().parents[1] / "book" / "results"

REPLAYED = {"lm": "routing_remedy_default.json", "listops": "listops_lra_linear.json",
            "text": "text_standin_linear.json", "recall": "recall_study_linear_d64.json",
            "capacity": "capacity_sdpa.json"}
"""The record replayed for each kind of run: the first seed of its cheapest study record (the recall one is the
record a new user found 0.036 away at a later commit)."""


def test_every_kind_of_run_has_a_replayed_record_made_from_committed_code():
    assert set(REPLAYED) == set(designs.EXPERIMENTS) == set(reproducing.REPLAY_TOLERANCE)
    for kind, name in REPLAYED.items():
        record = json.loads((RESULTS / name).read_text())
        first = record["runs"][0]
        commit = first.get("provenance", record)["commit"]
        assert len(commit) == 40 and "+" not in commit, (name, commit)
        assert 0 <= reproducing.headline_number(first, kind) <= (8 if kind == "lm" else 1)


def test_a_capacity_run_is_compared_at_every_size_and_on_its_mean():
    recorded = {"seed": 0, "retrieval_accuracy": {"20": 1.0, "40": 0.5}, "loss": {"20": 0.001, "40": 0.2},
                "train_seconds": {"20": 3.0, "40": 4.0}}
    again = {**recorded, "retrieval_accuracy": {"20": 1.0, "40": 0.75}, "train_seconds": {"20": 1.0, "40": 1.0}}
    rows = {row["name"]: row for row in reproducing.compare_seed(recorded, again)}
    assert set(rows) == {"mean retrieval_accuracy", "retrieval_accuracy S=20", "retrieval_accuracy S=40",
                         "loss S=20", "loss S=40"}  # times are not compared
    assert rows["retrieval_accuracy S=40"]["difference"] == 0.25
    assert rows["mean retrieval_accuracy"]["difference"] == pytest.approx(0.125)
    assert reproducing.headline_number(again, "capacity") == 0.875
    with pytest.raises(ValueError, match="headline number of a 'recall' run"):
        reproducing.headline_number(again, "recall")


def test_a_record_of_uncommitted_code_is_not_replayed_at_its_commit(tmp_path):
    record = json.loads((RESULTS / REPLAYED["text"]).read_text())
    record["runs"][0]["provenance"]["commit"] += "+dirty"
    path = tmp_path / REPLAYED["text"]
    path.write_text(json.dumps(record))
    with pytest.raises(ValueError, match="dirty"):
        reproducing.reproduce(path, out_dir=tmp_path / "again", at_commit=True)


@pytest.mark.replay
@pytest.mark.skipif(os.environ.get("GMA_TEACH_REPLAY") != "1", reason="opt-in: GMA_TEACH_REPLAY=1")
@pytest.mark.parametrize("kind", sorted(REPLAYED))
def test_a_first_seed_replays_at_its_commit_within_the_stated_tolerance(kind, tmp_path):
    result = reproducing.reproduce(RESULTS / REPLAYED[kind], out_dir=tmp_path, at_commit=True)
    head = result["headline"]
    assert head["kind"] == kind and result["ran_at"] == result["recorded_commit"]
    assert abs(head["difference"]) <= head["tolerance"], head
