r"""Chapters 9-11: tables and figures read from the recorded result files (``book/results/*.json``).

A record is what ``python -m gma_teach.experiments ... --out FILE`` writes (``experiment``, ``mixer``,
``n_components``, ``config`` with ``mixer_options``, ``runs``: one per seed, and the provenance) or what
``python -m gma_teach.study ...`` writes for one arm of a study (``study``, ``arm``, ``spec``: mixer,
``n_components``, ``gma_options``, ``prepare``; ``config``, ``runs``). Everything here reads records defensively: a
record that lacks a number is left out of the figure and named by :func:`describe_missing`, never drawn as a zero.

Metrics (the ``metric=`` argument), read from each seed's run:

* ``"test_accuracy"`` -- ``run["test"]["accuracy"]`` (ListOps, Text), shown in percent;
* ``"val_loss"``, ``"val_perplexity"`` -- ``run["val"]["loss" | "perplexity"]`` (LM), per token of the record's
  tokenizer, so two records with different tokenizers never share a table or an axis (:func:`check_one_tokenizer`);
* ``"bits_per_byte"`` -- ``run["val"]["bits_per_byte"]``: validation loss summed over tokens, divided by the UTF-8
  bytes of the text and by :math:`\ln 2`; it does not depend on the tokenizer.

Error bars are 95% Student-t intervals of the mean over seeds (:func:`gma_teach.stats.mean_half_width`); one seed
gets no bar and says so. Routing histories (active share of the components over training, chapter 11) are read by
:func:`active_share_history` from each run's ``routing`` (:func:`gma_teach.experiments.run_lm`).
"""
from __future__ import annotations

import math
import statistics
from types import MappingProxyType

from ..designs import METRICS as METRIC_FACTS
from ..designs import Arm, thawed
from ..runs.arm_records import health_curve
from ..stats import mean_half_width
from ._style import COLORS, mixer_color, new_figure, tick_label

__all__ = [
    "METRICS",
    "active_share_history",
    "check_one_tokenizer",
    "describe_missing",
    "format_summary",
    "hardware_line",
    "plot_active_share",
    "plot_k_sweep",
    "plot_loss_vs_throughput",
    "plot_paper_comparison",
    "record_label",
    "record_values",
    "summarize",
    "tokenizer_of",
]

_FIGURE_METRICS = ("test_accuracy", "last_epoch_test_accuracy", "val_loss", "val_perplexity", "val_bits_per_byte")
_ALIASES = {"bits_per_byte": "val_bits_per_byte"}

METRICS = MappingProxyType({
    **{name: (METRIC_FACTS[name].axis, METRIC_FACTS[name].per_token, METRIC_FACTS[name].factor)
       for name in _FIGURE_METRICS},
    **{alias: (METRIC_FACTS[name].axis, METRIC_FACTS[name].per_token, METRIC_FACTS[name].factor)
       for alias, name in _ALIASES.items()},
})
"""The metrics these figures read from a record's runs, ``name -> (axis label, whether it is per token of a
tokenizer, factor for display)``, taken from the one table of metric facts (:data:`gma_teach.designs.METRICS`).
``bits_per_byte`` is the name chapter 10's figures used for ``val_bits_per_byte`` and reads the same."""


def _check_metric(metric: str) -> None:
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {sorted(METRICS)}, got {metric!r}")


def _check_records(records) -> list:
    if isinstance(records, dict):
        records = [records]
    if not isinstance(records, (list, tuple)) or not all(isinstance(r, dict) for r in records):
        raise TypeError(f"records must be a list of record dicts (from experiments.load_results), got "
                        f"{type(records).__name__}")
    return list(records)


# ----------------------------------------------------------------------------------------------- reading records
def _run_metric(run: dict, metric: str):
    facts = METRIC_FACTS[_ALIASES.get(metric, metric)]
    if facts.part == "history":  # the last evaluation, where the validation split is the test split
        scores = (run.get("history") or {}).get(facts.key) or [None]
        value = scores[-1]
    else:
        value = (run.get(facts.part) or {}).get(facts.key)
        if value is None and facts.name == "val_bits_per_byte":
            value = run.get("bits_per_byte")
    return None if value is None or not math.isfinite(float(value)) else float(value)


def record_values(record: dict, metric: str) -> list[float]:
    """Per-seed values of ``metric`` in ``record`` (seeds that lack it are skipped), in display units."""
    _check_metric(metric)
    factor = METRICS[metric][2]
    values = [_run_metric(run, metric) for run in record.get("runs", [])]
    return [factor * v for v in values if v is not None]


def _arm(record: dict) -> Arm | None:
    """The arm of a study's record (either form its ``spec`` takes, :meth:`gma_teach.designs.Arm.from_spec`)."""
    return Arm.from_spec(record["spec"]) if record.get("spec") else None


def _mixer(record: dict):
    arm = _arm(record)
    return record.get("mixer") or (arm.mixer if arm is not None else None)


def _n_components(record: dict):
    arm = _arm(record)
    return record.get("n_components") or (arm.n_components if arm is not None else None)


def _options(record: dict) -> dict:
    """The options that make a record more than "mixer at K": a routing remedy, a preparation of the means."""
    config, arm = record.get("config") or {}, _arm(record)
    options = {**(config.get("mixer_options") or {}), **(thawed(arm.options) if arm is not None else {})}
    if arm is not None and arm.prepare:
        options["prepare"] = arm.prepare
    for key in ("n_components", "n_features", "k", "max_seq_len"):
        options.pop(key, None)
    return options


def record_label(record: dict, *, with_k: bool = True) -> str:
    """A short name: the record's ``label`` if it has one, else the mixer, ``K=...`` for GMA and any other mixer
    option (a remedy, say) in brackets."""
    if record.get("label"):
        return str(record["label"])
    label = str(_mixer(record) or "?")
    if with_k and _n_components(record):
        label += f" K={_n_components(record)}"
    options = _options(record)
    if options:
        label += " (" + ", ".join(f"{key}={value}" for key, value in sorted(options.items())) + ")"
    return label


def tokenizer_of(record: dict) -> str | None:
    """The tokenizer a language-model record used (``None`` when the record does not say)."""
    if record.get("tokenizer"):
        return str(record["tokenizer"])
    for run in record.get("runs", []):
        if run.get("tokenizer"):
            return str(run["tokenizer"])
    return None


def hardware_line(record: dict) -> str:
    """The record's machine in one short line (records store it as a line or as a dict)."""
    hardware = record.get("hardware")
    if isinstance(hardware, dict):
        if hardware.get("gpu"):
            return str(hardware["gpu"])
        parts = [str(hardware.get("cpu", "CPU"))]
        if hardware.get("logical_cores"):
            parts.append(f"{hardware['logical_cores']} cores")
        if hardware.get("torch_threads"):
            parts.append(f"{hardware['torch_threads']} torch thread(s)")
        return ", ".join(parts)
    return str(hardware) if hardware else "machine not recorded"


def _tokens_per_second(record: dict) -> list[float]:
    return [float(run["tokens_per_second"]) for run in record.get("runs", []) if run.get("tokens_per_second")]


def _steps(record: dict):
    config = record.get("config") or {}
    return config.get("n_steps", config.get("steps", config.get("epochs")))


def summarize(records, metric: str, *, speeds: dict | None = None) -> list[dict]:
    """One row per record that has ``metric``: ``label``, ``mixer``, ``n_components``, ``n_seeds``, ``mean``,
    ``half_width`` (95% interval, ``None`` for one seed), ``tokens_per_second``, ``tokenizer``, ``steps`` (or
    epochs) and ``hardware``. Records without the metric are left out (see :func:`describe_missing`).

    ``speeds``: ``{record label: tokens per second}`` measured together (e.g. by
    ``gma_teach.runs.speed.measure_training_speed``), used instead of the mean of the seeds' own throughputs, which
    were timed under whatever load each run met."""
    _check_metric(metric)
    rows = []
    for record in _check_records(records):
        values = record_values(record, metric)
        if not values:
            continue
        mean, half_width = mean_half_width(values)
        speeds_of_runs = _tokens_per_second(record)
        measured = (speeds or {}).get(record_label(record))
        speed = measured if measured is not None else statistics.fmean(speeds_of_runs) if speeds_of_runs else None
        rows.append({"label": record_label(record), "mixer": _mixer(record),
                     "n_components": _n_components(record), "n_seeds": len(values), "mean": mean,
                     "half_width": half_width, "tokens_per_second": speed,
                     "tokenizer": tokenizer_of(record), "steps": _steps(record), "hardware": hardware_line(record),
                     "options": _options(record)})
    return rows


def format_summary(rows, metric: str) -> str:
    """``rows`` from :func:`summarize` as an aligned text table (mean +- 95% interval, seeds, tokens/s)."""
    _check_metric(metric)
    if not rows:
        return f"(no recorded run has {metric})"
    width = max(12, *(len(row["label"]) for row in rows))
    lines = [f"{METRICS[metric][0]}:", "mean over seeds +- half-width of the 95% interval",
             f"{'run':{width}}  {'mean':>9} {'+- 95%':<10} {'seeds':>5}  {'train tok/s':>11}"]
    for row in rows:
        spread = f"+- {row['half_width']:.3f}" if row["half_width"] is not None else "(1 seed)"
        speed = f"{row['tokens_per_second']:11,.0f}" if row["tokens_per_second"] else f"{'-':>11}"
        lines.append(f"{row['label']:{width}}  {row['mean']:9.3f} {spread:<10} {row['n_seeds']:5d}  {speed}")
    return "\n".join(lines)


def check_one_tokenizer(records, metric: str) -> str | None:
    """The one tokenizer of ``records`` when ``metric`` is per token; raise ``ValueError`` if they mix tokenizers.

    Per-token losses and perplexities of different tokenizers measure different things (a byte-level model
    predicts ~4 times as many, easier, tokens as a BPE model on the same text); bits per byte can be compared.
    """
    _check_metric(metric)
    records = _check_records(records)
    if not METRICS[metric][1]:
        return None
    names = sorted({tokenizer_of(r) or "unknown tokenizer" for r in records if record_values(r, metric)})
    if len(names) > 1:
        raise ValueError(f"{metric} is per token, and these records use {len(names)} tokenizers ({'; '.join(names)}):"
                         " compare bits per byte (metric='bits_per_byte') or select one tokenizer's records")
    return names[0] if names else None


def describe_missing(records, *, metric: str, expected=(), min_seeds: int = 3) -> list[str]:
    """Plain sentences for what the records lack: an expected run (a label such as ``"gma K=64"`` or a mixer
    name) with no record, a record without ``metric``, or fewer than ``min_seeds`` seeds."""
    _check_metric(metric)
    records = _check_records(records)
    notes = []
    labels = {record_label(r) for r in records} | {str(_mixer(r)) for r in records}
    for name in expected:
        if name not in labels:
            notes.append(f"{name}: no recorded run")
    for record in records:
        n_values = len(record_values(record, metric))
        if n_values == 0:
            notes.append(f"{record_label(record)}: its record has no {metric}")
        elif n_values < min_seeds:
            notes.append(f"{record_label(record)}: {n_values} seed(s) recorded, {min_seeds} needed for an interval "
                         "worth reading")
    return notes


def active_share_history(run: dict) -> tuple[list, list] | None:
    """``(steps, active share)`` of one seed's training, the share averaged over every tracked GMA layer and head,
    or ``None`` when the run did not track its routing.

    Reads ``run["routing"]``: ``initial`` (step 0) and ``evaluations`` at ``steps``, each a list of per-layer dicts
    whose ``active_share`` holds one value per head (:func:`gma_teach.diagnostics.routing_health`).
    """
    routing = run.get("routing")
    if not routing or not routing.get("evaluations"):
        return None
    steps = [0, *routing["steps"]] if routing.get("initial") else list(routing["steps"])
    entries = [routing["initial"], *routing["evaluations"]] if routing.get("initial") else routing["evaluations"]
    shares = [statistics.fmean(share for layer in entry for share in layer["active_share"]) for entry in entries]
    return steps, shares


# ------------------------------------------------------------------------------------------------------ figures
def _axis(ax, **size):
    if ax is not None:
        return ax.figure, ax
    fig, axes = new_figure(**size)
    return fig, axes[0][0]


def plot_paper_comparison(records, paper: dict, *, metric: str = "test_accuracy", paper_label: str = "paper",
                          ax=None):
    """Bars per mixer: the recorded mean with its 95% interval over seeds, beside the paper's mean +- std.

    Nothing is written over the data: each tick label says how many seeds its recorded bar has, or "not recorded";
    long names wrap instead of turning; the legend sits in headroom above the tallest bar and its error bar.

    Args:
        records: recorded runs (one task), e.g. ``experiments.load_results("listops_*_small.json")``.
        paper: ``{name: (mean, std)}`` typed from the paper, in display units (percent for accuracy), keyed by
            mixer name (a mixer with one record) or by :func:`record_label` (a mixer with several, e.g.
            ``"gma K=64"``).
        metric: see ``METRICS``.
        paper_label: the legend entry of the paper's bars (say which table).
        ax: an axis to draw on (default: a new figure).

    Returns:
        the matplotlib ``Figure``. A mixer with no record shows only the paper's bar; its tick says "not recorded".
    """
    _check_metric(metric)
    summary = summarize(records, metric)
    mixers_seen = [row["mixer"] for row in summary]
    rows = {row["mixer"] if mixers_seen.count(row["mixer"]) == 1 else row["label"]: row for row in summary}
    if not isinstance(paper, dict):
        raise TypeError(f"paper must be a dict {{mixer: (mean, std)}}, got {type(paper).__name__}")
    mixers = list(dict.fromkeys([*paper, *rows]))
    fig, ax = _axis(ax, width=max(5.0, 1.1 * len(mixers) + 1.5))
    labelled = set()
    ticks, tops = [], [0.0]
    for index, mixer in enumerate(mixers):
        color = mixer_color(mixer, index)
        if mixer in rows:
            row = rows[mixer]
            ax.bar(index - 0.2, row["mean"], width=0.4, color=color,
                   yerr=row["half_width"] if row["half_width"] is not None else None, capsize=3,
                   label=None if "recorded" in labelled else "recorded (mean, 95% interval)")
            labelled.add("recorded")
            tops.append(row["mean"] + (row["half_width"] or 0.0))
            ticks.append(tick_label(mixer, f"{row['n_seeds']} seed" + ("s" if row["n_seeds"] > 1 else "")))
        else:
            ticks.append(tick_label(mixer, "not recorded"))
        if mixer in paper:
            mean, std = paper[mixer]
            ax.bar(index + 0.2, mean, width=0.4, color=color, alpha=0.35, hatch="//", edgecolor=color, yerr=std,
                   capsize=3, label=None if "paper" in labelled else f"{paper_label} (mean +- std)")
            labelled.add("paper")
            tops.append(mean + std)
    ax.set_xticks(range(len(mixers)), ticks, fontsize=8)
    # the data fill the lower 70% of the axis; the legend (two rows at most) sits in the band above them
    ax.set(ylabel=METRICS[metric][0], ylim=(0, max(tops) / 0.7 if max(tops) > 0 else 1.0))
    ax.legend(loc="upper left", fontsize=8, ncol=1, borderaxespad=0.2)
    return fig


def plot_loss_vs_throughput(records, *, metric: str = "bits_per_byte", speeds: dict | None = None, ax=None):
    """Validation quality against training throughput, one point per record (mean over seeds, 95% interval).

    A per-token ``metric`` needs every record on one tokenizer (:func:`check_one_tokenizer`); bits per byte does
    not. Records without the metric or without a measured throughput are left out. ``speeds``: see
    :func:`summarize`.

    Returns:
        the matplotlib ``Figure``.
    """
    check_one_tokenizer(records, metric)
    fig, ax = _axis(ax)
    rows = [row for row in summarize(records, metric, speeds=speeds) if row["tokens_per_second"]]
    for index, row in enumerate(rows):
        color = mixer_color(row["mixer"], index)
        ax.errorbar(row["tokens_per_second"], row["mean"], yerr=row["half_width"], color=color, marker="o", ms=5,
                    capsize=3)
        ax.annotate(row["label"], (row["tokens_per_second"], row["mean"]), xytext=(4, 3), textcoords="offset points",
                    fontsize=8, color=color)
    if not rows:
        ax.text(0.5, 0.5, f"no recorded run has {metric}", ha="center", va="center", transform=ax.transAxes)
    ax.set(xlabel="training tokens per second (recorded machine)", ylabel=METRICS[metric][0])
    return fig


_REFERENCE_DASHES = (":", "-.", (0, (5, 2)), (0, (1, 3)), (0, (3, 1, 1, 1, 1, 1)), (0, (8, 3)), (0, (2, 2)))
"""One dash per reference line of :func:`plot_k_sweep`, so lines of similar colours stay apart."""


def plot_k_sweep(records, *, metric: str = "bits_per_byte", speeds: dict | None = None, ax=None):
    """GMA's ``metric`` (left) and training throughput (right) against the number of components ``K``.

    GMA records are grouped by their options (the default mixture, a remedy, ...), one line each, with 95%
    intervals over seeds; every other mixer is a horizontal line (its mean) for reference, each in its own colour
    and dash. One legend below both panels names every line, so no legend covers a bar. ``speeds``: see
    :func:`summarize`.

    Returns:
        the matplotlib ``Figure``.
    """
    check_one_tokenizer(records, metric)
    if ax is None:
        fig, axes = new_figure(2)
        quality_ax, speed_ax = axes[0]
    else:
        quality_ax, speed_ax = ax
        fig = quality_ax.figure
    rows = summarize(records, metric, speeds=speeds)
    groups: dict[str, list] = {}
    for row in rows:
        if row["mixer"] == "gma" and row["n_components"]:
            name = "gma" + (" (" + ", ".join(f"{k}={v}" for k, v in sorted(row["options"].items())) + ")"
                            if row["options"] else "")
            groups.setdefault(name, []).append(row)
    for index, (name, group) in enumerate(sorted(groups.items())):
        group.sort(key=lambda row: row["n_components"])
        ks = [row["n_components"] for row in group]
        style = {"marker": "o", "ms": 4, "capsize": 3, "ls": "-" if index == 0 else "--", "label": name,
                 "color": COLORS["gma"] if index == 0 else f"C{index}"}
        quality_ax.errorbar(ks, [row["mean"] for row in group],
                            yerr=[row["half_width"] or 0.0 for row in group], **style)
        timed = [row for row in group if row["tokens_per_second"]]
        speed_ax.plot([row["n_components"] for row in timed], [row["tokens_per_second"] for row in timed],
                      marker="o", ms=4, ls=style["ls"], color=style["color"], label=name)
    for index, row in enumerate(row for row in rows if row["mixer"] != "gma"):
        color, dash = mixer_color(row["mixer"], index), _REFERENCE_DASHES[index % len(_REFERENCE_DASHES)]
        quality_ax.axhline(row["mean"], color=color, lw=1.2, ls=dash, label=row["label"])
        if row["tokens_per_second"]:
            speed_ax.axhline(row["tokens_per_second"], color=color, lw=1.2, ls=dash, label=row["label"])
    if not groups:
        quality_ax.text(0.5, 0.5, f"no recorded GMA run has {metric}", ha="center", va="center",
                        transform=quality_ax.transAxes)
    else:
        quality_ax.set_xscale("log", base=2)
        speed_ax.set_xscale("log", base=2)
    quality_ax.set(xlabel="components K", ylabel=METRICS[metric][0])
    speed_ax.set(xlabel="components K", ylabel="training tokens per second")
    if rows:
        named = {}  # GMA's lines first, then the other mixers' means (the reference lines)
        for axis in (quality_ax, speed_ax):
            for handle, label in zip(*axis.get_legend_handles_labels()):
                named.setdefault(label, handle)
        order = sorted(named, key=lambda label: label not in groups)
        fig.legend([named[label] for label in order], order, loc="upper center", bbox_to_anchor=(0.5, 0.0),
                   ncol=min(3, len(named)), fontsize=8)
    return fig


def plot_active_share(records, *, ax=None):
    """Share of GMA's components that win at least one token by argmax, over training, one line per record (mean
    over seeds, layers and heads; the band spans the seeds). Records without a routing history are left out. It is
    an argmax count, a sign of collapse when it falls, and never a measure of use: a dissolved router, every row
    near uniform, wins with nearly every component (:func:`gma_teach.diagnostics.routing_information` measures use).

    Returns:
        the matplotlib ``Figure``.
    """
    records = _check_records(records)
    fig, ax = _axis(ax, width=6.4, height=3.0)
    drawn = 0
    for record in records:
        histories = [h for h in (active_share_history(run) for run in record.get("runs", [])) if h]
        if not histories:
            continue
        steps = sorted(set.intersection(*(set(h[0]) for h in histories)))
        if not steps:
            continue
        per_seed = [[dict(zip(*h))[step] for step in steps] for h in histories]
        mean = [statistics.fmean(values) for values in zip(*per_seed)]
        color = f"C{drawn}"
        ax.plot(steps, mean, marker="o", ms=3, color=color,
                label=f"{record_label(record)} ({len(histories)} seed{'s' if len(histories) > 1 else ''})")
        if len(histories) > 1:
            ax.fill_between(steps, [min(v) for v in zip(*per_seed)], [max(v) for v in zip(*per_seed)], color=color,
                            alpha=0.2)
        drawn += 1
    if not drawn:
        ax.text(0.5, 0.5, "no recorded run tracked its routing", ha="center", va="center", transform=ax.transAxes)
    ax.axhline(0.5, color="grey", lw=0.8, ls=":")
    ax.set(xlabel="training step", ylabel="share winning a token by argmax", ylim=(0, 1.02))
    if drawn:  # below the axes, off the curves
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=1, frameon=False)
    return fig


TERM_STYLES = {"distance": ("C0", "distance"), "volume": ("C1", "volume"), "prior": ("C2", "prior")}


def plot_logit_terms(records: dict, *, n_layers: int | None = None):
    """What drives the routing, layer by layer (columns), one line style per record: the spread over components of
    each term of the routing logits during training (top: distance, volume, prior; see
    :func:`gma_teach.diagnostics.logit_term_spreads`) and the active share with the tokens' spread over the means'
    (bottom). Means over heads and seeds.

    Args:
        records: ``{name: record}`` of study arms whose runs tracked the logit terms.
        n_layers: GMA layers to draw (default: every layer the first record tracked).

    Returns:
        the matplotlib ``Figure``.
    """
    if not isinstance(records, dict):
        raise TypeError(f"records must be a dict {{name: record}}, got {type(records).__name__}")
    if n_layers is None:
        first = next(iter(records.values()), None)
        n_layers = len(first["runs"][0]["routing"]["initial"]) if first else 1
    fig, axes = new_figure(n_layers, 2)
    styles = ("-", "--", ":", "-.")
    for column in range(n_layers):
        terms_ax, share_ax = axes[0][column], axes[1][column]
        for index, (name, record) in enumerate(records.items()):
            style = styles[index % len(styles)]
            for term, (color, label) in TERM_STYLES.items():
                curve = health_curve(record, term, layer=column)
                terms_ax.plot(curve["steps"], curve["mean"], ls=style, color=color, label=f"{label}, {name}")
            for curve_name, color in (("active_share", "k"), ("spread_ratio", "C3")):
                curve = health_curve(record, curve_name, layer=column)
                share_ax.plot(curve["steps"], curve["mean"], ls=style, color=color,
                              label=f"{curve_name.replace('_', ' ')}, {name}")
        terms_ax.set(title=f"layer {column}: spread of each logit term", xlabel="training step",
                     ylabel="std over components")
        share_ax.set(title=f"layer {column}: active share, token/mean spread", xlabel="training step")
        if not records:
            terms_ax.text(0.5, 0.5, "nothing recorded", ha="center", va="center", transform=terms_ax.transAxes)
    if records:
        axes[0][0].legend(fontsize=6)
        axes[1][0].legend(fontsize=6)
    return fig
