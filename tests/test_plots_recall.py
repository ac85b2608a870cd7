"""gma_teach.plots.recall: the chapter-12 figures render from synthetic tables of the recall study's format, draw
every arm with the table's numbers, and refuse malformed input."""
import statistics

import matplotlib
import numpy as np
import pytest
from test_capacity import synthetic_table

from gma_teach import capacity
from gma_teach.plots import recall

matplotlib.use("Agg")


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


def _lines_by_label(ax):
    return {line.get_label(): line for line in ax.get_lines() if not line.get_label().startswith("_")}


def test_accuracy_by_pairs_draws_every_arm_at_every_width():
    table = synthetic_table()
    fig = recall.plot_accuracy_by_pairs(table)
    axes = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title() for ax in axes] == ["width 64", "width 128"]
    legend = fig.legends[0]
    assert [text.get_text() for text in legend.get_texts()] == list(table["arms"])
    for ax, width in zip(axes, (64, 128)):
        lines = _lines_by_label(ax)
        assert set(lines) == set(table["arms"])
        for arm, line in lines.items():
            by_count = table["arms"][arm][width]["by_count"]
            assert list(line.get_xdata()) == list(by_count)
            np.testing.assert_allclose(line.get_ydata(), [statistics.fmean(v) for v in by_count.values()])
        faint = [line for line in ax.get_lines() if line.get_label().startswith("_")]
        seeds = sum(len(values) for by_width in table["arms"].values() for values in by_width[width]["by_count"]
                    .values())
        assert sum(len(line.get_xdata()) for line in faint) == seeds  # one faint point per seed and count


def test_accuracy_by_pairs_on_given_axes_and_missing_width():
    table = synthetic_table(with_extras=False, widths=(64,))
    from gma_teach.plots import new_figure

    fig, grid = new_figure(2)
    assert recall.plot_accuracy_by_pairs(table, widths=[64, 256], axes=grid[0]) is fig
    assert any("no arm recorded at width 256" in text.get_text() for text in grid[0][1].texts)
    with pytest.raises(ValueError, match="one axis per width"):
        recall.plot_accuracy_by_pairs(table, widths=[64], axes=grid[0])
    with pytest.raises(TypeError, match="table must be a dict"):
        recall.plot_accuracy_by_pairs("recall_study.json")


def test_the_frontier_places_every_arm_at_its_state_and_accuracy():
    table = synthetic_table()
    fig = recall.plot_recall_frontier(table)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log"
    labels = {text.get_text(): text.xy for text in ax.texts}
    for arm, by_width in table["arms"].items():
        for width, entry in by_width.items():
            point = (entry["state_bytes"], statistics.fmean(entry["test_mean"]))
            if capacity.gma_size(arm) is None:
                assert labels[f"{arm} (d={width})"] == pytest.approx(point)
    curves = _lines_by_label(ax)
    assert set(curves) == {f"GMA, K sweep, d={w}" + r for w in (64, 128) for r in ("", " (remedy)")}
    curve = curves["GMA, K sweep, d=64"]
    ks = (8, 16, 32, 64, 128, 256)
    expected = sorted((table["arms"][f"gma_k{k}"][64]["state_bytes"],
                       statistics.fmean(table["arms"][f"gma_k{k}"][64]["test_mean"])) for k in ks)
    np.testing.assert_allclose(np.column_stack([curve.get_xdata(), curve.get_ydata()]), expected)
    linear = [line for line in ax.get_lines() if line.get_label().startswith("_") and len(line.get_xdata()) == 2
              and line.get_linestyle() == "-"]
    assert any(sorted(line.get_xdata()) == sorted(table["arms"]["linear"][w]["state_bytes"] for w in (64, 128))
               for line in linear)  # linear attention's two widths joined


def test_the_frontier_with_one_width_and_no_arm():
    one = synthetic_table(with_extras=False, widths=(64,))
    ax = recall.plot_recall_frontier(one).axes[0]
    assert "linear (d=64)" in {text.get_text() for text in ax.texts}
    empty = {"design": one["design"], "arms": {}, "comparisons": []}
    ax = recall.plot_recall_frontier(empty).axes[0]
    assert any(text.get_text() == "no arm recorded" for text in ax.texts)


def test_arm_styles():
    small, large = recall.arm_style("gma_k8"), recall.arm_style("gma_k256")
    assert small["color"] != large["color"] and small["ls"] == "-"
    assert recall.arm_style("gma_k64_remedy")["ls"] == "--"
    assert recall.arm_style("gma_k64_remedy")["color"] == recall.arm_style("gma_k64")["color"]
    styles = {arm: recall.arm_style(arm)["color"] for arm in ("sdpa", "linear", "performer", "mamba", "window",
                                                             "local_gma", "decay_linear", "decay_gma")}
    assert len(set(styles.values())) == len(styles)
    assert recall.arm_style("mystery")["color"] == "#888888"
    with pytest.raises(TypeError, match="arm must be an arm name"):
        recall.arm_style(8)


def test_exact_capacity_draws_the_demo_beside_the_formula():
    n_slots = 8
    pairs = list(range(1, 25))
    demo = [capacity.routed_recall(n, n_slots) for n in pairs]
    formula = [min(1.0, n_slots / n) for n in pairs]
    fig = recall.plot_exact_capacity(pairs, {"no forgetting": demo}, n_slots=n_slots,
                                     predicted={"no forgetting": formula})
    lines = _lines_by_label(fig.axes[0])
    np.testing.assert_allclose(lines["no forgetting (GMA demo)"].get_ydata(), demo)
    np.testing.assert_allclose(lines["no forgetting (formula)"].get_ydata(), formula)
    assert lines["no forgetting (GMA demo)"].get_color() == lines["no forgetting (formula)"].get_color()
    assert any(text.get_text() == f"K = {n_slots}" for text in fig.axes[0].texts)
    with pytest.raises(ValueError, match=r"measured\['a'\] must have one value per pair count \(24\)"):
        recall.plot_exact_capacity(pairs, {"a": demo[:3]}, n_slots=n_slots)
    with pytest.raises(TypeError, match="measured must be a non-empty dict"):
        recall.plot_exact_capacity(pairs, {}, n_slots=n_slots)
    with pytest.raises(ValueError, match="n_pairs must be one-dimensional"):
        recall.plot_exact_capacity([[1, 2]], {"a": [[1, 2]]}, n_slots=n_slots)
