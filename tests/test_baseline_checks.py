"""The two checks of baselines that learn nothing (designs.PERFORMER_CHECK, designs.MAMBA_CHECK): declared as
studies of the one runner, each arm the model it names."""
from __future__ import annotations

from gma_teach import designs
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
