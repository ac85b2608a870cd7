"""The fast-weight capacity test (gma_teach.capacity, module _fast_weight) and its study through the one runner."""
from __future__ import annotations

import json

import pytest
import torch

from gma_teach import designs
from gma_teach.baselines import make_mixer, mixer_state_bytes
from gma_teach.capacity import (
    FastWeightModel,
    StoppingRule,
    fast_weight_batch,
    fast_weight_data,
    nearest_value,
    reconstruction_loss,
    retrieval_scores,
    routing_sample,
    routing_summary,
    train_fast_weight,
    value_embeddings,
)
from gma_teach.layer import LM_ROUTING_REMEDY
from gma_teach.runs.arm_records import read_record
from gma_teach.study import run_arm

pytestmark = pytest.mark.usefixtures("one_torch_thread")


# ------------------------------------------------------------------------------------------------ the task
@pytest.mark.parametrize("n_pairs", [2, 7, 33])
def test_keys_and_values_are_permutations_and_the_query_is_stored(n_pairs):
    data = fast_weight_data(50, n_pairs, seed=3)
    assert data.keys.shape == data.values.shape == (50, n_pairs) and data.query.shape == (50,)
    assert data.keys.dtype == data.values.dtype == data.query.dtype == torch.int64
    expected = torch.arange(n_pairs).expand(50, n_pairs)
    assert torch.equal(data.keys.sort(dim=1).values, expected)  # every key once: unique
    assert torch.equal(data.values.sort(dim=1).values, expected)
    assert ((data.query >= 0) & (data.query < n_pairs)).all()
    for row in range(50):  # the asked key is one of the stored keys, and the target is the value stored with it
        position = int((data.keys[row] == data.asked[row]).nonzero())
        assert position == int(data.query[row])
        assert int(data.values[row, position]) == int(data.target[row])


def test_the_same_seed_gives_the_same_sequences_and_another_seed_others():
    a, b, c = (fast_weight_data(20, 10, seed=s) for s in (5, 5, 6))
    assert torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values) and torch.equal(a.query, b.query)
    assert not torch.equal(a.keys, c.keys)
    first = fast_weight_batch(4, 10, generator=torch.Generator().manual_seed(1))
    second = fast_weight_batch(4, 10, generator=torch.Generator().manual_seed(1))
    assert torch.equal(first.keys, second.keys)


def test_queries_are_spread_over_the_positions():
    data = fast_weight_data(4000, 8, seed=0)
    counts = torch.bincount(data.query, minlength=8).double()
    assert (counts - 500).abs().max() < 100  # uniform: 500 each, the bound is about 4.8 standard deviations


def test_bad_input_is_refused_with_the_argument_named():
    with pytest.raises(ValueError, match="n_pairs"):
        fast_weight_data(4, 1, seed=0)
    with pytest.raises(ValueError, match="n_examples|batch_size"):
        fast_weight_data(0, 4, seed=0)
    with pytest.raises(ValueError, match="seed"):
        fast_weight_data(4, 4, seed=-1)
    with pytest.raises(TypeError, match="generator"):
        fast_weight_batch(4, 4, generator=0)
    with pytest.raises(ValueError, match="dim"):
        value_embeddings(4, 0, seed=0)
    with pytest.raises(ValueError, match="shape"):
        reconstruction_loss(torch.zeros(2, 3), torch.zeros(2, 4))
    model = FastWeightModel(6, "linear", d_model=8)
    with pytest.raises(ValueError, match="pairs"):
        model(fast_weight_data(2, 5, seed=0))
    with pytest.raises(ValueError, match="patience"):
        StoppingRule(patience=-1)


def test_value_embeddings_are_fixed_unit_rows():
    table = value_embeddings(30, 16, seed=2)
    assert table.shape == (30, 16)
    torch.testing.assert_close(table.norm(dim=-1), torch.ones(30))
    assert torch.equal(table, value_embeddings(30, 16, seed=2))


# ------------------------------------------------------------------------------------------------ loss and score
def test_reconstruction_loss_against_a_float64_spec():
    read, target = torch.randn(5, 7, dtype=torch.float64), torch.randn(5, 7, dtype=torch.float64)
    spec = sum(0.5 * sum((float(read[b, i]) - float(target[b, i])) ** 2 for i in range(7)) for b in range(5)) / 5
    assert float(reconstruction_loss(read, target)) == pytest.approx(spec, rel=1e-12)


def test_nearest_value_finds_the_closest_row():
    table = value_embeddings(11, 5, seed=0)
    noisy = table[[3, 7, 0]] + 0.01 * torch.randn(3, 5)
    assert nearest_value(noisy, table).tolist() == [3, 7, 0]


# ------------------------------------------------------------------------------------------------ the model
@pytest.mark.parametrize("mixer, options", [("sdpa", {}), ("linear", {}), ("performer", {"n_features": 16}),
                                            ("gma", {"n_components": 8}),
                                            ("gma", {"n_components": 8, **LM_ROUTING_REMEDY})])
def test_the_model_mixes_its_context(mixer, options):
    """The read at the query moves when a stored pair changes, and not when nothing does."""
    torch.manual_seed(0)
    model = FastWeightModel(9, mixer, d_model=16, **options).eval()
    data = fast_weight_data(4, 9, seed=1)
    read = model(data)
    assert read.shape == (4, 8)  # the value half
    assert torch.equal(read, model(data))
    other = data.values.clone()
    for row in range(4):  # swap two values that are not the asked one: the context changes, the query does not
        free = [p for p in range(9) if p != int(data.query[row])]
        other[row, free[0]], other[row, free[1]] = data.values[row, free[1]], data.values[row, free[0]]
    moved = model(type(data)(data.keys, other, data.query))
    assert (moved - read).abs().amax() > 1e-4


def test_the_value_path_starts_as_the_identity_and_reads_no_key():
    """A read that lands on the right pair gives back its value exactly at initialization (with SDPA made to
    attend only to the matching key, the model's output is the stored value), and no key enters the value path:
    a token with its value half zeroed reads as zero, whatever its key."""
    model = FastWeightModel(12, "sdpa", d_model=16).eval()
    data = fast_weight_data(3, 12, seed=4)
    tokens = model.tokens(data)
    assert tokens.shape == (3, 13, 16)
    chosen = tokens.gather(1, data.query[:, None, None].expand(-1, 1, 16))[:, 0]
    read = model.readout(model.mixer.out_proj(model.mixer.v_proj(chosen)))  # attention all on the stored pair
    torch.testing.assert_close(read, model.value_table[data.target])
    keys_only = torch.cat([model.key_table(data.asked), torch.zeros(3, 8)], dim=-1)
    torch.testing.assert_close(model.readout(model.mixer.out_proj(model.mixer.v_proj(keys_only))),
                               torch.zeros(3, 8))
    queries = model.mixer.q_proj(tokens)  # queries and keys read the key half only: the value half moves neither
    moved = model.mixer.q_proj(torch.cat([tokens[..., :8], torch.randn(3, 13, 8)], dim=-1))
    torch.testing.assert_close(queries, moved)


def test_an_odd_width_is_refused():
    with pytest.raises(ValueError, match="d_model must be even"):
        FastWeightModel(5, "linear", d_model=15)


def test_equal_state_pair_and_state_bytes():
    """GMA with K = 64 and linear attention with 64 features (key size 64) keep the same state."""
    linear, gma = (FastWeightModel(20, name, **options) for name, options in
                   (("linear", {}), ("gma", {"n_components": 64, **LM_ROUTING_REMEDY})))
    assert linear.state_bytes() == gma.state_bytes() == 64 * 65 * 4
    assert linear.state_bytes() == mixer_state_bytes(make_mixer("linear", 64, 1, causal=True), 21)


# ------------------------------------------------------------------------------------------------ stopping
def test_the_stopping_rule_stops_at_the_target_and_on_a_plateau():
    rule = StoppingRule(target=1e-3, patience=2)
    assert [rule.update(loss) for loss in (0.5, 0.4, 0.3)] == [None, None, None]
    assert rule.update(0.0009) == "target"
    rule = StoppingRule(target=1e-3, patience=2)
    verdicts = [rule.update(loss) for loss in (0.5, 0.4, 0.41, 0.4, 0.45)]
    assert verdicts == [None, None, None, None, "plateau"]  # more than 2 evaluations without a new best
    rule = StoppingRule(target=1e-3, patience=2)
    assert [rule.update(loss) for loss in (0.5, 0.6, 0.6, 0.3, 0.6, 0.6)] == [None] * 6  # a new best resets


def test_training_stops_by_the_rule_before_max_steps():
    """A plateau rule of patience 0 stops at the first evaluation that is not a new best, long before the cap."""
    torch.manual_seed(0)
    model = FastWeightModel(6, "linear", d_model=8)
    val = fast_weight_data(16, 6, seed=9)
    trained = train_fast_weight(model, seed=0, val=val, lr=0.0, max_steps=1_000, eval_every=5,
                                rule=StoppingRule(patience=0))
    assert trained["stopped"] == "plateau" and trained["steps"] == 10
    assert trained["curve"]["steps"] == [5, 10]


def test_training_learns_a_small_memory():
    torch.manual_seed(0)
    model = FastWeightModel(4, "sdpa", d_model=16)
    val = fast_weight_data(64, 4, seed=9)
    before = retrieval_scores(model, val)
    trained = train_fast_weight(model, seed=0, val=val, max_steps=300, eval_every=50)
    after = retrieval_scores(model, val)
    assert after["loss"] < 0.5 * before["loss"] and trained["steps"] <= 300


# ------------------------------------------------------------------------------------------------ the study
def test_the_study_is_declared_with_its_equal_state_family():
    study = designs.STUDIES["capacity"]
    assert study is designs.CAPACITY_STUDY and study.experiment == "capacity"
    assert study.primary == (("gma_k64_remedy", "linear"),) and len(study.seeds) >= 5
    remedy = study.arm("gma_k64_remedy")
    assert {k: v for k, v in remedy.options.items() if k != "n_components"} == designs.BALANCE_REMEDY
    assert designs.BALANCE_REMEDY == {k: v for k, v in designs.REMEDY_STUDY.arms["balance"].options.items()
                                      if k != "n_components"}  # the remedy study's balance arm, by name
    assert all(n > 64 for n in designs.CAPACITY_PRIMARY_PAIRS)
    assert set(designs.CAPACITY_PRIMARY_PAIRS) <= set(study.setting["n_pairs"])


def test_one_seed_through_the_runner_is_recorded_and_resumed(tmp_path):
    study = designs.CAPACITY_STUDY.with_changes(
        seeds=(0, 1), setting={"n_pairs": (4, 6), "d_model": 16, "max_steps": 4, "eval_every": 2, "n_eval": 8,
                               "n_test": 8})
    record = run_arm(study, "gma_k64_remedy", seeds=(0,), folder=tmp_path, command="test")
    path = tmp_path / "capacity_gma_k64_remedy.runs" / "seed-0.json"  # the run's own file in the run store
    assert json.loads(path.read_text())["run"] == record["runs"][0]
    on_disk = read_record(tmp_path / "capacity_gma_k64_remedy.json")
    assert on_disk["runs"][0]["seed"] == 0 and on_disk["complete"] is False
    run = on_disk["runs"][0]
    assert set(run["retrieval_accuracy"]) == {"4", "6"} and all(0 <= a <= 1 for a in run["retrieval_accuracy"].values())
    assert all(steps <= 4 for steps in run["steps"].values())
    assert run["state_bytes"]["4"] == 64 * 17 * 4  # K = 64 slots of d_value + 1 = 17 float32 numbers
    assert {"commit", "date", "command"} <= set(on_disk) and "provenance" in run
    assert on_disk["summary"]["seeds"] == [0]
    again = run_arm(study, "gma_k64_remedy", seeds=(0,), folder=tmp_path, command="test")  # nothing left to run
    assert again["runs"] == record["runs"]
    both = run_arm(study, "gma_k64_remedy", folder=tmp_path, command="test")
    assert [r["seed"] for r in both["runs"]] == [0, 1] and both["complete"] is True


# ------------------------------------------------------------------------------------------------ the routing
def test_routing_sample_reads_the_layers_own_key_and_query_responsibilities():
    torch.manual_seed(3)
    model = FastWeightModel(5, "gma", d_model=16, n_components=7)
    data = fast_weight_data(9, 5, seed=2)
    sample = routing_sample(model, data)
    gamma_q, gamma_k = model.mixer.routing(model.tokens(data))  # (B, 1, S + 1, K) each
    assert sample["key"].shape == (9 * 5, 7) and sample["query"].shape == (9, 7)
    torch.testing.assert_close(sample["key"], gamma_k[:, 0, :5].reshape(-1, 7).detach().float())
    torch.testing.assert_close(sample["query"], gamma_q[:, 0, 5].detach().float())
    assert routing_sample(FastWeightModel(5, "linear", d_model=16), data) is None


def test_routing_summary_tells_a_router_that_sorts_from_one_that_dissolves():
    n_keys, n_slots = 8, 16
    one_slot_each = torch.eye(n_slots, dtype=torch.float64)[torch.arange(n_keys).repeat(30)]  # (240, 16)
    uniform = torch.full_like(one_slot_each, 1.0 / n_slots)
    sorted_router = routing_summary({"key": one_slot_each, "query": one_slot_each},
                                    {"key": uniform, "query": uniform})
    assert sorted_router["key"]["bits"] == pytest.approx(3.0)  # log2 of the 8 keys told apart
    assert sorted_router["key"]["state"] == "in use" and sorted_router["key"]["untrained_bits"] == pytest.approx(0.0)
    dissolved = routing_summary({"key": uniform, "query": uniform}, {"key": one_slot_each, "query": one_slot_each})
    assert dissolved["query"]["bits"] == pytest.approx(0.0) and dissolved["query"]["state"] == "dissolved"


def test_a_gma_run_records_its_routing_at_every_size_and_another_mixer_none(tmp_path):
    study = designs.CAPACITY_STUDY.with_changes(
        seeds=(0,), setting={"n_pairs": (4, 6), "d_model": 16, "max_steps": 2, "eval_every": 2, "n_eval": 8,
                             "n_test": 8})
    gma = run_arm(study, "gma_k64_remedy", folder=tmp_path, command="test")["runs"][0]
    assert set(gma["routing"]) == {"4", "6"}
    for side in ("key", "query"):
        entry = gma["routing"]["6"][side]
        assert 0.0 <= entry["bits"] <= 6.0 and entry["state"] in ("in use", "collapsed", "dissolved", "at baseline")
        assert entry["bits"] != entry["untrained_bits"]  # two steps of training moved the router
    assert "routing" not in run_arm(study, "linear", folder=tmp_path, command="test")["runs"][0]
    frozen = study.with_changes(name="capacity_frozen", setting={"lr": 0.0})  # training that changes nothing
    still = run_arm(frozen, "gma_k64_remedy", folder=tmp_path, command="test")["runs"][0]
    for size in ("4", "6"):
        for side in ("key", "query"):
            entry = still["routing"][size][side]
            assert entry["bits"] == entry["untrained_bits"] and entry["state"] == "at baseline"
            assert still["routing"][size][side]["untrained_bits"] == gma["routing"][size][side]["untrained_bits"]
