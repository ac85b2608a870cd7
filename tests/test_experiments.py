"""The experiments' entry point at tiny: main(argv) writes a valid JSON record; the LM checkpoint round-trips."""
import json
import math
import sys
from types import SimpleNamespace

import pytest
import torch

from gma_teach import LM_ROUTING_REMEDY, GaussianMixtureAttention, diagnostics, experiments, measure, models, preset
from gma_teach.runs import arm, chapter_runs  # the code behind gma_teach.experiments, patched here
from gma_teach.runs.language_model import FAVOR_PROBE_ROWS

TINY_LM = dict(tokenizer="bytes", max_train_tokens=6000, max_val_tokens=2000, n_steps=6, eval_every=3)


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GMA_TEACH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CI", "1")


def test_main_listops_tiny_writes_valid_json(tmp_path, monkeypatch):
    real_preset = chapter_runs.preset

    def smaller(name, scale_name=None):  # the tiny preset with fewer examples, to keep the test fast
        p = real_preset(name, scale_name)
        p.n_train, p.n_val, p.n_test = 128, 32, 64
        return p

    monkeypatch.setattr(chapter_runs, "preset", smaller)
    monkeypatch.setattr(arm, "preset", smaller)
    out = tmp_path / "results" / "listops.json"
    record = experiments.main(["listops", "--mixer", "gma", "--scale", "tiny", "--seeds", "2", "--out", str(out)])
    loaded = json.loads(out.read_text())
    assert loaded["summary"] == json.loads(json.dumps(record["summary"]))
    assert loaded["experiment"] == "listops" and loaded["scale"] == "tiny" and loaded["arm"] == "gma"
    assert loaded["config"]["n_components"] == 16 and {r["n_components"] for r in loaded["runs"]} == {16}
    assert loaded["summary"]["seeds"] == [0, 1] and len(loaded["runs"]) == 2 and loaded["complete"] is True
    p = smaller("listops", "tiny")
    for run in loaded["runs"]:
        history = run["history"]
        assert len(history["val_metric"]) == p.epochs and history["epochs"] == [1.0, 2.0]
        assert 0.0 <= run["test"]["accuracy"] <= 1.0 and run["tokens_per_second"] > 0
        assert run["parameters"]["total"] == run["parameters"]["mixer"] + run["parameters"]["rest"] > 0
    values = [r["test"]["accuracy"] for r in loaded["runs"]]
    assert loaded["summary"]["test_accuracy"]["mean"] == pytest.approx(sum(values) / 2)
    for key in ("date", "commit", "command"):
        assert isinstance(loaded[key], str) and loaded[key]
    assert isinstance(loaded["hardware"], dict) and loaded["hardware"]["cpu"] and loaded["threads"] >= 1
    assert all("generated" in run["data_source"] for run in loaded["runs"])
    assert loaded["command"].endswith(str(out))


def test_text_record_labels_the_stand_in():
    partial = []
    record = experiments.run("text", "linear", scale_name="tiny", seeds=(0, 1), epochs=1, n_train=64, n_test=32,
                             on_seed=partial.append)
    assert [r["complete"] for r in partial] == [False, True] and partial[0]["summary"]["seeds"] == [0]
    assert record["runs"][0]["data_source"].startswith("STAND-IN") and record["runs"][0]["history"]["epochs"] == [1.0]
    assert record["runs"][0]["n_components"] is None


def test_lm_record_and_checkpoint_roundtrip(monkeypatch):
    record = experiments.run("lm", "gma", scale_name="tiny", n_components=8, **TINY_LM)
    run = record["runs"][0]
    assert record["summary"]["val_perplexity"]["mean"] == run["val"]["perplexity"] > 1
    assert record["summary"]["val_bits_per_byte"]["mean"] == run["val"]["bits_per_byte"]
    assert run["history"]["steps"] == [3, 6] and run["tokenizer"].startswith("bytes")
    tiny = preset("lm", "tiny")
    for key, value in TINY_LM.items():
        setattr(tiny, key, value)
    monkeypatch.setattr(arm, "preset", lambda name, scale_name=None: tiny)
    monkeypatch.setattr(chapter_runs, "preset", lambda name, scale_name=None: tiny)
    first = experiments.load_or_train_lm("tiny", n_components=8)
    assert first.path.exists() and first.val_ids.dim() == 1
    assert first.tokenizer.token_strings(first.val_ids[:3]) == [first.tokenizer.decode([i]) for i in
                                                                first.val_ids[:3].tolist()]
    again = experiments.load_or_train_lm("tiny", n_components=8)
    for a, b in zip(first.model.state_dict().values(), again.model.state_dict().values()):
        assert torch.equal(a, b)
    assert again.history.val_metric == first.history.val_metric



def test_a_model_trained_with_gma_options_is_kept_apart_and_uses_them(monkeypatch):
    """Chapter 11 reads chapter 10's model and the same model trained with the routing remedy: two files, and
    the remedy's layers carry its options (the balance loss) whether trained or loaded."""
    tiny = preset("lm", "tiny")
    for key, value in TINY_LM.items():
        setattr(tiny, key, value)
    monkeypatch.setattr(arm, "preset", lambda name, scale_name=None: tiny)
    monkeypatch.setattr(chapter_runs, "preset", lambda name, scale_name=None: tiny)
    default = experiments.load_or_train_lm("tiny", n_components=8)
    remedy = experiments.load_or_train_lm("tiny", n_components=8, gma_options=LM_ROUTING_REMEDY)
    assert remedy.path != default.path and default.path.exists() and remedy.path.exists()
    assert remedy.config["gma_options"] == LM_ROUTING_REMEDY and "gma_options" not in default.config
    again = experiments.load_or_train_lm("tiny", n_components=8, gma_options=LM_ROUTING_REMEDY)
    for run in (remedy, again):
        layers = diagnostics.gma_layers(run.model)
        assert layers and all(layer.tied_routing and layer.assignment_weight == LM_ROUTING_REMEDY["assignment_weight"]
                              for layer in layers)
    assert all(not layer.tied_routing and layer.assignment_weight == 0
               for layer in diagnostics.gma_layers(default.model))
    for a, b in zip(remedy.model.state_dict().values(), again.model.state_dict().values()):
        assert torch.equal(a, b)
    with pytest.raises(ValueError, match="mixer 'gma' only"):
        experiments.load_or_train_lm("tiny", mixer="sdpa", gma_options=LM_ROUTING_REMEDY)

def test_lm_record_reports_bits_per_byte_and_routing_health():
    data = experiments.lm_data(SimpleNamespace(**{**vars(preset("lm", "tiny")), **TINY_LM}))
    record = experiments.run_lm("gma", scale_name="tiny", n_components=8, data=data, **TINY_LM)
    # bits per byte = summed token loss / UTF-8 bytes of the validation targets / ln 2 (byte tokens: 1 byte each
    # except end-of-text)
    targets = data.val[:, 1:]
    n_bytes = int((targets != data.tokenizer.eos_id).sum())
    assert record["validation_bytes"] == n_bytes and record["validation_tokens"] == targets.numel()
    expected = record["val"]["loss"] * targets.numel() / n_bytes / math.log(2)
    assert record["val"]["bits_per_byte"] == pytest.approx(expected, rel=1e-12)
    assert len(record["history"]["val_bits_per_byte"]) == len(record["history"]["val_loss"]) == 2
    routing = record["routing"]
    assert routing["steps"] == [3, 6] and len(routing["evaluations"]) == 2 and len(routing["initial"]) == 1
    for health in [routing["initial"], *routing["evaluations"]]:
        layer = health[0]
        assert len(layer["active_share"]) == 2 and all(0 < a <= 1 for a in layer["active_share"])
        assert all(0 <= e <= 1 + 1e-9 for e in layer["usage_entropy"]) and all(s > 0 for s in layer["logit_spread"])
        assert len(layer["distance"]) == 2 and all(0 <= e <= 1 + 1e-9 for e in layer["prior_entropy"])
    sdpa = experiments.run_lm("sdpa", scale_name="tiny", data=data, **TINY_LM)
    assert "routing" not in sdpa and "monitor" not in sdpa["history"] and sdpa["val"]["bits_per_byte"] > 0
    assert "favor_error" not in sdpa


def test_a_performer_lm_records_how_far_its_favor_weights_are_from_softmax():
    """Every Performer layer's FAVOR+ weights against softmax's, on its own queries and keys of the first
    validation rows: one entry a layer, what diagnostics.model_favor_errors gives on the returned model."""
    data = experiments.lm_data(SimpleNamespace(**{**vars(preset("lm", "tiny")), **TINY_LM}))
    record, model = experiments.run_lm("performer", scale_name="tiny", data=data, return_model=True, **TINY_LM)
    errors = record["favor_error"]
    assert [e["layer"] for e in errors] == list(range(len(model.blocks)))
    assert all(0 <= e["weights_tv"] <= 1 and e["uniform_entropy"] > 0 for e in errors)
    probe = data.val[:FAVOR_PROBE_ROWS, :-1]
    assert errors == diagnostics.model_favor_errors(model, probe)


def test_gma_options_reach_the_layer_and_are_refused_elsewhere():
    p = preset("lm", "tiny")
    model = experiments.build_lm(p, "gma", 30, n_components=8, gma_options={"init_variance": 5.0})
    layer = model.blocks[0].mixer
    variances = layer.mixture.variances
    assert torch.allclose(variances, torch.full_like(variances, 5.0 + layer.mixture.min_variance))
    with pytest.raises(ValueError, match="gma_options"):
        experiments.build_lm(p, "sdpa", 30, gma_options={"init_variance": 5.0})
    with pytest.raises(TypeError, match="gma_options"):
        experiments.mixer_options(p, "gma", 8, gma_options=[("init_variance", 5.0)])
    text = preset("text", "tiny")
    data = {"vocab_size": 40, "n_classes": 2, "pad_id": 0, "train": (torch.zeros(4, 16, dtype=torch.long), None)}
    classifier = experiments.build_classifier(text, "gma", data, n_components=5, gma_options={"init_variance": 3.0})
    mixers = [m for m in classifier.modules() if isinstance(m, GaussianMixtureAttention)]
    assert mixers and all(torch.allclose(m.mixture.variances, torch.full_like(m.mixture.variances,
                                                                              3.0 + m.mixture.min_variance))
                          for m in mixers)


def test_decoding_state_bytes_constant_for_gma_linear_for_kv_cache():
    gma = models.DecoderLM(50, 16, 2, 2, mixer="gma", max_seq_len=32, mixer_options={"n_components": 4})
    sdpa = models.DecoderLM(50, 16, 2, 2, mixer="sdpa", max_seq_len=32)
    gma_sizes = experiments.decoding_state_bytes(gma, 20)
    assert len(set(gma_sizes)) == 1
    sdpa_sizes = experiments.decoding_state_bytes(sdpa, 20)
    growth = [b - a for a, b in zip(sdpa_sizes, sdpa_sizes[1:])]
    assert len(set(growth)) == 1 and growth[0] == 2 * 2 * 16 * 4  # layers x (k, v) x d_model x float32 bytes
    with pytest.raises(ValueError, match="n_steps"):
        experiments.decoding_state_bytes(gma, 33)


def test_bad_arguments():
    with pytest.raises(ValueError, match="experiment"):
        experiments.run("mnist", "gma")
    with pytest.raises(ValueError, match="override"):
        experiments.run_classification("listops", "gma", scale_name="tiny", n_epochs=3)
    with pytest.raises(ValueError, match="LM mixer"):
        experiments.build_lm(preset("lm", "tiny"), "linformer", 10)
    with pytest.raises(SystemExit):
        experiments.main(["listops", "--mixer", "nope", "--out", "x.json"])


STUDY_COMMAND = "python -m gma_teach.study lm --arms sdpa --seeds 0 1 2 --threads 1"


@pytest.mark.parametrize("record, seed, expected", [
    ({"runs": [{"seed": 0, "provenance": {"command": STUDY_COMMAND}}, {"seed": 2, "provenance":
                                                                         {"command": STUDY_COMMAND}}]},
     2, ["gma_teach.study", "lm", "--arms", "sdpa", "--threads", "1", "--seeds", "2", "--out-dir", "D"]),
    ({"runs": [{"seed": 0}], "command": "python -m gma_teach.study collapse --out-dir /x --arms default"},
     0, ["gma_teach.study", "collapse", "--arms", "default", "--seeds", "0", "--out-dir", "D"]),
    ({"runs": [{"seed": 0}, {"seed": 1}], "command": "python -m gma_teach.experiments lm --mixer gma --scale small "
                                                     "--seeds 2 --out book/results/lm_gma_small.json"},
     1, ["gma_teach.experiments", "lm", "--mixer", "gma", "--scale", "small", "--seeds", "2", "--out",
         "D/reproduced.json"]),
])
def test_reproduce_command_changes_only_the_seeds_and_the_output(record, seed, expected):
    command = experiments.reproduce_command(record, seed, "D")
    assert command[:2] == [sys.executable, "-m"] and command[2:] == expected


@pytest.mark.parametrize("record, seed, message", [
    ({"runs": [{"seed": 0, "provenance": {"command": STUDY_COMMAND}}]}, 1, "seed 1 is not in the record; it holds "
                                                                           r"seeds \[0\]"),
    ({"runs": [{"seed": 0}], "command": "python -m gma_teach.bench --threads 1"}, 0, "gma_teach.bench"),
    ({"command": STUDY_COMMAND}, 0, "record must hold the seeds it ran under 'runs'"),
])
def test_reproduce_command_rejects_what_it_cannot_re_run(record, seed, message):
    with pytest.raises(ValueError, match=message):
        experiments.reproduce_command(record, seed, "D")


def test_every_recorded_seed_has_a_command_that_re_runs_it():
    records = [(path, json.loads(path.read_text())) for path in measure.results_folder().glob("*.json")]
    with_seeds = [(path, record) for path, record in records
                  if record.get("runs") and str(record.get("command", "")).startswith(
                      ("python -m gma_teach.experiments", "python -m gma_teach.study"))]
    assert with_seeds
    for path, record in with_seeds:
        for run in record["runs"]:
            command = experiments.reproduce_command(record, run["seed"], "D")
            assert command[2] in experiments.RECORDING_MODULES, path.name


@pytest.mark.slow
def test_a_recorded_run_is_reproduced_number_for_number(tmp_path):
    experiments.main(["listops", "--mixer", "linear", "--scale", "tiny", "--seeds", "2",
                      "--out", str(tmp_path / "records" / "listops.json")])
    result = experiments.reproduce(tmp_path / "records" / "listops.json", seed=1, out_dir=tmp_path / "again")
    names = [row["name"] for row in result["rows"]]
    assert "test accuracy" in names and any(name.startswith("val_loss at step") for name in names)
    assert all(row["difference"] == 0 for row in result["rows"]), result["rows"]
    with pytest.raises(ValueError, match="out_dir must not be the records' folder"):
        experiments.reproduce(tmp_path / "records" / "listops.json", out_dir=tmp_path / "records")
    with pytest.raises(ValueError, match=r"record_path must be a record \(a record file"):
        experiments.reproduce(tmp_path / "nothing.json")


def test_the_text_stand_in_keeps_the_last_epoch_because_its_validation_split_is_its_test_split():
    data = experiments.text_data(preset("text", "tiny"))
    assert data["validation"] is data["test"]
    run = experiments.run_classification("text", "linear", scale_name="tiny", data=data, epochs=2)
    assert run["checkpoint"] == "last"
    assert run["test"]["accuracy"] == pytest.approx(run["history"]["val_metric"][-1], abs=1e-12)
    listops = experiments.run_classification("listops", "linear", scale_name="tiny", epochs=1, n_train=64)
    assert listops["checkpoint"] == "best"


def test_a_reproduction_compares_test_numbers_of_the_same_weights_only():
    from gma_teach.runs.reproduce import compare_seed

    history = {"steps": [10], "val_loss": [1.0]}
    recorded = {"seed": 0, "history": history, "test": {"accuracy": 0.7}}  # best epoch (a record without checkpoint)
    last = {"seed": 0, "history": history, "test": {"accuracy": 0.6}, "checkpoint": "last"}
    rows = {row["name"]: row for row in compare_seed(recorded, last)}
    assert rows["test accuracy"]["reproduced"] is None  # the last epoch's weights are not the best epoch's
    assert rows["val_loss at step 10"]["difference"] == 0.0
    again = {row["name"]: row for row in compare_seed(last, {**last, "test": {"accuracy": 0.61}})}
    assert again["test (last epoch) accuracy"]["difference"] == pytest.approx(0.01)
