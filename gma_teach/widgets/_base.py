"""What every explorer shares: a static figure first, then controls that redraw it in place."""
from __future__ import annotations

import matplotlib.pyplot as plt
from IPython.display import display


class Explorer:
    """Base class: subclasses implement :meth:`figure` (a matplotlib ``Figure`` of the current state) and
    ``_build_controls`` (an ipywidgets box whose callbacks change the state and call :meth:`_redraw`)."""

    _handle = None

    def figure(self):
        raise NotImplementedError

    def _build_controls(self):
        raise NotImplementedError

    def _redraw(self) -> None:

        fig = self.figure()
        if self._handle is not None:
            self._handle.update(fig)
        plt.close(fig)

    def show(self):
        """Display the static figure (what a rendered HTML page keeps), then the controls that redraw it."""

        fig = self.figure()
        self._handle = display(fig, display_id=True)
        plt.close(fig)
        self.controls = self._build_controls()
        display(self.controls)
        return self
