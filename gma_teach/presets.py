"""Sizes per chapter and scale; read them with :func:`gma_teach.preset`.

Each entry maps ``"tiny"``, ``"small"`` and ``"full"`` to keyword sizes. ``tiny`` must keep a chapter within about
two minutes on two CPU cores (CI runs every notebook twice), ``small`` within about ten minutes on a CPU.
"""

PRESETS: dict[str, dict[str, dict]] = {
}
