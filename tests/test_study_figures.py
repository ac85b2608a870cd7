"""The study dot plot renders every arm, with labels that never overlap, and its rows hold the records' numbers."""
import math
import statistics

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from gma_teach import designs, study  # noqa: E402
from gma_teach.plots import study_figures  # noqa: E402

T_975 = {1: 12.706, 2: 4.303, 4: 2.776}  # Student-t 97.5% quantiles, from a table


def _record(values, metric="bits_per_byte"):
    return {"runs": [{"seed": seed, "val": {metric: value}} for seed, value in enumerate(values)]}


def _rows(n_arms, label_length=12):
    named = {f"arm {i:02d} " + "x" * (label_length - 7): _record([2.4 + 0.001 * i, 2.41 + 0.0013 * i, 2.43])
             for i in range(n_arms)}
    speeds = {label: 2000.0 + 50 * i for i, label in enumerate(named)}
    return study_figures.arm_rows(named, speeds=speeds)


def _label_boxes(fig):
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    labels = [tick for tick in fig.axes[0].get_yticklabels() if tick.get_text()]
    return [(tick.get_text(), tick.get_window_extent(renderer)) for tick in labels]


@pytest.mark.parametrize("n_arms, label_length", [(3, 10), (11, 55), (20, 30)])
def test_every_arm_label_is_drawn_and_no_two_overlap(n_arms, label_length):
    rows = _rows(n_arms, label_length)
    fig = study_figures.plot_quality_and_speed(rows, title="a study")
    boxes = _label_boxes(fig)
    assert sorted(text for text, _ in boxes) == sorted(row["label"] for row in rows)
    for i, (text_a, box_a) in enumerate(boxes):
        for text_b, box_b in boxes[i + 1:]:
            assert not box_a.overlaps(box_b), (text_a, text_b)
    figure_box = fig.bbox
    for text, box in boxes:  # every label lies inside the figure, not cut at its edge
        assert box.x0 >= figure_box.x0 - 1 and box.y0 >= figure_box.y0 - 1 and box.y1 <= figure_box.y1 + 1, text
    plt.close(fig)


def test_rows_are_drawn_best_first_with_the_interval_of_the_seeds():
    named = {"worse": _record([2.6, 2.7, 2.65]), "better": _record([2.3, 2.35, 2.31, 2.4, 2.33]),
             "one seed": _record([2.5])}
    rows = {row["label"]: row for row in study_figures.arm_rows(named)}
    values = [2.3, 2.35, 2.31, 2.4, 2.33]
    assert rows["better"]["mean"] == pytest.approx(statistics.fmean(values))
    assert rows["better"]["half_width"] == pytest.approx(T_975[4] * statistics.stdev(values) / math.sqrt(5), rel=1e-3)
    assert rows["one seed"]["half_width"] is None and rows["worse"]["speed"] is None
    fig = study_figures.plot_quality_and_speed(list(rows.values()))
    top_to_bottom = [text for text, _ in sorted(_label_boxes(fig), key=lambda item: -item[1].y0)]
    assert top_to_bottom == ["better", "one seed", "worse"]
    fig = study_figures.plot_quality_and_speed(list(rows.values()), lower_is_better=False)
    assert [text for text, _ in sorted(_label_boxes(fig), key=lambda item: -item[1].y0)][0] == "worse"
    plt.close("all")


def test_the_figure_grows_with_the_number_of_arms():
    small = study_figures.plot_quality_and_speed(_rows(3))
    large = study_figures.plot_quality_and_speed(_rows(12))
    assert large.get_figheight() - small.get_figheight() == pytest.approx(9 * study_figures.ROW_INCHES)
    plt.close("all")


def test_the_recorded_lm_study_renders_every_arm():
    named = {arm: record for arm in designs.LM_STUDY["arms"]
             if (record := study.load_arm(designs.LM_STUDY, arm)) is not None}
    if len(named) < 2:
        pytest.skip("the LM study is not recorded here")
    rows = study_figures.arm_rows(named)
    assert len(rows) == len(named)
    fig = study_figures.plot_quality_and_speed(rows)
    assert len(_label_boxes(fig)) == len(named)
    plt.close(fig)


def test_bad_input_is_named():
    with pytest.raises(TypeError, match="named_records"):
        study_figures.arm_rows([_record([1.0])])
    with pytest.raises(ValueError, match="rows"):
        study_figures.plot_quality_and_speed([])
    with pytest.raises(ValueError, match="distinct"):
        study_figures.plot_quality_and_speed(_rows(2) + _rows(1))
    with pytest.raises(ValueError, match="lacks"):
        study_figures.plot_quality_and_speed([{"label": "a", "mean": 1.0}])
    with pytest.raises(ValueError, match="metric"):
        study_figures.plot_quality_and_speed(_rows(2), metric="accuracy!")


def _declared():
    return {"seeds": [0, 1, 2], "family_size": 2, "comparisons": [
        {"arm": "gma", "against": "sdpa", "metric": "val_bits_per_byte", "differences": [0.03, 0.05, 0.07],
         "mean": 0.05, "ci95": [0.0003, 0.0997], "p": 0.02, "p_holm": 0.04, "told_apart": True, "seeds": [0, 1, 2]},
        {"arm": "gma", "against": "linear", "metric": "val_bits_per_byte", "differences": [-0.02, 0.01, 0.04],
         "mean": 0.01, "ci95": [-0.065, 0.085], "p": 0.5, "p_holm": 0.5, "told_apart": False, "seeds": [0, 1, 2]}]}


def test_the_forest_plot_draws_every_seed_and_marks_the_holm_verdict():
    fig = study_figures.plot_declared_comparisons(_declared(), title="declared")
    ax = fig.axes[0]
    rows = {t.get_text(): y for t, y in zip(ax.get_yticklabels(), ax.get_yticks())}
    assert set(rows) == {"gma - sdpa", "gma - linear"} and rows["gma - sdpa"] > rows["gma - linear"]  # first on top
    seeds = [c for c in ax.collections if c.get_offsets().shape[0] == 3]
    drawn = sorted(round(float(x), 4) for c in seeds for x in c.get_offsets()[:, 0])
    assert drawn == sorted([0.03, 0.05, 0.07, -0.02, 0.01, 0.04])
    means = [line for line in ax.lines if len(line.get_xdata()) == 1 and line.get_marker() == "o"]
    faces = {float(line.get_xdata()[0]): line.get_markerfacecolor() for line in means}
    assert faces[0.05] != faces[0.01] and matplotlib.colors.to_hex(faces[0.01]) == "#ffffff"
    plt.close(fig)
    scaled = study_figures.plot_declared_comparisons(_declared(), scale=100, unit="points")
    offsets = sorted(round(float(x), 2) for c in scaled.axes[0].collections for x in c.get_offsets()[:, 0])
    assert offsets[0] == -2.0 and "points" in scaled.axes[0].get_xlabel()
    plt.close(scaled)
    mixed = _declared()
    mixed["comparisons"][1]["metric"] = "active_share"
    with pytest.raises(ValueError, match="several metrics"):
        study_figures.plot_declared_comparisons(mixed)
    assert study_figures.plot_declared_comparisons(mixed, metric="active_share").axes[0].get_yticklabels()
    with pytest.raises(ValueError, match="no declared comparison"):
        study_figures.plot_declared_comparisons(mixed, metric="test_accuracy")
    with pytest.raises(TypeError, match="declared must be a dict"):
        study_figures.plot_declared_comparisons([])
    plt.close("all")


def test_findings_sort_each_declared_comparison_from_the_gma_side():
    settings = {"arms": {"gma": {"mixer": "gma"}, "sdpa": {"mixer": "sdpa"}, "linear": {"mixer": "linear"}}}
    found = study.study_findings(settings, _declared())
    # gma - sdpa is +0.05 bits/byte, told apart: higher bits per byte is worse, so GMA loses
    assert found["losses"] == ["gma vs sdpa, bits/byte: +0.0500 [+0.0003, +0.0997], Holm p 0.040"]
    assert found["wins"] == [] and found["ties"][0].startswith("gma vs linear, bits/byte: +0.0100")
    assert found["family"].endswith("1 told apart") and "seeds 0-2" in found["family"]
    # the other side first (sdpa - gma) is turned round; higher-is-better metrics win with a positive difference
    turned = _declared()
    first = turned["comparisons"][0]
    first.update(arm="sdpa", against="gma", metric="test_accuracy", mean=-0.05, ci95=[-0.0997, -0.0003])
    found = study.study_findings(settings, turned)
    assert found["wins"] == ["gma vs sdpa, test accuracy: +5.00 points [+0.03, +9.97], Holm p 0.040"]


def test_the_findings_summary_names_every_win_and_loss_and_the_smallest_adjusted_p():
    settings = {"arms": {"gma": {"mixer": "gma"}, "sdpa": {"mixer": "sdpa"}, "linear": {"mixer": "linear"}}}
    declared = _declared()
    lines = study.findings_summary(study.study_findings(settings, declared), declared)
    assert lines[0].startswith("2 of 2 declared comparisons recorded") and lines[0].endswith("1 told apart.")
    assert lines[1] == "Told apart, first arm behind: gma vs sdpa, bits/byte: +0.0500 [+0.0003, +0.0997], Holm p 0.040."
    assert lines[2].startswith("Not told apart: 1 comparison(s); the smallest adjusted p, gma vs linear")
    assert len(lines) == 3
    # at a study's second look, the p is already doubled: one told apart at 0.040 rests on nothing, one not told
    # apart at 0.08 (0.04 before doubling) rests on paying for the second look
    looked = {**declared, "looks": 2}
    assert len(study.findings_summary(study.study_findings(settings, looked), looked)) == 3
    resting = {**looked, "comparisons": [{**c, "p_holm": 0.08, "told_apart": False} if c["told_apart"] else c
                                         for c in looked["comparisons"]]}
    marked = study.findings_summary(study.study_findings(settings, resting), resting)
    assert marked[1] == ("The verdict on gma vs sdpa (bits/byte) rests on paying for the 2 looks: its Holm p is "
                         "0.080 with each p times 2, 0.040 without, so a single look would have told it apart.")
    assert len(marked) == 3
