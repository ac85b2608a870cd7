"""gma_teach.plots.kernel_diagrams: chapter 7's diagrams draw what their arguments describe and refuse bad input."""
import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest

from gma_teach.plots import kernel_diagrams


def _colored(ax, color):
    target = matplotlib.colors.to_rgba(color)
    return [patch for patch in ax.patches if np.allclose(patch.get_facecolor(), target)]


@pytest.mark.parametrize("rows, cols, highlight", [(1, 1, (0, 0)), (3, 5, (2, 4)), (4, 7, (1, 2))])
def test_program_grid_has_one_box_per_program_and_one_highlighted(rows, cols, highlight):
    fig = kernel_diagrams.plot_program_grid(rows, cols, highlight=highlight)
    ax = fig.axes[0]
    assert len(ax.patches) == rows * cols
    (chosen,) = _colored(ax, "#fdb863")
    x, y = chosen.get_xy()
    assert (rows - 1 - y, x) == highlight  # row 0 is drawn at the top
    assert f"{rows * cols} programs" in ax.get_title()


def test_program_grid_rejects_bad_input():
    with pytest.raises(TypeError, match="batch_heads must be an int"):
        kernel_diagrams.plot_program_grid(2.0, 3)
    with pytest.raises(ValueError, match=r"n_blocks must be an int in \[1, 16\], got 0"):
        kernel_diagrams.plot_program_grid(2, 0)
    with pytest.raises(ValueError, match="outside the grid"):
        kernel_diagrams.plot_program_grid(2, 3, highlight=(2, 0))


@pytest.mark.parametrize("blocks, splits", [(10, 4), (7, 7), (5, 1), (13, 3)])
def test_split_sum_covers_every_block_once_in_contiguous_runs(blocks, splits):
    ax = kernel_diagrams.plot_split_sum(blocks, splits).axes[0]
    block_boxes = sorted((p for p in ax.patches if abs(p.get_y() - 3.2) < 1e-9), key=lambda p: p.get_x())
    assert len(block_boxes) == blocks
    colors = [tuple(p.get_facecolor()) for p in block_boxes]
    runs = [c for i, c in enumerate(colors) if i == 0 or c != colors[i - 1]]
    assert len(runs) == splits  # one contiguous run per program
    sizes = np.diff(np.linspace(0, blocks, splits + 1).round())
    assert sizes.max() - sizes.min() <= 1
    texts = " ".join(t.get_text() for t in ax.texts)
    assert all(f"P_{{{s}}}" in texts for s in range(splits))


def test_split_sum_rejects_more_programs_than_blocks():
    with pytest.raises(ValueError, match=r"n_splits must be an int in \[1, 3\], got 4"):
        kernel_diagrams.plot_split_sum(3, 4)


@pytest.mark.parametrize("chunks, size", [(1, 1), (4, 3), (3, 5)])
def test_chunk_scan_masks_exactly_the_strict_upper_triangle(chunks, size):
    ax = kernel_diagrams.plot_chunk_scan(chunks, chunk=size).axes[0]
    kept, masked = _colored(ax, "#fdb863"), _colored(ax, "#dddddd")
    assert len(kept) == chunks * size * (size + 1) // 2
    assert len(masked) == chunks * size * (size - 1) // 2
    states = [t.get_text() for t in ax.texts if "Z_" in t.get_text() or t.get_text() == "0"]
    assert states[0] == "0" and len(states) == chunks  # the first chunk starts from an empty state


def test_roofline_places_each_kernel_on_the_roof():
    peak, bandwidth = 60e12, 3e12  # ridge at 20 FLOP/B
    kernels = {"memory-bound": (1e9, 1e9), "compute-bound": (1e12, 1e9)}
    ax = kernel_diagrams.plot_roofline(kernels, peak_flops=peak, bandwidth=bandwidth, device="test").axes[0]
    roof, *_ = ax.get_lines()
    x, y = roof.get_data()
    np.testing.assert_allclose(y, np.minimum(peak, x * bandwidth) / 1e12)
    points = {line.get_label().split(" (")[0]: line.get_data() for line in ax.get_lines() if line.get_marker() == "o"}
    assert points["memory-bound"][1][0] == pytest.approx(1.0 * bandwidth / 1e12)
    assert points["compute-bound"][1][0] == pytest.approx(peak / 1e12)
    assert "not a measurement" in ax.get_title()


def test_roofline_rejects_bad_numbers():
    with pytest.raises(ValueError, match="peak_flops must be > 0"):
        kernel_diagrams.plot_roofline({"k": (1, 1)}, peak_flops=0, bandwidth=1, device="x")
    with pytest.raises(ValueError, match=r"bandwidth must be a positive number \(finite\)"):
        kernel_diagrams.plot_roofline({"k": (1, 1)}, peak_flops=1, bandwidth=float("inf"), device="x")
    with pytest.raises(TypeError, match="peak_flops must be a positive number, got str"):
        kernel_diagrams.plot_roofline({"k": (1, 1)}, peak_flops="1e12", bandwidth=1, device="x")
    with pytest.raises(ValueError, match=r"kernels\['k'\] needs positive finite"):
        kernel_diagrams.plot_roofline({"k": (1, -1)}, peak_flops=1, bandwidth=1, device="x")
    with pytest.raises(TypeError, match="non-empty mapping"):
        kernel_diagrams.plot_roofline({}, peak_flops=1, bandwidth=1, device="x")
