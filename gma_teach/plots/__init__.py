"""Figures shared by the chapters, so the book looks like one book.

Every function returns a matplotlib ``Figure`` (or draws on an ``ax=`` it is given) and uses :func:`book_style`.
The explanatory diagrams live in :mod:`gma_teach.plots.diagrams` (chapters 3-6) and
:mod:`gma_teach.plots.kernel_diagrams` (chapter 7), the recorded experiments' figures in
:mod:`gma_teach.plots.results` (chapters 9-11); the chapters import those modules by name.
"""
from ..measure import loglog_slope  # the fit behind every slope in a legend, re-exported for the chapters
from ._style import COLORS, book_style, new_figure
from .attention import (
    component_colors,
    plot_matrices,
    plot_responsibilities_1d,
    plot_responsibilities_2d,
    plot_scaling,
)
from .routing import (
    CATEGORY_COLORS,
    dominant_component_colors,
    information_history,
    plot_component_categories,
    plot_component_usage,
    plot_information_history,
    plot_responsibility_heatmap,
    plot_responsibility_pca,
    plot_token_strip,
)
from .training import plot_training
from .reordering import plot_gradient_modulation
from .profiling import plot_paper_table, plot_profile
