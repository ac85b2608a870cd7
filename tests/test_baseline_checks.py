"""The two checks of baselines that learn nothing (designs.PERFORMER_CHECK, designs.MAMBA_CHECK): declared as
studies of the one runner, each arm the model it names."""
from __future__ import annotations

import json

import pytest

from gma_teach import designs, study
from gma_teach.study import resolve


def test_the_performer_check_is_the_lm_study_at_two_feature_counts():
    check = designs.STUDIES["performer-check"]
    assert check is designs.PERFORMER_CHECK and check.experiment == "lm" and check.seeds == (0,)
    assert check.setting == designs.LM_SETTING and not check.primary
    assert dict(resolve(check, "performer").options) == {"n_features": designs.LM_SETTING["n_features"]}
    assert dict(resolve(check, "performer_m256").options) == {"n_features": 256}
    lm = resolve(designs.LM_STUDY, "performer")  # its first arm is the LM study's arm, run again
    assert dict(lm.options) == dict(resolve(check, "performer").options)
    assert {k: v for k, v in lm.sizes.items()} == {k: v for k, v in resolve(check, "performer").sizes.items()}


def test_the_mamba_check_is_the_recall_study_at_zoologys_rate():
    check = designs.STUDIES["mamba-check"]
    assert check is designs.MAMBA_CHECK and check.experiment == "recall"
    assert check.learning_rates == (1e-3,) and check.widths == (64,) and set(check.arms) == {"mamba"}
    assert check.seeds == designs.RECALL_STUDY.seeds and check.setting == designs.RECALL_STUDY.setting
    assert 1e-3 not in designs.RECALL_STUDY.learning_rates  # the rate the recall study did not try
    assert check.arms["mamba"] == designs.RECALL_STUDY.arms["mamba"]


def _write(folder, name, record):
    (folder / name).write_text(json.dumps(record))


def _lm_record(seed, bpb, errors=None):
    run = {"seed": seed, "val": {"bits_per_byte": bpb}}
    if errors is not None:
        run["favor_error"] = errors
    return {"runs": [run]}


def _layer(i, favor, uniform, m):
    return {"layer": i, "weights_tv": favor, "uniform_tv": uniform, "n_features": m}


def test_the_checks_are_read_from_their_records_and_said_in_words(tmp_path):
    assert study.baseline_checks(tmp_path)["performer"] is None and study.baseline_check_sentences(tmp_path) == []
    _write(tmp_path, "performer_check_performer.json",
           _lm_record(0, 2.4698, [_layer(0, 0.5, 0.4, 64), _layer(1, 0.3, 0.4, 64)]))
    _write(tmp_path, "performer_check_performer_m256.json",
           _lm_record(0, 2.41, [_layer(0, 0.2, 0.4, 256), _layer(1, 0.1, 0.4, 256)]))
    _write(tmp_path, "lm_study_none.json", {"runs": [_lm_record(1, 2.5)["runs"][0], _lm_record(0, 2.466)["runs"][0]]})
    found = study.baseline_checks(tmp_path)
    assert found["no_mixing"] == 2.466 and found["mamba"] is None
    assert found["performer"]["performer"] == {"bits_per_byte": 2.4698, "seed": 0, "n_features": 64, "layers": 2,
                                               "favor_tv": pytest.approx(0.4), "uniform_tv": pytest.approx(0.4),
                                               "closer_layers": 1}
    assert found["performer"]["performer_m256"]["closer_layers"] == 2
    (sentence,) = study.baseline_check_sentences(tmp_path)
    assert sentence.startswith("Performer in the small LM, seed 0: 64 features 2.4698 bits per byte")
    assert "256 features 2.4100" in sentence and "no mixing at the same seed: 2.4660" in sentence
    floor = found["floor"]
    for name, lr, means in (("recall_study_mamba_d64.json", 0.003, (0.095, 0.073, 0.071)),
                            ("mamba_check_study_mamba_d64.json", 0.001, (0.2, 0.1, 0.3))):
        runs = [{"seed": s, "lr": lr, "test_mean": m} for s, m in enumerate(means)]
        _write(tmp_path, name, {"chosen_lr": lr, "runs": runs})
    found = study.baseline_checks(tmp_path)
    assert found["mamba"]["check"] == {"lr": 0.001, "test_means": [0.2, 0.1, 0.3]}
    mamba = study.baseline_check_sentences(tmp_path)[1]
    above = sum(m > floor for m in (0.2, 0.1, 0.3))
    assert f"at the check's rate 0.001, test accuracy 0.200 (seeds 0.200, 0.100, 0.300; above the floor in {above})" \
        in mamba and f"the guessing floor {floor:.3f}" in mamba


def test_the_checks_conclude_only_when_their_records_say_so(tmp_path):
    """The concluding sentences appear when every feature count leaves a layer farther from softmax than a plain
    average and when no Mamba seed passes the floor, and not otherwise."""
    def performer(m256_layers):
        _write(tmp_path, "performer_check_performer.json",
               _lm_record(0, 2.44, [_layer(0, 0.7, 0.4, 64), _layer(1, 0.2, 0.6, 64)]))
        _write(tmp_path, "performer_check_performer_m256.json", _lm_record(0, 2.49, m256_layers))

    def mamba(check_means):
        for name, lr, means in (("recall_study_mamba_d64.json", 0.003, (0.095, 0.073, 0.071)),
                                ("mamba_check_study_mamba_d64.json", 0.001, check_means)):
            _write(tmp_path, name, {"chosen_lr": lr, "runs": [{"seed": s, "lr": lr, "test_mean": m}
                                                              for s, m in enumerate(means)]})

    performer([_layer(0, 0.6, 0.46, 256), _layer(1, 0.3, 0.58, 256)])
    mamba((0.072, 0.09, 0.062))
    sentences = study.baseline_check_sentences(tmp_path)
    assert len(sentences) == 4
    assert sentences[1].startswith("On seed 0 alone, one run per feature count: at every feature count some layer")
    assert "no lower" in sentences[1] and "did not lower" in sentences[1]
    assert "One seed does not say what holds Performer back" in sentences[1]
    assert "holds Performer back here is" not in " ".join(sentences)
    # the layers' mean: 0.45 against 0.50 at 64 features, 0.45 against 0.52 at 256, FAVOR+ nearer in both
    assert "in the mean over the layers FAVOR+ is nearer to softmax than the plain average (0.45 against 0.50 at " \
           "64 features; 0.45 against 0.52 at 256 features)" in sentences[1]
    assert sentences[3].startswith("At neither rate does any seed of Mamba pass the guessing floor")
    performer([_layer(0, 0.3, 0.46, 256), _layer(1, 0.3, 0.58, 256)])  # 256 features closer in every layer
    mamba((0.072, 0.2, 0.062))  # one seed above the floor
    assert len(study.baseline_check_sentences(tmp_path)) == 2
    assert study.baseline_check_sentences(tmp_path, which="mamba")[0].startswith("Mamba in recall")
    with pytest.raises(ValueError, match="which"):
        study.baseline_check_sentences(tmp_path, which="linear")
