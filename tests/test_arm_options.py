"""An arm means the same model in every study: its options reach the mixer the runner builds, whatever the study's
kind (issue 38).

Each test runs the study runner's own trainer of one seed (``gma_teach.study.SEED_TRAINERS``) on a tiny copy of a
declared study and stops it at its first training step, keeping the model it built; the model's mixer must hold
the arm's option.
"""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from gma_teach import baselines, designs, study
from gma_teach.capacity import _fast_weight
from gma_teach.designs import Arm
from gma_teach.runs import arm as arm_module
from gma_teach.runs import classification, language_model, recall, speed


class _Built(Exception):
    """Raised in place of training, carrying the model the trainer built."""

    def __init__(self, model):
        super().__init__("built")
        self.model = model


def _stop_at_fit(model, *args, **kwargs):
    raise _Built(model)


def _built(monkeypatch, module, config, data, lr=1e-3, name="fit"):
    monkeypatch.setattr(module, name, _stop_at_fit)
    with pytest.raises(_Built) as stopped:
        study.SEED_TRAINERS[config.study.experiment](config, 0, lr, data, False)
    return stopped.value.model


def _mixers(model, cls) -> list:
    return [m for m in model.modules() if isinstance(m, cls)]


TINY_LM = {"seq_len": 16, "d_model": 16, "n_layers": 1, "n_heads": 2, "d_ff": 32, "n_components": 8}
TINY_CLASSIFIER = {"d_model": 16, "n_layers": 1, "n_heads": 2, "d_ff": 32, "n_components": 8}


def _lm_study(arms: dict):
    return designs.LM_STUDY.with_changes(name="tiny-lm", scale="tiny", setting=TINY_LM, arms=arms, primary=())


def _lm_data():
    blocks = torch.zeros(4, TINY_LM["seq_len"] + 1, dtype=torch.long)
    return SimpleNamespace(tokenizer=SimpleNamespace(n_vocab=20), train=blocks, val=blocks)


def _classifier_data(n_tokens=16):
    tokens = torch.zeros(4, n_tokens, dtype=torch.long)
    split = (tokens, torch.zeros(4, dtype=torch.long))
    return {"train": split, "validation": split, "test": split, "vocab_size": 10, "n_classes": 2, "pad_id": 0,
            "source": "none"}


def test_performer_features_reach_the_lm(monkeypatch):
    lm = _lm_study({"performer_m16": Arm("performer", {"n_features": 16})})
    config = study.resolve(lm, "performer_m16")
    model = _built(monkeypatch, language_model, config, _lm_data())
    (performer,) = _mixers(model, baselines.PerformerAttention)
    assert performer.n_features == 16


def test_performer_features_reach_the_classifier(monkeypatch):
    listops = designs.LISTOPS_LRA_STUDY.with_changes(name="tiny-listops", scale="tiny", setting=TINY_CLASSIFIER,
                                                     arms={"performer_m16": Arm("performer", {"n_features": 16})},
                                                     primary=())
    config = study.resolve(listops, "performer_m16")
    model = _built(monkeypatch, classification, config, _classifier_data())
    (performer,) = _mixers(model, baselines.PerformerAttention)
    assert performer.n_features == 16


def test_the_arms_heads_and_registry_k_reach_the_lm(monkeypatch):
    lm = _lm_study({"gma_h4": Arm("gma", n_heads=4), "gma_k4": Arm("gma", {"n_components": 4})})
    data = _lm_data()
    (heads,) = _mixers(_built(monkeypatch, language_model, study.resolve(lm, "gma_h4"), data),
                       baselines.GaussianMixtureAttention)
    assert (heads.n_heads, heads.n_components) == (4, TINY_LM["n_components"])  # K: the registry's default
    assert study.resolve(lm, "gma_h4").sizes["n_heads"] == 4  # the record's config states the heads it used
    (own,) = _mixers(_built(monkeypatch, language_model, study.resolve(lm, "gma_k4"), data),
                     baselines.GaussianMixtureAttention)
    assert (own.n_heads, own.n_components) == (TINY_LM["n_heads"], 4)


def test_the_arms_heads_reach_the_classifier(monkeypatch):
    listops = designs.LISTOPS_LRA_STUDY.with_changes(name="tiny-listops", scale="tiny", setting=TINY_CLASSIFIER,
                                                     arms={"linear_h4": Arm("linear", n_heads=4)}, primary=())
    (linear,) = _mixers(_built(monkeypatch, classification, study.resolve(listops, "linear_h4"), _classifier_data()),
                        baselines.LinearAttention)
    assert linear.n_heads == 4


def _recall_study(arms: dict):
    return designs.RECALL_STUDY.with_changes(name="tiny-recall", arms=arms, primary=(), widths=(16,),
                                             setting={"seq_len": 16, "vocab_size": 32, "n_heads": 1})


def _recall_data():
    split = SimpleNamespace(inputs=torch.zeros(4, 16, dtype=torch.long), labels=torch.zeros(4, 16, dtype=torch.long))
    return {"train": split, "val": split, "test": split}


def test_performer_features_and_heads_reach_the_recall_model(monkeypatch):
    recall_study = _recall_study({"performer_m16_h2": Arm("performer", {"n_features": 16}, n_heads=2)})
    config = study.resolve(recall_study, "performer_m16_h2", 16)
    (performer,) = _mixers(_built(monkeypatch, recall, config, _recall_data()), baselines.PerformerAttention)
    assert (performer.n_features, performer.n_heads) == (16, 2)
    live = recall.build_model(recall_study, "performer_m16_h2", 16)  # a chapter's live run builds the same mixer
    (same,) = _mixers(live, baselines.PerformerAttention)
    assert (same.n_features, same.n_heads) == (16, 2)


def test_performer_features_reach_the_capacity_model(monkeypatch):
    capacity = designs.CAPACITY_STUDY.with_changes(
        name="tiny-capacity", arms={"performer_m16": Arm("performer", {"n_features": 16})}, primary=(),
        setting={"n_pairs": (4,), "d_model": 16, "n_eval": 4, "n_test": 4})
    config = study.resolve(capacity, "performer_m16")
    model = _built(monkeypatch, _fast_weight, config, {}, name="train_fast_weight")
    (performer,) = _mixers(model, baselines.PerformerAttention)
    assert performer.n_features == 16


def test_performer_features_reach_the_speed_measurement(monkeypatch):
    lm = _lm_study({"performer_m16": Arm("performer", {"n_features": 16}, n_heads=4)})
    monkeypatch.setattr(speed, "fit", _stop_at_fit)
    with pytest.raises(_Built) as stopped:
        speed.measure_training_speed(lm, steps=1, repeat=1, warmup=0, data=_lm_data())
    (performer,) = _mixers(stopped.value.model, baselines.PerformerAttention)
    assert (performer.n_features, performer.n_heads) == (16, 4)


@pytest.mark.parametrize("kind", ["lm", "listops", "recall"])
def test_a_preparation_is_done_by_every_trainer_that_can(monkeypatch, kind):
    prepared = []
    monkeypatch.setattr(arm_module, "init_routing_means", lambda model, blocks: prepared.append(blocks.shape))
    kmeans = Arm("gma", {"n_components": 4}, prepare="kmeans")
    if kind == "lm":
        config, module, data = study.resolve(_lm_study({"k": kmeans}), "k"), language_model, _lm_data()
    elif kind == "listops":
        listops = designs.LISTOPS_LRA_STUDY.with_changes(name="t", scale="tiny", setting=TINY_CLASSIFIER,
                                                         arms={"k": kmeans}, primary=())
        config, module, data = study.resolve(listops, "k"), classification, _classifier_data()
    else:
        config, module, data = study.resolve(_recall_study({"k": kmeans}), "k", 16), recall, _recall_data()
    _built(monkeypatch, module, config, data)
    assert len(prepared) == 1 and prepared[0][0] == 4  # the first training inputs (all 4 of the tiny data)


def test_the_capacity_test_refuses_what_its_model_cannot_honour():
    for arm in (Arm("linear", n_heads=2), Arm("gma", {"n_components": 4}, prepare="kmeans")):
        capacity = designs.CAPACITY_STUDY.with_changes(name="t", arms={"bad": arm}, primary=())
        with pytest.raises(ValueError, match="arm 'bad' of capacity study 't'.*one head and no preparation"):
            study.resolve(capacity, "bad")


def test_an_option_the_mixer_does_not_take_is_an_error_naming_arm_option_and_options():
    lm = _lm_study({"bad": Arm("performer", {"n_components": 8})})
    with pytest.raises(ValueError) as error:
        study.resolve(lm, "bad")
    assert str(error.value) == ("arm 'bad' sets option(s) ['n_components'], which mixer 'performer' does not take; "
                                "it takes ['n_features', 'eps', 'chunk_size']")
    with pytest.raises(ValueError, match="arm 'plain' sets option.*'softmax' does not take; it takes no options"):
        study.resolve(_lm_study({"plain": Arm("softmax", {"window": 8})}), "plain")


def test_a_default_reading_a_size_the_study_lacks_is_an_error_unless_the_arm_sets_it():
    with pytest.raises(ValueError, match=r"arm 'performer': .*\['n_features'\] read size\(s\) \['n_features'\]"):
        study.resolve(_recall_study({"performer": Arm("performer")}), "performer", 16)


@pytest.mark.parametrize("name", sorted(designs.STUDIES))
def test_every_declared_arm_resolves(name):
    declared = designs.STUDIES[name]
    for arm in declared.arms:
        for width in declared.widths or (None,):
            config = study.resolve(declared, arm, width)
            assert set(config.options) >= set(declared.arms[arm].options)
            if declared.arms[arm].mixer == "gma":
                assert config.options["n_components"] == declared.arms[arm].options.get(
                    "n_components", config.sizes.get("n_components"))


def test_every_declared_arm_resolves_and_a_bad_one_stops_the_command_before_anything_trains(tmp_path, monkeypatch):
    """Every arm of every declared study resolves (its options are ones its mixer takes); a study whose arm sets
    an option its mixer does not take stops ``python -m gma_teach.study`` before any arm trains."""
    from gma_teach import designs
    from gma_teach.runs import study_cli

    for declared in designs.STUDIES.values():
        for arm in declared.arms:
            for width in declared.widths or [None]:
                study.resolve(declared, arm, width)
    bad = designs.TEXT_STUDY.with_changes(name="bad_text", primary=(), chapter=None, what=None, arms={
        "linear": designs.Arm("linear"), "sdpa_k": designs.Arm("sdpa", {"n_components": 8})})
    trained = []
    monkeypatch.setitem(study_cli.STUDIES, "bad-text", bad)
    monkeypatch.setattr(study_cli, "run_arm", lambda *args, **kwargs: trained.append(args))
    with pytest.raises(ValueError, match=r"arm 'sdpa_k' sets option\(s\) \['n_components'\]"):
        study_cli.main(["bad-text", "--out-dir", str(tmp_path)])
    assert trained == []
