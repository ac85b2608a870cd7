"""Chapter 11's explorer: pick a position to see where its token routes, pick a component to see what it collects.

:func:`routing_explorer` first displays a static figure (so a rendered HTML page shows a picture even without a
kernel) and then two sliders that redraw that same figure in place when a live kernel is attached.
"""
from __future__ import annotations

from collections.abc import Sequence

import ipywidgets as widgets
import numpy as np

from .. import _checks, diagnostics
from ..plots import new_figure
from ..plots.routing import dominant_component_colors
from ._base import Explorer

__all__ = ["RoutingExplorer", "routing_explorer"]


class RoutingExplorer(Explorer):
    """Query responsibilities of one sequence, viewed one position and one component at a time: one head's own
    rows (``head=h`` with a ``(N, H, K)`` input), or the head-averaged rows (``head=None``).

    Attributes:
        resp: ``(N, K)`` float64 NumPy array of the rows shown (head ``head``'s, or the heads' average).
        rows: ``(N, H, K)`` float64 NumPy array of every head's rows (``H = 1`` for an ``(N, K)`` input).
        head: the head shown, or ``None`` for the average.
        tokens: the ``N`` token strings.
        position, component: what the figure shows now.
        controls: the ipywidgets box (position, component) once shown.
    """

    def __init__(self, resp, tokens: Sequence[str], *, position: int = 0, component: int | None = None,
                 head: int | None = None):
        self.rows = diagnostics.head_rows(resp).numpy()
        self.head = None
        self.resp = diagnostics.as_responsibilities(resp).numpy()
        if head is not None:
            self.set_head(head)
        if isinstance(tokens, str):
            raise TypeError("tokens must be a sequence of token strings, got a single str")
        if len(tokens) != self.resp.shape[0]:
            raise ValueError(
                f"tokens must be a sequence of {self.resp.shape[0]} token strings (one per row of resp), "
                f"got {len(tokens)}"
            )
        self.tokens = [str(token) for token in tokens]
        self.position = 0
        self.component = 0
        self.set_position(position)
        self.set_component(int(self.resp[position].argmax()) if component is None else component)
        self.controls = None

    def set_position(self, position: int) -> None:
        """Show the routing of the token at ``position`` (0 to N-1)."""
        self.position = _checks.integer("position", position, minimum=0, maximum=self.resp.shape[0] - 1)

    def set_head(self, head: int) -> None:
        """Show head ``head`` (0 to H-1) on its own: its rows and its hard assignment."""
        self.head = _checks.integer("head", head, minimum=0, maximum=self.rows.shape[1] - 1)
        self.resp = self.rows[:, self.head]

    def set_component(self, component: int) -> None:
        """Show what component ``component`` (0 to K-1) collects along the sequence."""
        self.component = _checks.integer("component", component, minimum=0, maximum=self.resp.shape[1] - 1)

    def figure(self):
        """A new matplotlib ``Figure``: the chosen token's responsibility vector, and the chosen component's
        responsibility at every position (positions where it wins are marked)."""

        n_tokens, n_components = self.resp.shape
        colors = dominant_component_colors(n_components)
        fig, axes = new_figure(nrows=2, width=8.0, height=5.4)
        upper, lower = axes[0, 0], axes[1, 0]
        row = self.resp[self.position]
        upper.bar(range(n_components), row, color=colors, width=1.0)
        upper.bar([self.component], [row[self.component]], color="none", edgecolor="k", width=1.0, linewidth=1.2)
        upper.axhline(1 / n_components, color="k", linestyle="--", linewidth=1, label="uniform 1/K")
        upper.set_xlabel("component k (outlined: the component shown below)")
        upper.set_ylabel(r"$\bar\gamma^Q_{t,k}$")
        token = self.tokens[self.position].replace("Ġ", " ").replace("\n", "\\n")
        tied = np.flatnonzero(row.max() - row <= 1e-9)
        where = (f"component {int(row.argmax())}" if len(tied) == 1 else
                 f"a {len(tied)}-way tie ({', '.join(map(str, tied[:4]))}{', ...' if len(tied) > 4 else ''})")
        upper.set_title(f"position {self.position}{'' if self.head is None else f', head {self.head}'}: "
                        f"{token!r} routes mostly to {where} (max {row.max():.3f})")
        upper.legend(fontsize=8)
        column = self.resp[:, self.component]
        wins = np.flatnonzero(self.resp.argmax(axis=1) == self.component)
        lower.plot(range(n_tokens), column, color=colors[self.component], linewidth=1.2)
        lower.scatter(wins, column[wins], color="k", s=12, zorder=3, label="positions it wins")
        lower.axvline(self.position, color="0.5", linestyle=":", linewidth=1)
        lower.set_xlabel("position t")
        lower.set_ylabel(rf"$\bar\gamma^Q_{{t,{self.component}}}$")
        examples = ", ".join(repr(self.tokens[i].replace("Ġ", " ")) for i in wins[:8])
        lower.set_title(f"component {self.component} wins {len(wins)} of {n_tokens} tokens"
                        + (f": {examples}" if examples else ""), fontsize=9)
        if len(wins):
            lower.legend(fontsize=8)
        return fig

    def _build_controls(self):

        style = {"description_width": "90px"}
        sliders = []
        if self.head is not None and self.rows.shape[1] > 1:
            head = widgets.IntSlider(value=self.head, min=0, max=self.rows.shape[1] - 1, description="head",
                                     style=style, continuous_update=False)

            def on_head(change):
                self.set_head(change["new"])
                self._redraw()

            head.observe(on_head, names="value")
            sliders.append(head)
        position = widgets.IntSlider(value=self.position, min=0, max=self.resp.shape[0] - 1,
                                     description="position", style=style, continuous_update=False)
        component = widgets.IntSlider(value=self.component, min=0, max=self.resp.shape[1] - 1,
                                      description="component", style=style, continuous_update=False)

        def on_position(change):
            self.set_position(change["new"])
            self._redraw()

        def on_component(change):
            self.set_component(change["new"])
            self._redraw()

        position.observe(on_position, names="value")
        component.observe(on_component, names="value")
        return widgets.VBox([*sliders, position, component])


def routing_explorer(resp, tokens: Sequence[str], *, position: int = 0, component: int | None = None,
                     head: int | None = None) -> RoutingExplorer:
    """Display an interactive explorer of one sequence's routing and return it.

    A static figure comes first (the chosen token's responsibility vector over the ``K`` components, and the
    chosen component's responsibility along the sequence with the positions where it wins), then two sliders:
    the position and the component. Without a live kernel (the HTML book) the figure is what you see.

    Args:
        resp: ``(N, K)`` or ``(N, H, K)`` query responsibilities of one sequence.
        tokens: the sequence's ``N`` token strings.
        position: the token shown first.
        component: the component shown first; ``None`` means the chosen token's dominant component.
        head: show this head's own rows (a slider then moves between heads); ``None`` averages the heads, whose
            rows can tie when one-hot heads disagree (the title then names the tie).

    Returns:
        The :class:`RoutingExplorer` (assign it, ``explorer = routing_explorer(...)``, to avoid printing its repr).
    """
    return RoutingExplorer(resp, tokens, position=position, component=component, head=head).show()
