"""gma_teach.plots.recall: the chapter-12 figures render from synthetic tables of the recall study's format, draw
every arm with the table's numbers, and refuse malformed input."""
import statistics

import matplotlib
import numpy as np
import pytest
from test_capacity import KV, synthetic_table

from gma_teach import capacity, designs
from gma_teach.designs import VARIANCE_AND_BALANCE, Arm
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
    for ax, width in zip(axes, (64, 128)):
        lines = _lines_by_label(ax)
        assert set(lines) == set(table["arms"]) | {"1/n"}
        for arm, line in lines.items():
            if arm == "1/n":  # the guessing floor at each count
                np.testing.assert_allclose(line.get_ydata(), [1 / n for n in table["design"]["kv_pairs"]])
                continue
            by_count = table["arms"][arm][width]["by_count"]
            assert list(line.get_xdata()) == list(by_count)
            np.testing.assert_allclose(line.get_ydata(), [statistics.fmean(v) for v in by_count.values()])
        faint = [line for line in ax.get_lines() if line.get_label().startswith("_")]
        seeds = sum(len(values) for by_width in table["arms"].values() for values in by_width[width]["by_count"]
                    .values())
        assert sum(len(line.get_xdata()) for line in faint) == seeds  # one faint point per seed and count


def test_accuracy_by_pairs_groups_gma_in_a_small_legend_with_k_on_a_colour_bar():
    table = synthetic_table()
    fig = recall.plot_accuracy_by_pairs(table)
    (legend,) = fig.legends
    texts = [text.get_text() for text in legend.get_texts()]
    others = [arm for arm, by_width in table["arms"].items()
              if capacity.gma_size(arm, next(iter(by_width.values()))) is None]
    assert texts == ["sdpa", "linear", "performer", "mamba", "window", "local_gma", "decay_linear", "decay_gma",
                     "GMA, default routing (every K)", "GMA, variance + balance (K: colour bar)",
                     "guessing one of the n values: 1/n"]
    assert len(texts) == len(others) + 3 <= 12
    (bar,) = [ax for ax in fig.axes if not ax.get_title()]
    assert [tick.get_text() for tick in bar.get_yticklabels()] == ["8", "16", "32", "64", "128", "256"]
    # every curve a legend entry stands for has its own colour; the changed routing's greens differ for every K
    lines = _lines_by_label(fig.axes[0])
    remedy = [lines[f"gma_k{k}_var_bal"].get_color() for k in (8, 16, 32, 64, 128, 256)]
    default = {lines[f"gma_k{k}"].get_color() for k in (8, 16, 32, 64, 128, 256)}
    named = [lines[arm].get_color() for arm in others]
    assert len(set(remedy)) == 6 and len(default) == 1
    assert len(set(named) | set(remedy) | default) == len(named) + 6 + 1
    assert remedy == [recall.gma_k_color(k) for k in (8, 16, 32, 64, 128, 256)]


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


def _text_boxes(fig, ax):
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    return [(text.get_text(), matplotlib.text.Text.get_window_extent(text, renderer)) for text in ax.texts]


def test_the_frontier_places_every_arm_at_its_state_and_accuracy():
    table = synthetic_table()
    fig = recall.plot_recall_frontier(table)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log"
    labels = {text.get_text(): text.xy for text in ax.texts}
    for arm, by_width in table["arms"].items():
        for width, entry in by_width.items():
            point = (entry["state_bytes"], statistics.fmean(entry["test_mean"]))
            if capacity.gma_size(arm, entry) is None:
                assert labels[f"{arm} (d={width})"] == pytest.approx(point)
    curves = _lines_by_label(ax)
    floor = [line for name, line in curves.items() if name.startswith("guessing")]
    assert len(floor) == 1 and floor[0].get_ydata()[0] == pytest.approx(capacity.mean_guessing_floor(KV))
    gma = {name: line for name, line in curves.items() if name.startswith("GMA")}
    assert set(gma) == {f"GMA, {r}, d={w} (K = 8 to 256)" for w in (64, 128)
                        for r in ("default routing", "variance + balance")}
    assert len({line.get_color() for line in gma.values()}) == 4  # four curves, four colours
    curve = gma["GMA, default routing, d=64 (K = 8 to 256)"]
    ks = (8, 16, 32, 64, 128, 256)
    expected = sorted((table["arms"][f"gma_k{k}"][64]["state_bytes"],
                       statistics.fmean(table["arms"][f"gma_k{k}"][64]["test_mean"])) for k in ks)
    np.testing.assert_allclose(np.column_stack([curve.get_xdata(), curve.get_ydata()]), expected)
    for width in (64, 128):  # the changed routing's curves are labelled with K at both ends
        for k in (8, 256):
            entry = table["arms"][f"gma_k{k}_var_bal"][width]
            assert (entry["state_bytes"], statistics.fmean(entry["test_mean"])) in [
                pytest.approx(text.xy) for text in ax.texts if text.get_text() == f"K={k}"]
    linear = [line for line in ax.get_lines() if line.get_label().startswith("_") and len(line.get_xdata()) == 2
              and line.get_linestyle() == "-"]
    assert any(sorted(line.get_xdata()) == sorted(table["arms"]["linear"][w]["state_bytes"] for w in (64, 128))
               for line in linear)  # linear attention's two widths joined


@pytest.mark.parametrize("recorded", [False, True])
def test_no_two_labels_of_the_frontier_overlap(recorded):
    if recorded:
        from test_capacity import _recorded_table

        table = _recorded_table()
    else:
        table = synthetic_table()
    fig = recall.plot_recall_frontier(table)
    ax = fig.axes[0]
    boxes = _text_boxes(fig, ax)
    assert len(boxes) >= 10
    frame = ax.get_window_extent(fig.canvas.get_renderer())
    for index, (text, box) in enumerate(boxes):
        assert frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1, text
        for other, other_box in boxes[index + 1:]:
            assert not box.overlaps(other_box), (text, other)


def test_the_frontier_with_one_width_and_no_arm():
    one = synthetic_table(with_extras=False, widths=(64,))
    ax = recall.plot_recall_frontier(one).axes[0]
    assert "linear (d=64)" in {text.get_text() for text in ax.texts}
    empty = {"design": one["design"], "arms": {}, "comparisons": []}
    ax = recall.plot_recall_frontier(empty).axes[0]
    assert any(text.get_text() == "no arm recorded" for text in ax.texts)


def test_arm_styles():
    def gma(k, **routing):
        return Arm("gma", {"n_components": k, **routing})

    small = recall.arm_style("a", gma(8, **VARIANCE_AND_BALANCE))
    large = recall.arm_style("b", gma(256, **VARIANCE_AND_BALANCE))
    assert small["color"] != large["color"] and small["ls"] == "-" and small["marker"] == "s"
    assert recall.arm_style("a", gma(8)) == recall.arm_style("b", gma(256)) == {
        "color": recall.DEFAULT_ROUTING_COLOR, "ls": ":", "marker": "o"}
    greens = [recall.gma_k_color(k) for k in (8, 16, 32, 64, 128, 256)]
    lightness = [sum(matplotlib.colors.to_rgb(color)) for color in greens]
    assert lightness == sorted(lightness, reverse=True)  # darker for larger K
    assert min(a - b for a, b in zip(lightness, lightness[1:])) > 0.1  # and each step visible
    styles = {arm: recall.arm_style(arm)["color"] for arm in ("sdpa", "linear", "performer", "mamba", "window",
                                                             "local_gma", "decay_linear", "decay_gma")}
    assert len(set(styles.values()) | set(greens) | {recall.DEFAULT_ROUTING_COLOR}) == len(styles) + 7
    assert recall.arm_style("decay_gma")["ls"] == "--" and recall.arm_style("local_gma")["ls"] == "-."
    assert recall.arm_style("mystery")["marker"] == "x"
    with pytest.raises(TypeError, match="arm must be an arm name"):
        recall.arm_style(8)
    with pytest.raises(ValueError, match="k must be a positive int"):
        recall.gma_k_color(0)


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


def test_the_guessing_floor_lies_under_every_arm():
    """An arm that recalls at the floor (Performer did) stays in view: the floor is drawn beneath every arm."""
    fig = recall.plot_accuracy_by_pairs(synthetic_table())
    for ax in fig.axes:
        lines = ax.get_lines()
        floors = [line for line in lines if line.get_label() == "1/n"]
        if floors:
            arms = [line for line in lines if line.get_label() != "1/n"]
            assert all(floors[0].get_zorder() < line.get_zorder() for line in arms)


def _capacity_record(accuracy: dict, state: int) -> dict:
    """A capacity record of two seeds with the given mean accuracy at each S (the seeds 0.02 apart)."""
    runs = []
    for seed, shift in ((0, -0.01), (1, 0.01)):
        values = {str(n): min(1.0, a + shift) for n, a in accuracy.items()}
        runs.append({"seed": seed, "retrieval_accuracy": values,
                     "loss": {n: 0.5 * (1 - a) + 1e-4 for n, a in values.items()},
                     "state_bytes": dict.fromkeys(values, state), "steps": dict.fromkeys(values, 3000),
                     "stopped": dict.fromkeys(values, "max_steps")})
    return {"runs": runs}


def test_the_capacity_figure_draws_arms_predictions_and_state():
    sizes = (20, 60, 120, 200)
    records = {"linear": _capacity_record({n: min(1.0, 64 / n) * 0.9 for n in sizes}, 16_640),
               "gma_k64_remedy": _capacity_record({n: 0.3 for n in sizes}, 16_640),
               "performer_m128": _capacity_record({n: 0.2 for n in sizes}, 33_284),
               "sdpa": _capacity_record({n: 0.99 for n in sizes}, 30_976)}
    curves = capacity.capacity_curves(records)
    fig = recall.plot_capacity_curves(curves, published={"linear": {60: 0.025, 120: 0.23}})
    accuracy_ax, loss_ax, state_ax = fig.axes[:3]
    labels = fig.legends[0].get_texts()
    texts = {t.get_text() for t in labels}
    assert {"linear (2 seeds)", "sdpa (2 seeds)", "published: linear"} <= texts
    assert any(t.startswith("perfect router, K = 64") for t in texts)
    assert any(t.startswith("random router, K = 64") for t in texts)
    perfect = next(line for line in accuracy_ax.get_lines() if line.get_label().startswith("perfect"))
    assert list(perfect.get_ydata()) == pytest.approx([1.0, 1.0, 64 / 120, 64 / 200])
    assert loss_ax.get_yscale() == "log" and state_ax.get_xscale() == "log"
    notes = {t.get_text() for t in state_ax.texts}
    assert notes == set(records)  # every arm labelled at its state
    declared = designs.CAPACITY_STUDY.arms  # each arm's look is read from its declared spec
    color = recall.arm_style("performer")["color"]
    assert {line.get_linestyle() for line in accuracy_ax.get_lines() if line.get_color() == color} == {"--", "None"}
    styles = {arm: recall._capacity_style(arm, declared[arm]) for arm in ("performer_m64", "performer_m512")}
    assert styles["performer_m64"]["ls"] != styles["performer_m512"]["ls"]
    with pytest.raises(ValueError, match="curves"):
        recall.plot_capacity_curves({})
    matplotlib.pyplot.close(fig)
