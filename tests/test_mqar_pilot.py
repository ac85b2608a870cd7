"""The MQAR pilot (``designs.MQAR_PILOT``): its declaration, the per-count validation curve a recall run records,
and the reader of its curves (``capacity.pilot_curves``, ``pilot_learned``, ``pilot_sentences``,
``plots.recall.plot_pilot_curves``) on a synthetic record."""
import json

import matplotlib
import pytest

from gma_teach import capacity, designs, study
from gma_teach.plots.recall import plot_pilot_curves

matplotlib.use("Agg")

STEPS = [500, 1000, 1500, 2000]


def _record(arm: str, by_count: list[dict], *, lr=1e-3, seed=0) -> dict:
    """A run record as the runner writes it (JSON keys as strings), one run with a per-count curve."""
    pooled = [sum(int(n) * a for n, a in point.items()) / sum(int(n) for n in point) for point in by_count]
    run = {"arm": arm, "width": 64, "lr": lr, "seed": seed, "val_mean": sum(by_count[-1].values()) / 3,
           "curve": {"steps": STEPS, "val_accuracy": pooled, "val_by_count": by_count}}
    return json.loads(json.dumps({"study": "mqar_pilot", "arm": arm, "width": 64, "chosen_lr": lr, "runs": [run]}))


def _records() -> dict:
    learns = [{"8": 0.1, "16": 0.06, "32": 0.03}, {"8": 0.5, "16": 0.4, "32": 0.3},
              {"8": 0.9, "16": 0.8, "32": 0.7}, {"8": 0.98, "16": 0.96, "32": 0.94}]
    flat = [{"8": 0.12, "16": 0.06, "32": 0.03}] * 3 + [{"8": 0.2, "16": 0.1, "32": 0.05}]
    return {"sdpa": _record("sdpa", learns), "linear": _record("linear", flat)}


def test_the_pilot_is_declared_as_a_pilot_in_the_regime_the_issue_names():
    pilot = designs.MQAR_PILOT
    assert designs.STUDIES["mqar-pilot"] is pilot and "MQAR_PILOT" in designs.__all__
    assert pilot.experiment == "recall" and pilot.widths == (64,) and pilot.seeds == (0,)
    assert set(pilot.arms) == {"sdpa", "linear"} and pilot.primary == () and "pilot" in pilot.exploratory
    setting = pilot.setting
    assert (setting["seq_len"], setting["vocab_size"], tuple(setting["kv_pairs"])) == (128, 4096, (8, 16, 32))
    assert (setting["n_layers"], setting["n_heads"], setting["batch_size"], setting["steps"]) == (2, 2, 64, 6000)
    assert setting["eval_every"] and pilot.learning_rates == (1e-3,)
    others = [dict(s.setting["data_seeds"]) for s in designs.STUDIES.values()
              if s is not pilot and "data_seeds" in s.setting]
    assert all(set(dict(setting["data_seeds"]).values()).isdisjoint(seeds.values()) for seeds in others)
    for arm in pilot.arms:
        config = study.resolve(pilot, arm, 64)
        assert config.sizes["n_heads"] == 2 and config.sizes["d_model"] == 64


def test_a_recall_run_with_eval_every_records_each_counts_validation_curve(tmp_path):
    tiny = designs.MQAR_PILOT.with_changes(
        name="tiny_pilot", setting=dict(seq_len=16, vocab_size=32, kv_pairs=(2, 4), n_train=32, n_val=8, n_test=8,
                                        batch_size=8, steps=4, warmup=1, eval_every=2))
    record = study.run_arm(tiny, "linear", width=64, folder=tmp_path, command="test")
    curve = record["runs"][0]["curve"]
    assert curve["steps"] == [2, 4] and len(curve["val_by_count"]) == 2
    assert set(curve["val_by_count"][-1]) == {2, 4}
    last = curve["val_by_count"][-1]
    assert curve["val_accuracy"][-1] == pytest.approx((2 * last[2] + 4 * last[4]) / 6)  # pooled over the queries
    assert record["runs"][0]["val_accuracy"] == pytest.approx(last)  # the last evaluation is the final weights'
    saved = study.load_arm(tiny, "linear", tmp_path, width=64)
    verdict = capacity.pilot_learned({"linear": saved})["linear"]
    assert verdict["last_step"] == 4 and verdict["last"] == pytest.approx(sum(last.values()) / 2)


def test_pilot_curves_reads_each_count_and_their_mean():
    curves = capacity.pilot_curves(_records())
    sdpa = curves["sdpa"]
    assert sdpa["steps"] == STEPS and sdpa["kv_pairs"] == [8, 16, 32] and sdpa["lr"] == 1e-3
    assert sdpa["by_count"][32] == [0.03, 0.3, 0.7, 0.94]
    assert sdpa["mean"][1] == pytest.approx(0.4) and sdpa["pooled"][0] == pytest.approx((0.8 + 0.96 + 0.96) / 56)


def test_pilot_learned_applies_the_stated_criterion():
    verdicts = capacity.pilot_learned(_records())
    assert verdicts["sdpa"]["learned"] and verdicts["sdpa"]["first_step"] == 1500  # mean 0.4 at 1000, 0.8 at 1500
    assert verdicts["sdpa"]["by_count_last"] == {8: 0.98, 16: 0.96, 32: 0.94}
    linear = verdicts["linear"]
    assert not linear["learned"] and linear["first_step"] is None and linear["last_step"] == 2000
    assert linear["best"] == pytest.approx(0.35 / 3) and linear["best_step"] == 2000
    assert capacity.pilot_learned(_records(), threshold=0.35)["sdpa"]["first_step"] == 1000
    assert capacity.pilot_learned(_records(), threshold=0.1)["linear"]["learned"]
    sentences = capacity.pilot_sentences(_records())
    assert sentences[0].startswith("sdpa learned") and "step 1,500" in sentences[0] and "0.980 / 0.960 / 0.940" in (
        sentences[0])
    assert sentences[1].startswith("linear did not learn within 2,000 steps") and "best 0.117" in sentences[1]
    # one seed at one rate, said so; the task is never called unlearnable
    assert "on seed 0 at learning rate 0.001" in sentences[0] and "on seed 0 at learning rate 0.001" in sentences[1]
    assert "One seed at one rate does not show that the task cannot be learned here" in sentences[1]
    assert "not learnable" not in " ".join(sentences)
    assert "guessing floor" not in sentences[1]  # it ends at 0.2 / 0.1 / 0.05, above 1/8, 1/16 and 1/32
    below = {**_records(), "linear": _record("linear", [{"8": 0.2, "16": 0.1, "32": 0.05}] * 3
                                                       + [{"8": 0.13, "16": 0.05, "32": 0.03}])}
    words = capacity.pilot_sentences(below)[1]
    assert "below the guessing floor 1/n at 16, 32 pairs (1/16 = 0.062, 1/32 = 0.031)" in words
    assert "a failure to optimize at this rate, not to what its state can hold" in words


def test_the_reader_names_bad_input():
    with pytest.raises(TypeError, match="records must be a mapping"):
        capacity.pilot_curves([_records()["sdpa"]])
    with pytest.raises(ValueError, match="records must hold at least one arm"):
        capacity.pilot_curves({})
    with pytest.raises(TypeError, match=r"records\['sdpa'\] must be a run record"):
        capacity.pilot_curves({"sdpa": 3})
    with pytest.raises(ValueError, match="one run of seed 1"):
        capacity.pilot_curves(_records(), seed=1)
    without = _records()["sdpa"]
    del without["runs"][0]["curve"]["val_by_count"]
    with pytest.raises(ValueError, match="no per-count validation curve"):
        capacity.pilot_curves({"sdpa": without})
    with pytest.raises(ValueError, match=r"threshold must be in \(0, 1\)"):
        capacity.pilot_learned(_records(), threshold=1.0)
    with pytest.raises(TypeError, match="threshold"):
        capacity.pilot_learned(_records(), threshold="0.5")


def test_plot_pilot_curves_draws_each_arm_the_floors_and_the_criterion():
    fig = plot_pilot_curves(_records())
    axes = fig.axes
    assert len(axes) == 4 and axes[0].get_title() == "8 pairs" and axes[-1].get_title() == "mean over the counts"
    labels = [line.get_label() for line in axes[0].get_lines()]
    assert labels[:2] == ["sdpa", "linear"]
    floors = [line.get_ydata()[0] for ax in axes for line in ax.get_lines() if line.get_label().startswith("guessing")]
    assert floors == pytest.approx([1 / 8, 1 / 16, 1 / 32, capacity.mean_guessing_floor([8, 16, 32])])
    assert any(line.get_label() == "learned: mean above 0.5" for line in axes[-1].get_lines())
    assert list(axes[2].get_lines()[0].get_ydata()) == [0.03, 0.3, 0.7, 0.94]
    with pytest.raises(ValueError, match="axes must hold one axis per kv-pair count"):
        plot_pilot_curves(_records(), axes=axes[:2])
    matplotlib.pyplot.close(fig)


def test_readme_s_pilot_sentence_says_what_the_records_hold():
    """README's "Running the studies" says the pilot ran one seed at one rate and that linear attention ends below
    the guessing floor at every count; the recorded pilot must say the same, or the sentence must change."""
    from pathlib import Path

    readme = " ".join((Path(__file__).resolve().parents[1] / "README.md").read_text().split())
    assert "Linear attention ends below the guessing floor 1/n at every count" in readme
    assert "one seed at one rate does not show the task cannot be learned here" in readme
    pilot = {arm: study.load_arm(designs.MQAR_PILOT, arm, width=64) for arm in designs.MQAR_PILOT.arms}
    if any(record is None for record in pilot.values()):
        pytest.skip("the pilot's records are not in this copy")
    assert len(designs.MQAR_PILOT.seeds) == 1 and len(designs.MQAR_PILOT.learning_rates) == 1
    linear = capacity.pilot_learned(pilot)["linear"]
    assert not linear["learned"]
    assert all(accuracy < 1 / int(n) for n, accuracy in linear["by_count_last"].items())
