"""One engine: a chapter's live run, ``python -m gma_teach.experiments`` and the GPU record train through the runner of
every study, so a chapter's model and a declared study's arm are the same model, recorded alike."""
import json

import pytest
import torch

from gma_teach import designs, experiments, study
from gma_teach.designs import Arm
from gma_teach.runs import experiments as runner
from gma_teach.runs import record_gpu

TINY_LM = dict(tokenizer="bytes", max_train_tokens=6000, max_val_tokens=2000, n_steps=4, eval_every=2)
COSTS = ("wall_seconds", "cpu_seconds", "train_seconds", "tokens_per_second", "provenance")
"""What a run records of its cost and origin, which differs between two runs of one model."""


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GMA_TEACH_CACHE", str(tmp_path / "cache"))


def _model_numbers(run: dict) -> dict:
    """A run's record without its costs and origin, in its history too."""
    numbers = {key: value for key, value in run.items() if key not in COSTS}
    numbers["history"] = {key: value for key, value in run["history"].items() if key not in COSTS}
    return numbers


def test_a_chapters_lm_run_is_the_declared_arms_run(tmp_path):
    """Chapter 10's ``run_lm`` and a declared study's arm with the same mixer, options and sizes train the same
    model: every number of their runs but the costs is equal."""
    declared = designs.Study("tiny_lm", "lm", "tiny", TINY_LM, (0,),
                             {"gma_k8_balance": Arm("gma", {"n_components": 8, "balance_weight": 0.01})})
    recorded = study.run_arm(declared, "gma_k8_balance", folder=tmp_path)["runs"][0]
    chapter = experiments.run_lm("gma", scale_name="tiny", n_components=8, gma_options={"balance_weight": 0.01},
                                 **TINY_LM)
    assert _model_numbers(recorded) == _model_numbers(chapter)
    assert chapter["gma_options"] == {"balance_weight": 0.01} and chapter["n_components"] == 8
    assert set(recorded) == set(chapter)  # one record of a run
    assert chapter["provenance"]["command"].startswith("gma_teach.experiments.run_lm('gma'")


def test_a_chapters_classifier_is_the_declared_arms_classifier(tmp_path):
    setting = dict(epochs=1, n_train=64, n_test=32)
    declared = designs.Study("tiny_text", "text", "tiny", setting, (0,), {"linear": Arm("linear")})
    recorded = study.run_arm(declared, "linear", folder=tmp_path)["runs"][0]
    chapter = experiments.run_classification("text", "linear", scale_name="tiny", **setting)
    assert _model_numbers(recorded) == _model_numbers(chapter)


def test_the_command_lines_record_is_a_study_arms_record(tmp_path):
    """``python -m gma_teach.experiments ... --out F`` writes what ``python -m gma_teach.study`` writes for an arm,
    and continues an interrupted record instead of starting again."""
    out = tmp_path / "text_linear.json"
    argv = ["text", "--mixer", "linear", "--scale", "tiny", "--seeds", "1", "--out", str(out)]
    first = experiments.main(argv)
    declared = designs.Study("tiny_text", "text", "tiny", {}, (0,), {"linear": Arm("linear")})
    arm_record = study.run_arm(declared, "linear", folder=tmp_path)
    assert set(first) == set(arm_record) and first["experiment"] == arm_record["experiment"] == "text"
    assert first["spec"] == arm_record["spec"] and first["summary"].keys() == arm_record["summary"].keys()
    again = experiments.main(argv[:-3] + ["2", "--out", str(out)])  # seed 0 is kept, seed 1 is added
    assert again["runs"][0] == json.loads(json.dumps(first["runs"][0])) and again["summary"]["seeds"] == [0, 1]


def test_an_option_the_mixer_does_not_take_is_refused_in_a_chapter_as_in_a_study():
    with pytest.raises(ValueError, match=r"arm 'sdpa' sets option\(s\) \['n_components'\]"):
        experiments.run_lm("sdpa", scale_name="tiny", n_components=8, **TINY_LM)
    with pytest.raises(ValueError, match="unknown override 'n_epochs'"):
        experiments.run_classification("listops", "gma", scale_name="tiny", n_epochs=3)


def test_the_gpu_records_listops_stage_runs_a_chapter_study_through_the_runner(tmp_path, monkeypatch):
    calls = []

    def spy(declared, arm, **kwargs):
        calls.append((declared, arm, kwargs))
        return {"experiment": declared.experiment, "arm": arm, "scale": declared.scale,
                "summary": {"seeds": [0], "test_accuracy": {"mean": 0.5, "std": None},
                            "tokens_per_second": {"mean": 1.0}}}

    monkeypatch.setattr(runner, "run_arm", spy)
    record_gpu._run_stage("listops", tmp_path, quick=True)
    (declared, arm, kwargs), = calls
    assert declared.experiment == "listops" and arm == "gma" and declared.scale == "full"
    assert dict(declared.setting) == record_gpu.LISTOPS_OVERRIDES["quick"]
    assert kwargs["path"].name.startswith("listops_gma_") and kwargs["path"].parent == tmp_path
    assert "note" in json.loads(kwargs["path"].read_text())


def test_chapter_tens_cached_model_is_the_arms_model():
    """The model ``load_or_train_lm`` keeps for chapter 11 is the one ``run_lm`` (and so the study's arm) trains:
    the same weights, the same validation curve."""
    cached = experiments.load_or_train_lm("tiny", n_components=8, **TINY_LM)
    run, model = experiments.run_lm("gma", scale_name="tiny", n_components=8, return_model=True, **TINY_LM)
    assert cached.history.val_loss == run["history"]["val_loss"]
    weights = cached.model.state_dict()
    assert all(torch.equal(weights[name], value) for name, value in model.state_dict().items())


def test_the_cost_model_reads_a_command_line_record_in_either_form():
    """A record of ``python -m gma_teach.experiments`` made before it ran studies (``mixer``, ``n_components``) and
    one made since (``spec``) of the same run get the same prediction."""
    from gma_teach import cost

    record = experiments.run("lm", "gma", scale_name="tiny", n_components=8, **TINY_LM)
    old_form = {"experiment": "lm", "mixer": "gma", "n_components": 8, "config": record["config"],
                "runs": record["runs"], "hardware": record["hardware"]}
    assert cost.compare_with_record(record) == cost.compare_with_record(old_form)
    assert record["config"]["n_components"] != 8  # the preset's K: the prediction read the arm's


def test_a_recall_arms_record_has_the_one_form_and_is_read_like_any(tmp_path):
    """A study with widths and a learning-rate sweep (recall) writes the record every study writes, plus its
    ``width`` and ``sweep``; the kept rate, the recall table, a continued run and the cost model read it."""
    from gma_teach import cost

    tiny = dict(seq_len=16, vocab_size=32, kv_pairs=(2, 3), n_train=32, n_val=8, n_test=8, steps=2, warmup=1,
                batch_size=8)
    recall = designs.RECALL_STUDY.with_changes(
        name="tiny_recall", setting=tiny, widths=(16,), learning_rates=(1e-2, 3e-3), seeds=(0, 1),
        arms={"linear": designs.RECALL_STUDY.arms["linear"], "sdpa": designs.RECALL_STUDY.arms["sdpa"]},
        primary=(("linear", "sdpa"),), reruns=None, exploratory=None, chapter=None, what=None)
    record = study.run_arm(recall, "linear", width=16, folder=tmp_path)
    plain = study.run_arm(designs.Study("tiny_text", "text", "tiny", {"epochs": 1, "n_train": 64, "n_test": 32},
                                        (0,), {"linear": Arm("linear")}), "linear", folder=tmp_path)
    assert set(record) - set(plain) == {"width", "sweep", "chosen_lr"} and set(plain) - set(record) == {
        "complete", "summary", "declared_seeds"}
    assert record["spec"] == plain["spec"] and record["config"]["d_model"] == 16
    assert record["sweep"] == {"learning_rates": [1e-2, 3e-3], "lr_seed": 0}
    sweep = [run for run in record["runs"] if run["seed"] == 0]
    assert record["chosen_lr"] == study.chosen_lr(record) == max(sweep, key=lambda r: r["val_mean"])["lr"]
    assert [(run["seed"], run["lr"]) for run in record["runs"]][-1] == (1, record["chosen_lr"])
    again = study.run_arm(recall, "linear", width=16, folder=tmp_path)  # nothing left to train
    assert again == json.loads(json.dumps(record))
    study.run_arm(recall, "sdpa", width=16, folder=tmp_path)
    table = study.recall_table(tmp_path, recall)
    (entry,) = table["arms"]["linear"].values()  # its one width
    assert entry["lr"] == record["chosen_lr"] and entry["seeds"] == [0, 1]
    rows = cost.compare_with_record(record)
    assert [row["measured_seconds"] for row in rows] == [run["cpu_seconds"] for run in record["runs"]]
