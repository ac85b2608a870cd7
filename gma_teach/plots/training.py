"""Training curves for several runs (chapters 9 and 10): loss and validation metric against steps."""
from __future__ import annotations

from ._style import mixer_color, new_figure


def plot_training(histories, *, labels=None, ax=None, smooth=0):
    """Draw training loss (per step, optionally smoothed) and the validation metric of several runs.

    Args:
        histories: :class:`gma_teach.train.History` objects (or their ``to_dict()``); one or a list.
        labels: names for the legend (default: each history's ``label``; a mixer name at the start of a label
            picks that mixer's colour).
        ax: two matplotlib axes to draw on (default: a new one-row, two-column figure).
        smooth: window of a trailing moving average of the per-step loss (0: none).

    Returns:
        the matplotlib ``Figure``.
    """
    if not isinstance(histories, (list, tuple)):
        histories = [histories]
    histories = [h if isinstance(h, dict) else h.to_dict() for h in histories]
    if not histories:
        raise ValueError("histories is empty")
    labels = labels or [h.get("label") or f"run {i}" for i, h in enumerate(histories)]
    if len(labels) != len(histories):
        raise ValueError(f"labels must have one entry per history ({len(histories)}), got {len(labels)}")
    if smooth < 0:
        raise ValueError(f"smooth must be >= 0, got {smooth}")
    if ax is None:
        fig, axes = new_figure(2)
        loss_ax, metric_ax = axes[0]
    else:
        loss_ax, metric_ax = ax
        fig = loss_ax.figure
    for index, (history, label) in enumerate(zip(histories, labels)):
        color = mixer_color(label, index)
        losses = history["step_loss"]
        if smooth > 1:
            losses = [sum(losses[max(0, i - smooth + 1):i + 1]) / len(losses[max(0, i - smooth + 1):i + 1])
                      for i in range(len(losses))]
        loss_ax.plot(range(1, len(losses) + 1), losses, color=color, label=label, lw=1.2)
        if history["val_loss"]:
            loss_ax.plot(history["steps"], history["val_loss"], color=color, ls="--", marker="o", ms=3)
            metric_ax.plot(history["steps"], history["val_metric"], color=color, marker="o", ms=3, label=label)
    loss_ax.set(xlabel="step", ylabel="loss (solid: train, dashed: validation)")
    metric_ax.set(xlabel="step", ylabel=f"validation {histories[0]['metric_name']}")
    loss_ax.legend()
    return fig
