"""gma_teach.plots.results: numbers read from records are the records' numbers, intervals are Student-t
intervals, tokenizers never mix on a per-token axis, and every figure says what it could not draw."""
import math

import matplotlib
import pytest

from gma_teach import experiments, stats
from gma_teach.plots import results

matplotlib.use("Agg")


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


def lm_record(mixer, values, *, k=None, tokenizer="gpt2", bpb=None, speed=1000.0, options=None, routing=None):
    """A study arm's record, as gma_teach.study writes it."""
    runs = []
    for seed, loss in enumerate(values):
        val = {"loss": loss, "perplexity": math.exp(loss)}
        if bpb is not None:
            val["bits_per_byte"] = bpb[seed]
        run = {"seed": seed, "val": val, "tokens_per_second": speed + seed, "tokenizer": tokenizer,
               "history": {"steps": [100, 200]}}
        if routing is not None:
            run["routing"] = routing[seed]
        runs.append(run)
    spec = {"mixer": mixer, **({"n_components": k} if k else {}), **({"gma_options": options} if options else {})}
    return {"study": "lm_study", "arm": mixer, "spec": spec, "config": {"n_steps": 200}, "runs": runs,
            "hardware": {"cpu": "test CPU", "logical_cores": 2, "torch_threads": 1}}


def classify_record(mixer, accuracies, k=None):
    """A record as python -m gma_teach.experiments writes it."""
    return {"experiment": "listops", "mixer": mixer, "n_components": k,
            "config": {"epochs": 4, "mixer_options": {"n_components": k} if k else {}},
            "runs": [{"seed": seed, "test": {"accuracy": accuracy}, "tokens_per_second": 100.0}
                     for seed, accuracy in enumerate(accuracies)],
            "hardware": "CPU: test"}


def test_error_bars_are_the_student_t_interval():
    scipy_stats = pytest.importorskip("scipy.stats")  # scikit-learn brings scipy: an independent reference
    for n in (2, 3, 5, 12, 31, 40, 200):
        values = [math.sin(1.7 * i) + 0.1 * i for i in range(n)]
        mean, half = stats.mean_half_width(values)
        low, high = scipy_stats.t.interval(0.95, n - 1, loc=scipy_stats.tmean(values), scale=scipy_stats.sem(values))
        assert math.isclose(mean, (low + high) / 2, rel_tol=1e-12)
        assert math.isclose(half, (high - low) / 2, rel_tol=1e-4), n
    assert stats.mean_half_width([3.0]) == (3.0, None)
    with pytest.raises(ValueError, match="at least one"):
        stats.mean_half_width([])


def test_values_units_and_labels():
    record = classify_record("gma", [0.3, 0.4], k=32)
    assert results.record_values(record, "test_accuracy") == pytest.approx([30.0, 40.0])
    assert results.record_values(record, "bits_per_byte") == []
    assert results.record_label(record) == "gma K=32"
    remedy = lm_record("gma", [5.0], k=64, options={"balance_weight": 0.01})
    assert results.record_label(remedy) == "gma K=64 (balance_weight=0.01)"
    assert results.record_label({**remedy, "label": "gma, balanced"}) == "gma, balanced"
    assert results.hardware_line(remedy) == "test CPU, 2 cores, 1 torch thread(s)"
    assert results.hardware_line(record) == "CPU: test"
    assert results.tokenizer_of(remedy) == "gpt2"
    with pytest.raises(ValueError, match="metric must be one of"):
        results.record_values(record, "accuracy")
    with pytest.raises(TypeError, match="records must be"):
        results.summarize("lm_gma.json", "val_loss")


def test_summary_matches_the_records():
    records = [lm_record("gma", [5.0, 5.2, 5.1], k=64, bpb=[1.5, 1.6, 1.55]), lm_record("sdpa", [4.8], bpb=[1.4])]
    rows = results.summarize(records, "bits_per_byte")
    assert [row["label"] for row in rows] == ["gma K=64", "sdpa"]
    assert rows[0]["mean"] == pytest.approx(1.55) and rows[0]["n_seeds"] == 3
    assert rows[0]["half_width"] == pytest.approx(4.303 * 0.05 / math.sqrt(3), rel=1e-3)
    assert rows[1]["half_width"] is None and rows[0]["tokens_per_second"] == pytest.approx(1001.0)
    measured = results.summarize(records, "bits_per_byte", speeds={"sdpa": 2500.0})  # measured together
    assert measured[1]["tokens_per_second"] == 2500.0 and measured[0]["tokens_per_second"] == pytest.approx(1001.0)
    table = results.format_summary(rows, "bits_per_byte")
    assert "1.550 +- 0.124" in table and "(1 seed)" in table
    assert "no recorded run" in results.format_summary([], "val_loss")


def test_per_token_metrics_never_mix_tokenizers():
    mixed = [lm_record("gma", [5.0], k=8, bpb=[1.5]), lm_record("sdpa", [1.0], tokenizer="bytes", bpb=[1.4])]
    with pytest.raises(ValueError, match="2 tokenizers.*bits_per_byte"):
        results.check_one_tokenizer(mixed, "val_perplexity")
    with pytest.raises(ValueError, match="tokenizers"):
        results.plot_loss_vs_throughput(mixed, metric="val_loss")
    assert results.check_one_tokenizer(mixed, "bits_per_byte") is None
    assert results.check_one_tokenizer(mixed[:1], "val_loss") == "gpt2"
    results.plot_loss_vs_throughput(mixed, metric="bits_per_byte")


def test_missing_is_said_plainly():
    records = [classify_record("gma", [0.3]), classify_record("softmax", [0.3, 0.4, 0.35])]
    notes = results.describe_missing(records, metric="test_accuracy", expected=["gma", "softmax", "performer"])
    assert notes == ["performer: no recorded run", "gma: 1 seed(s) recorded, 3 needed for an interval worth reading"]
    assert results.describe_missing(records, metric="bits_per_byte")[0] == "gma: its record has no bits_per_byte"


def health(*shares):
    """routing_health's output: one dict per layer, one value per head."""
    return [{"layer": i, "active_share": list(heads), "usage_entropy": [0.5] * len(heads),
             "logit_spread": [1.0] * len(heads)} for i, heads in enumerate(shares)]


def test_active_share_history_reads_the_routing_record():
    run = {"routing": {"initial": health([1.0, 0.5], [0.5, 0.5]), "steps": [10, 20],
                       "evaluations": [health([0.25, 0.25], [0.5, 0.0]), health([0.5], [0.25])]}}
    assert results.active_share_history(run) == ([0, 10, 20], [0.625, 0.25, 0.375])
    assert results.active_share_history({"history": {}}) is None


def test_paper_comparison_draws_recorded_and_paper_bars():
    records = [classify_record("gma", [0.36, 0.37, 0.38]), classify_record("softmax", [0.38])]
    paper = {"softmax": (41.33, 0.49), "gma": (41.17, 0.23), "performer": (40.65, 0.85)}
    fig = results.plot_paper_comparison(records, paper, paper_label="paper, Table 2")
    ax = fig.axes[0]
    heights = sorted(round(p.get_height(), 2) for p in ax.patches)
    assert heights == sorted([37.0, 38.0, 41.33, 41.17, 40.65])
    assert list(ax.texts) == []  # nothing written over the bars: seeds and "not recorded" are in the tick labels
    assert [t.get_text() for t in ax.get_xticklabels()] == ["softmax\n1 seed", "gma\n3 seeds",
                                                             "performer\nnot recorded"]
    assert any("paper, Table 2" in t.get_text() for t in ax.get_legend().get_texts())


def test_paper_comparison_keeps_legend_and_tick_labels_off_the_data():
    records = [classify_record("gma", [0.36, 0.37, 0.38]), classify_record("gma", [0.62, 0.60, 0.64]),
               classify_record("softmax", [0.58, 0.62, 0.66])]
    records[0]["config"]["mixer_options"] = {"balance_weight": 0.01, "init_variance": "d_route"}
    records[1]["config"]["mixer_options"] = {"init_variance": "d_route"}
    paper = {"softmax": (64.0, 0.9), "linear": (65.0, 0.4), "performer": (63.5, 0.5)}
    fig = results.plot_paper_comparison(records, paper)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    tops = [row["mean"] + row["half_width"] for row in results.summarize(records, "test_accuracy")]
    tops += [mean + std for mean, std in paper.values()]
    legend = ax.get_legend().get_window_extent(renderer)
    legend_bottom = ax.transData.inverted().transform((legend.x0, legend.y0))[1]
    assert legend_bottom > max(tops), "the legend covers a bar or its error bar"
    labels = ax.get_xticklabels()
    assert len(labels) == 5 and "(init_variance=" in labels[-1].get_text().split("\n")  # a name, whole
    boxes = [label.get_window_extent(renderer) for label in labels]
    for index, box in enumerate(boxes):
        assert not any(box.overlaps(other) for other in boxes[index + 1:]), "tick labels overlap"
    assert all(label.get_rotation() == 0 for label in labels)


def test_k_sweep_and_throughput_figures():
    records = [lm_record("gma", [5.0, 5.1], k=k, bpb=[1.6 - k / 1000, 1.61 - k / 1000], speed=5000 / k)
               for k in (32, 64, 128)]
    records += [lm_record("gma", [5.0], k=64, bpb=[1.4], options={"balance_weight": 0.1}), lm_record("sdpa", [4.0],
                                                                                                   bpb=[1.3])]
    fig = results.plot_k_sweep(records)
    quality, speed = fig.axes[:2]
    lines = {bars.get_label(): bars.lines[0] for bars in quality.containers}
    assert list(lines["gma"].get_xdata()) == [32, 64, 128]
    assert list(lines["gma"].get_ydata()) == pytest.approx([1.5730, 1.5410, 1.4770])
    assert "gma (balance_weight=0.1)" in lines
    assert "sdpa" in [line.get_label() for line in quality.get_lines()]
    assert len(speed.get_lines()) >= 2
    fig = results.plot_loss_vs_throughput(records)
    assert len(fig.axes[0].texts) == len(records)
    empty = results.plot_k_sweep([lm_record("sdpa", [4.0])], metric="bits_per_byte")
    assert "no recorded GMA run" in empty.axes[0].texts[0].get_text()


def test_k_sweep_names_every_reference_line_in_one_legend_off_both_panels():
    others = ("sdpa", "linear", "performer", "none", "uniform", "local_gma", "mamba")
    records = [lm_record("gma", [5.0, 5.1], k=k, bpb=[1.6 - k / 1000, 1.61 - k / 1000], speed=5000 / k)
               for k in (32, 64, 128)]
    records += [lm_record(mixer, [4.0], bpb=[1.5 + index / 100], speed=4000 + 10 * index)
                for index, mixer in enumerate(others)]
    fig = results.plot_k_sweep(records)
    quality, speed = fig.axes[:2]
    assert quality.get_legend() is None and speed.get_legend() is None
    (legend,) = fig.legends
    assert [text.get_text() for text in legend.get_texts()] == ["gma", *others]
    references = [line for line in quality.get_lines() if line.get_label() in others]
    assert len({line.get_color() for line in references}) == len(others)  # mamba: matplotlib's next colour
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    box = legend.get_window_extent(renderer)
    assert not any(box.overlaps(axis.get_window_extent(renderer)) for axis in (quality, speed))


def test_active_share_figure():
    routing = [{"steps": [10], "evaluations": [health([0.2])]}, {"steps": [10], "evaluations": [health([0.1])]}]
    records = [lm_record("gma", [5.0, 5.0], k=8, routing=routing), lm_record("sdpa", [4.0])]
    ax = results.plot_active_share(records).axes[0]
    (line,) = [line for line in ax.get_lines() if not line.get_label().startswith("_")]
    assert list(line.get_ydata()) == pytest.approx([0.15]) and "2 seeds" in line.get_label()
    assert "no recorded run" in results.plot_active_share([records[1]]).axes[0].texts[0].get_text()


def test_recorded_files_load():
    listops = experiments.load_results("listops_*_small.json")
    assert listops, "the ListOps records ship with the package"
    rows = results.summarize(listops, "test_accuracy")
    for row, record in zip(rows, listops):
        assert row["mean"] == pytest.approx(100 * record["summary"]["mean"])
    results.plot_paper_comparison(listops, {"gma": (41.17, 0.23)})


def test_logit_terms_figure_reads_the_recorded_curves():
    def layer(share, distance):
        return {"active_share": [share, share], "usage_entropy": [0.5, 0.5], "logit_spread": [3.0, 3.0],
                "prior": [0.0, 0.1], "volume": [0.2, 0.2], "distance": [distance, distance],
                "prior_entropy": [1.0, 1.0], "floor_share": [0.0, 0.0], "spread_ratio": [0.5, 0.7]}

    routing = [{"initial": [layer(0.4, 5.0), layer(0.4, 5.0)], "steps": [50, 100],
                "evaluations": [[layer(0.3, 6.0), layer(0.1, 9.0)], [layer(0.25, 6.5), layer(0.05, 10.0)]]}]
    record = lm_record("gma", [5.0], k=8, bpb=[1.5], routing=routing)
    fig = results.plot_logit_terms({"default": record})
    distance = [line for ax in fig.axes for line in ax.get_lines() if line.get_label() == "distance, default"]
    assert [list(line.get_ydata()) for line in distance] == [[5.0, 6.0, 6.5], [5.0, 9.0, 10.0]]
    assert list(distance[0].get_xdata()) == [0, 50, 100]
    old = lm_record("gma", [5.0], k=8, bpb=[1.5], routing=[{"initial": [{"active_share": [0.5]}], "steps": [],
                                                             "evaluations": []}])
    with pytest.raises(ValueError, match="did not track 'distance'"):
        results.plot_logit_terms({"old": old})
    with pytest.raises(TypeError, match="records must be a dict"):
        results.plot_logit_terms([record])


def test_every_figure_colours_a_mixer_by_the_name_its_label_starts_with():
    from gma_teach.plots import COLORS
    from gma_teach.plots._style import mixer_color

    assert mixer_color("gma K=64") == mixer_color("GMA") == COLORS["gma"]
    assert mixer_color("sdpa", 4) == COLORS["sdpa"] and mixer_color("mystery mixer", 3) == "C3"
    assert mixer_color("", 2) == mixer_color(None, 2) == "C2"


def test_the_last_epoch_is_read_where_the_test_split_scored_the_epochs():
    record = classify_record("gma", [0.9, 0.8])  # best epoch (chosen on the test split) 0.9 and 0.8
    for run, scores in zip(record["runs"], ([0.5, 0.9, 0.7], [0.6, 0.8, 0.75])):
        run["history"] = {"val_metric": scores}
    assert results.record_values(record, "last_epoch_test_accuracy") == pytest.approx([70.0, 75.0])
    assert results.record_values(record, "test_accuracy") == pytest.approx([90.0, 80.0])
    assert results.record_values(classify_record("gma", [0.9]), "last_epoch_test_accuracy") == []
    table = results.format_summary(results.summarize([record], "last_epoch_test_accuracy"),
                                   "last_epoch_test_accuracy")
    assert table.startswith("last-epoch test accuracy (%):\n") and "72.500" in table
    assert all(len(line) <= 75 for line in table.splitlines())
