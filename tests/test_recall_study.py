"""The recall study's runner on a tiny design: its record, the learning-rate rule, resuming and the state bytes."""
from __future__ import annotations

import json

import pytest
import torch

from gma_teach import study as studies
from gma_teach.designs import RECALL_STUDY
from gma_teach.runs import recall
from gma_teach.tasks import IGNORE_INDEX


def tiny_study(**setting):
    """The recall study's design at a few steps of a 16-token task (``setting``: sizes to change)."""
    sizes = dict(seq_len=16, vocab_size=32, kv_pairs=(2, 3), n_train=64, n_val=16, n_test=16, steps=3, warmup=1,
                 batch_size=8)
    return RECALL_STUDY.with_changes(setting={**sizes, **setting}, learning_rates=(1e-3, 3e-3), seeds=(0, 1),
                                     widths=(16,))


def test_the_splits_come_from_different_seeds_and_mix_the_kv_counts_equally():
    study = tiny_study()
    train, val = recall.split(study, "train"), recall.split(study, "val")
    assert train.inputs.shape == (64, 16) and val.inputs.shape == (16, 16)
    assert not torch.equal(train.inputs[:16], val.inputs)
    queries = (train.labels != IGNORE_INDEX).sum(1)
    assert queries.tolist().count(2) == queries.tolist().count(3) == 32
    with pytest.raises(ValueError, match="name"):
        recall.split(study, "dev")


def test_the_model_is_a_two_layer_causal_decoder_scored_at_the_queries_only():
    study = tiny_study()
    model = recall.build_model(study, "sdpa", 16)
    assert len(model.blocks) == 2 and all(block.mixer.causal and block.ffn is None for block in model.blocks)
    assert [type(block.mixer).__name__ for block in model.blocks] == ["ShortConvolution", "SDPAttention"]
    data = recall.split(study, "val")
    where = data.labels != IGNORE_INDEX
    logits = model.logits_at(data.inputs, where)
    assert logits.shape == (int(where.sum()), 32)
    assert torch.allclose(logits, model(data.inputs)[where], atol=1e-5)
    with pytest.raises(ValueError, match="arm must be one of"):
        recall.build_model(study, "flash", 16)


def test_state_bytes_grow_with_the_sequence_for_attention_and_not_for_gma():
    study = tiny_study()
    sdpa, gma = recall.build_model(study, "sdpa", 16), recall.build_model(study, "gma_k8", 16)
    # The convolution keeps its last 2 inputs (2 x 16 float32); a KV cache holds a key and a value (2 x 16
    # float32) per token; GMA holds K (d_v + 1) whatever the length.
    conv = 2 * 16 * 4
    assert recall.state_bytes(sdpa, 10) == conv + 10 * 2 * 16 * 4
    assert recall.state_bytes(sdpa, 12) > recall.state_bytes(sdpa, 10)
    assert recall.state_bytes(gma, 10) == recall.state_bytes(gma, 12) == conv + 8 * (16 + 1) * 4


@pytest.mark.slow
def test_an_arm_sweeps_the_rates_on_seed_0_then_trains_the_other_seeds_at_the_kept_rate(tmp_path):
    study = tiny_study()
    record = studies.run_arm(study, "linear", width=16, folder=tmp_path, command="test")
    runs = record["runs"]
    assert [(r["seed"], r["lr"]) for r in runs[:2]] == [(0, 1e-3), (0, 3e-3)]
    best = max(runs[:2], key=lambda r: r["val_mean"])["lr"]
    assert record["chosen_lr"] == best and [(r["seed"], r["lr"]) for r in runs[2:]] == [(1, best)]
    for run in runs:
        assert set(run["test_accuracy"]) == {2, 3} and 0 <= run["test_mean"] <= 1
        assert run["state_bytes"] > 0
    saved = studies.load_arm(study, "linear", tmp_path, width=16)
    assert saved["runs"] == json.loads(json.dumps(runs)) and saved["command"] == "test"
    # Resuming trains nothing new; another design refuses the old record.
    again = studies.run_arm(study, "linear", width=16, folder=tmp_path, command="test")
    assert len(again["runs"]) == 3
    with pytest.raises(ValueError, match="another setting"):
        studies.run_arm(tiny_study(steps=4), "linear", width=16, folder=tmp_path)


def test_a_run_can_hand_back_its_trained_model_to_read_the_routing():
    from gma_teach import capacity
    from gma_teach.diagnostics import capture_responsibilities

    study = tiny_study(steps=2)
    data = {name: recall.split(study, name) for name in ("train", "val", "test")}
    run, model = studies.train_run(study, "gma_k8", 16, 1e-3, 0, data, return_model=True)
    assert run == studies.train_run(study, "gma_k8", 16, 1e-3, 0, data) | {
        key: run[key] for key in ("train_seconds", "cpu_seconds", "wall_seconds", "provenance")}  # the same run, seeded
    assert run["state_bytes"] == recall.state_bytes(model, study["seq_len"])
    (gamma_q,) = capture_responsibilities(model, data["test"].inputs).values()
    share = capacity.routing_share(gamma_q)
    assert share["n_components"] == 8 and 1 <= share["used"] <= 8 and share["rows"] == gamma_q[..., 0].numel()
