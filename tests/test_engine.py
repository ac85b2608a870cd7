"""The one study engine: typed designs, one resolution, one runner and training loop, one verdict path."""
from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from gma_teach import designs, measure, study, train
from gma_teach.designs import Arm, Study
from gma_teach.models import DecoderLM
from gma_teach.runs import experiments as experiment_runner
from gma_teach.runs import recall, verdicts
from gma_teach.tasks import IGNORE_INDEX, mqar


def test_an_arm_is_a_mixer_name_and_its_options_frozen_and_read_in_either_record_form():
    arm = Arm("gma", {"n_components": 8, "init_variance": "d_route"}, prepare="kmeans")
    assert arm.n_components == 8 and arm.gma_options == {"init_variance": "d_route"}
    with pytest.raises(TypeError):
        arm.options["n_components"] = 9  # read-only, nested too
    with pytest.raises(dataclasses.FrozenInstanceError):
        arm.mixer = "sdpa"
    earlier = {"mixer": "gma", "n_components": 8, "gma_options": {"init_variance": "d_route"}, "prepare": "kmeans"}
    assert Arm.from_spec(earlier) == arm == Arm.from_spec(json.loads(json.dumps(arm.as_dict())))
    assert arm["n_components"] == 8 and arm["gma_options"] == {"init_variance": "d_route"}  # the dict form reads
    assert Arm("sdpa") != Arm("sdpa", {"n_heads_hint": 1})
    with pytest.raises(TypeError, match="mixer"):
        Arm(3)
    with pytest.raises(ValueError, match="prepare"):
        Arm("gma", prepare="pca")
    with pytest.raises(ValueError, match="no arm has"):
        Arm.from_spec({"mixer": "gma", "width": 3})


def test_a_study_checks_its_declaration_when_it_is_written():
    arms = {"a": Arm("gma"), "b": Arm("linear")}
    with pytest.raises(ValueError, match="experiment"):
        Study("s", "vision", "tiny", {}, (0,), arms)
    with pytest.raises(ValueError, match="names an arm"):
        Study("s", "lm", "tiny", {}, (0,), arms, primary=[("a", "c")])
    with pytest.raises(ValueError, match="metric must be one of"):
        Study("s", "lm", "tiny", {}, (0,), arms, metric="accuracy_at_5")
    with pytest.raises(TypeError, match="must be an Arm"):
        Study("s", "lm", "tiny", {}, (0,), {"a": {"mixer": "gma"}})
    made = Study("s", "lm", "tiny", {"n_steps": 3}, [0, 1], arms, primary=[("a", "b")])
    assert made.seeds == (0, 1) and made["overrides"] == {"n_steps": 3} and made["n_steps"] == 3
    assert made.declared_metrics() == ("val_bits_per_byte",) and made.get("second_look") is None
    changed = made.with_changes(setting={"lr": 1e-3}, seeds=(2,))
    assert changed.setting == {"n_steps": 3, "lr": 1e-3} and changed.seeds == (2,) and made.seeds == (0, 1)
    assert made.chapter is None and made.what is None and "chapter" not in made  # counted in no chapter
    placed = made.with_changes(chapter=9, what="a study in words")
    assert placed["chapter"] == 9 and placed.what == "a study in words" and placed.with_changes(seeds=(3,)).chapter == 9
    assert designs.as_study({"name": "old", "scale": "tiny", "seeds": (0,), "arms": {"gma": {"mixer": "gma"}},
                             "chapter": 10, "what": "old words"}).chapter == 10
    for chapter in (0, "9", True, 9.0):
        with pytest.raises(ValueError, match="chapter must be a positive int"):
            made.with_changes(chapter=chapter, what="words")
    for what in ("", "  ", 3):
        with pytest.raises(ValueError, match="what must be a few words"):
            made.with_changes(what=what)
    with pytest.raises(ValueError, match="does not say what it is"):
        made.with_changes(chapter=9)


def test_every_declared_study_is_a_typed_study_in_one_registry_and_a_dict_design_still_reads():
    assert {"collapse", "cause", "remedy", "lm", "listops-lra", "text", "recall", "recall-v2"} <= set(designs.STUDIES)
    assert all(isinstance(s, Study) for s in designs.STUDIES.values())
    assert designs.RECALL_STUDY.experiment == "recall" and designs.RECALL_STUDY.widths == (64, 128)
    earlier = {"name": "old", "scale": "tiny", "overrides": {"n_steps": 2}, "seeds": (0,),
               "arms": {"gma": {"mixer": "gma", "n_components": 4}}}
    typed = designs.as_study(earlier)
    assert typed.experiment == "lm" and typed.setting == {"n_steps": 2} and typed.arms["gma"].n_components == 4


def test_a_study_is_resolved_once_into_the_configuration_its_seeds_train_with():
    config = study.resolve(designs.LM_STUDY, "gma_k32")
    assert config.arm is designs.LM_STUDY.arms["gma_k32"] and config.width is None
    assert {key: config.sizes[key] for key in designs.LM_SETTING} == designs.LM_SETTING
    with pytest.raises(TypeError):
        config.sizes["n_steps"] = 1
    recall_config = study.resolve(designs.RECALL_STUDY, "sdpa", 128)
    assert recall_config.sizes["d_model"] == 128 and recall_config.sizes["seq_len"] == 64
    with pytest.raises(ValueError, match="width"):
        study.resolve(designs.RECALL_STUDY, "sdpa", 96)
    with pytest.raises(ValueError, match="does not have"):
        study.resolve(designs.as_study({"name": "x", "scale": "tiny", "overrides": {"n_stepz": 2}, "seeds": (0,),
                                        "arms": {"a": {"mixer": "none"}}}), "a")
    with pytest.raises(ValueError, match="arm must be one of"):
        study.resolve(designs.LM_STUDY, "flash")
    assert set(study.SEED_TRAINERS) == set(designs.EXPERIMENTS)


def test_the_recall_study_trains_through_the_one_loop(monkeypatch):
    calls = []

    def counting_fit(model, train_data, **options):
        calls.append(options)
        return train.fit(model, train_data, **options)

    monkeypatch.setattr(recall, "fit", counting_fit)
    tiny = designs.RECALL_STUDY.with_changes(setting=dict(seq_len=16, vocab_size=32, kv_pairs=(2, 3), n_train=32,
                                                          n_val=8, n_test=8, steps=2, warmup=1, batch_size=8),
                                             widths=(16,))
    run = study.train_run(tiny, "linear", 16, 1e-3, 0, study.recall_data(tiny))
    assert len(calls) == 1 and calls[0]["task"] == "queries" and calls[0]["keep"] == "last"
    assert calls[0]["steps"] == 2 and calls[0]["warmup"] == 1 and calls[0]["weight_decay"] == 0.1
    assert set(run["test_accuracy"]) == {2, 3}


def test_the_queries_step_scores_exactly_the_marked_positions():
    torch.manual_seed(0)
    data = mqar(6, 16, 3, vocab_size=32, seed=1)
    model = DecoderLM(32, 16, 1, 2, mixer="sdpa", max_seq_len=16).double()
    got = train.evaluate(model, (data.inputs, data.labels), task="queries", batch_size=4)
    with torch.no_grad():
        logits = model(data.inputs)  # every position, then the marked ones: the spec
    where = data.labels != IGNORE_INDEX
    expected = F.cross_entropy(logits[where], data.labels[where])
    accuracy = (logits[where].argmax(-1) == data.labels[where]).double().mean()
    # the step takes the loss in float32 (as fit's every step does), so float32's rounding, no more
    assert got["loss"] == pytest.approx(float(expected), rel=1e-6) and got["accuracy"] == float(accuracy)
    with pytest.raises(ValueError, match="task='queries'"):
        train.evaluate(model, (data.inputs, data.labels[:, 0]), task="queries")


def test_one_level_and_one_table_of_metric_facts():
    assert verdicts.ALPHA is designs.ALPHA == 0.05
    assert set(verdicts.LOWER_IS_BETTER) == {n for n, f in designs.METRICS.items() if f.lower_is_better}
    assert study.METRIC_PATHS == {n: (f.part, f.key) for n, f in designs.METRICS.items()}
    from gma_teach.plots import results

    for name, (axis, per_token, factor) in results.METRICS.items():
        facts = designs.METRICS["val_bits_per_byte" if name == "bits_per_byte" else name]
        assert (axis, per_token, factor) == (facts.axis, facts.per_token, facts.factor)
    table = study.recall_table()
    declared = study.declared_comparisons(designs.RECALL_STUDY)
    assert [(c["arm"], c["against"], c["width"], c["p_holm"]) for c in table["comparisons"]] == [
        (c["arm"], c["against"], c["width"], c["p_holm"]) for c in declared["comparisons"]]
    assert all(c["told_apart"] == (c["p_holm"] < designs.ALPHA) for c in table["comparisons"])


def test_a_verdict_is_wrapped_to_the_page_never_cut():
    declared = {"seeds": [0, 1, 2], "family_size": 1, "comparisons": [
        {"arm": "gma_k128_remedy_with_a_long_name", "against": "linear", "width": 128, "metric": "test_mean",
         "mean": -0.0123, "ci95": [-0.2, 0.18], "p": 0.7, "p_holm": 0.9, "told_apart": False}]}
    for width in (40, measure.PAGE_WIDTH):
        lines = verdicts.format_declared(declared, width=width)
        assert all(len(line) <= width for line in lines), lines
        assert "not told apart" in " ".join(" ".join(lines).split())
    table = {"design": {"kv_pairs": [4, 16]}, "arms": {}, "family_size": 1,
             "comparisons": [{**declared["comparisons"][0], "difference": -0.0123}]}
    lines = study.format_recall_table(table, width=60)  # its table's rows are 58 characters wide
    assert all(len(line) <= 60 for line in lines) and "not told apart" in " ".join(" ".join(lines).split())


def test_every_scale_of_the_presets_is_accepted_by_the_experiments_command():
    for scale in ("tiny", "small", "medium", "full"):
        args = experiment_runner._parser().parse_args(["lm", "--scale", scale, "--out", "x.json"])
        assert args.scale == scale


def test_the_second_names_warn_with_their_one_path_and_date():
    from gma_teach import experiments, stats

    with pytest.warns(DeprecationWarning, match=re.escape("use gma_teach.designs.LM_STUDY")):
        assert study.LM_STUDY is designs.LM_STUDY
    with pytest.warns(DeprecationWarning, match="2027-06-30"):
        assert study.holm is stats.holm
    with pytest.warns(DeprecationWarning, match=re.escape("gma_teach.train.fit")):
        assert experiments.fit is train.fit
    with pytest.raises(AttributeError):
        study.no_such_name  # noqa: B018
    assert math.isclose(designs.ALPHA, 0.05)


def test_the_second_recall_design_is_in_the_regime_where_state_size_decides():
    """Declared before any of its runs: 256 tokens, 8-64 pairs, vocabulary 8,192, two layers of convolution + mixer,
    at least three learning rates and five seeds; SDPA's cache at least four times every recurrent state; the
    equal-state pairs byte-identical; eight seeds give 80% power at the strictest Holm step for the planned spread;
    and the cost it states is the cost model's."""
    from gma_teach import cost, stats
    from gma_teach.runs.recall import build_model, state_bytes

    v2 = designs.RECALL_V2_STUDY
    assert designs.STUDIES["recall-v2"] is v2 and v2.experiment == "recall"
    assert v2["seq_len"] == 256 and v2["vocab_size"] == 8192 and v2["n_layers"] == 2
    assert min(v2["kv_pairs"]) == 8 and max(v2["kv_pairs"]) == 64 and 4 * max(v2["kv_pairs"]) <= v2["seq_len"]
    assert len(v2.learning_rates) >= 3 and 1e-3 in v2.learning_rates and len(v2.seeds) >= 5
    small = v2.with_changes(setting={"vocab_size": 64})  # the states do not depend on the vocabulary
    sizes = {name: state_bytes(build_model(small, name, 128), v2["seq_len"]) for name in v2.arms}
    largest = max(size for name, size in sizes.items() if name != "sdpa")
    assert sizes["sdpa"] >= 4 * largest, (sizes["sdpa"], largest)
    for arm, against in v2.primary:
        assert sizes[arm] == sizes[against], (arm, against)
    assert stats.paired_t_power(0.05, 0.034, len(v2.seeds), alpha=0.05 / len(v2.primary)) >= 0.80
    assert "standard deviation up to 0.034" in Path(designs.__file__).read_text()
    source = Path(designs.__file__).read_text()  # the numbers the design states, in its docstring
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    hours = {profile: cost.study_seconds(v2, profile) / 3600 for profile in ("cpu-2core", "h200")}
    for text in (source, " ".join(readme.split())):
        assert f"about {round(hours['cpu-2core'], -2):,.0f} CPU-hours" in text, hours
        assert f"about {hours['h200']:.0f} GPU-hours on an H200" in text, hours
    assert f"{len(v2.arms)} arms, {len(v2.learning_rates) + len(v2.seeds) - 1} runs each" in source
