"""An arm's K and routing are read from what the arm is (its declared spec, or the options a recall table's run was
built with), never parsed back out of its name (issue 38): an arm named anything reads the same as one named
``gma_k{K}...`` in the recall table, the findings, the figures' styles and the capacity figure."""
import re

import matplotlib
import pytest
from test_capacity import synthetic_table

from gma_teach import capacity, designs, study
from gma_teach.designs import Arm
from gma_teach.plots import recall

matplotlib.use("Agg")

RENAMED = {"gma_k16": "gma_small", "gma_k64_var_bal": "gma_wide_vb"}
"""Arms of the synthetic table given names that say nothing of their K or routing (the second keeps linear
attention's state at width 64: an equal-state point)."""


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    matplotlib.pyplot.close("all")


def _renamed_table():
    table = synthetic_table()
    table["arms"] = {RENAMED.get(arm, arm): runs for arm, runs in table["arms"].items()}
    for comparison in table["comparisons"]:
        comparison["arm"] = RENAMED.get(comparison["arm"], comparison["arm"])
    return table


def _rename(text: str) -> str:
    for old, new in RENAMED.items():
        text = re.sub(rf"\b{old}\b", new, text)
    return text


def test_size_and_routing_come_from_the_spec():
    assert capacity.gma_size("gma_small", Arm("gma", {"n_components": 16})) == (16, False)
    remedy = {"mixer": "gma", "options": {"n_components": 16, **designs.BALANCE_REMEDY}}  # a record's "spec"
    assert capacity.gma_size("anything", remedy) == (16, True)
    assert capacity.gma_routing("anything", remedy) == "the balance remedy"
    assert capacity.gma_routing("x", Arm("gma", {"n_components": 8, **designs.VARIANCE_AND_BALANCE})) == (
        "variance + balance")
    assert capacity.gma_routing("x", Arm("gma", {"n_components": 8, "balance_weight": 0.05})) == (
        "routing balance_weight=0.05")
    assert capacity.gma_size("gma_k8", Arm("linear")) is None  # the name says GMA, the spec says otherwise
    with pytest.raises(TypeError, match="spec of arm 'gma_k8'"):
        capacity.gma_size("gma_k8", None)  # a name alone says nothing: K is read from what the arm is
    with pytest.raises(ValueError, match="leaves K to its study's setting"):
        capacity.gma_size("gma", Arm("gma"))


def test_the_findings_read_k_from_each_run_not_its_name():
    original, renamed = synthetic_table(), _renamed_table()
    assert capacity.recall_findings(renamed) == [_rename(line) for line in capacity.recall_findings(original)]
    assert capacity.when_to_choose_gma(renamed) == [_rename(line) for line in capacity.when_to_choose_gma(original)]
    floor, floor_renamed = capacity.default_routing_floor(original), capacity.default_routing_floor(renamed)
    assert floor_renamed["sentence"] == floor["sentence"]
    assert {w: [_rename(arm) for arm in f["arms"]] for w, f in floor["widths"].items()} == {
        w: f["arms"] for w, f in floor_renamed["widths"].items()}
    assert "gma_small" in floor_renamed["widths"][64]["arms"]
    points = capacity.equal_state_points(renamed)
    assert [_rename(p["arm"]) for p in capacity.equal_state_points(original)] == [p["arm"] for p in points]
    assert "gma_wide_vb" in [p["arm"] for p in points]


def test_the_figures_style_each_arm_by_its_run():
    table = _renamed_table()
    small, wide = table["arms"]["gma_small"][64], table["arms"]["gma_wide_vb"][64]
    assert recall.arm_style("gma_small", small) == recall.arm_style("any name", Arm("gma", {"n_components": 16}))
    assert recall.arm_style("gma_wide_vb", wide) == {"color": recall.gma_k_color(64), "ls": "-", "marker": "s"}
    assert recall.arm_style("gma_k64_var_bal")["marker"] == "x"  # a name alone is never read for K
    assert recall.arm_style("fast", Arm("performer", {"n_features": 64})) == recall.arm_style("performer")
    for plot in (recall.plot_accuracy_by_pairs, recall.plot_recall_frontier):
        legends = [[text.get_text() for text in legend.get_texts()]
                   for figure in (plot(synthetic_table()), plot(table))
                   for legend in (figure.legends or [figure.axes[0].get_legend()])]
        assert legends[0] == legends[1]  # GMA's arms grouped by routing, whatever their names


def test_the_capacity_figure_reads_each_arms_spec():
    runs = [{"seed": 0, "retrieval_accuracy": {"20": 0.9, "40": 0.5}, "loss": {"20": 0.01, "40": 0.1},
             "state_bytes": {"20": 33_284, "40": 33_284}, "steps": {"20": 100, "40": 100},
             "stopped": {"20": "target", "40": "target"}}]
    curves = capacity.capacity_curves({"features": {"runs": runs}})
    figure = recall.plot_capacity_curves(curves, n_slots=32, at_pairs=40,
                                         specs={"features": Arm("performer", {"n_features": 128})})
    color = recall.arm_style("performer")["color"]
    assert {line.get_linestyle() for line in figure.axes[0].get_lines() if line.get_color() == color} == {"--", "None"}


def test_the_recall_table_carries_the_options_each_arm_was_built_with(tmp_path):
    tiny = designs.RECALL_STUDY.with_changes(
        name="tiny_k", setting=dict(seq_len=16, vocab_size=32, kv_pairs=(2, 3), n_train=32, n_val=8, n_test=8,
                                    steps=2, warmup=1, batch_size=8, n_heads=1),
        arms={"gma_small": Arm("gma", {"n_components": 16, **designs.BALANCE_REMEDY}), "linear": Arm("linear")},
        primary=[("gma_small", "linear")], learning_rates=(1e-3,), seeds=(0, 1), widths=(16,), reruns=None)
    for arm in tiny.arms:
        study.run_arm(tiny, arm, width=16, folder=tmp_path, command="test")
    table = study.recall_table(tmp_path, tiny)
    entry = table["arms"]["gma_small"][16]
    assert entry["options"] == {"n_components": 16, **designs.BALANCE_REMEDY}
    assert capacity.gma_size("gma_small", entry) == (16, True)
    assert recall.arm_style("gma_small", entry)["color"] == recall.gma_k_color(16)
