"""The explanatory diagrams of chapters 3, 4 and 6: each returns a Figure with the parts it promises.

No pixels are compared: the tests read the artists (texts, patches, lines) that carry the diagram's meaning.
"""
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from gma_teach.plots import diagrams  # noqa: E402


def _texts(fig) -> list[str]:
    return [text.get_text() for ax in fig.axes for text in ax.texts]


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def test_write_read_draws_one_line_per_responsibility_with_width_set_by_it():
    fig = diagrams.draw_write_read(n_keys=5, n_queries=4, n_components=3, seed=1)
    assert isinstance(fig, Figure)
    texts = " ".join(_texts(fig))
    assert "write:" in texts and "read:" in texts and "K = 3 slots (fixed)" in texts
    assert sum(text.startswith("slot ") for text in _texts(fig)) == 3
    lines = fig.axes[0].lines
    assert len(lines) == 5 * 3 + 3 * 4  # key -> slot and slot -> query, never query -> key
    write_widths = np.array([line.get_linewidth() for line in lines[:15]]).reshape(5, 3)
    np.testing.assert_allclose(write_widths.sum(-1), 4.0)  # each key's responsibilities sum to 1


def test_write_read_is_seeded():
    widths = [[line.get_linewidth() for line in diagrams.draw_write_read(seed=3).axes[0].lines] for _ in range(2)]
    assert widths[0] == widths[1]
    other = [line.get_linewidth() for line in diagrams.draw_write_read(seed=4).axes[0].lines]
    assert other != widths[0]


def test_bracket_move_draws_every_matrix_to_its_shape():
    n, k, d_v = 7, 3, 5
    fig = diagrams.draw_bracket_move(n_tokens=n, n_components=k, d_value=d_v)
    texts = _texts(fig)
    assert any("affinity: N x N" in text for text in texts)
    assert any("K x $d_v$" in text and "memory" in text for text in texts)
    rectangles = [patch for patch in fig.axes[0].patches if isinstance(patch, Rectangle)]
    shapes = {(round(patch.get_height() / 0.22), round(patch.get_width() / 0.22)) for patch in rectangles}
    assert shapes == {(n, k), (k, n), (n, n), (n, d_v), (k, d_v)}


def test_chunk_blocks_shade_the_masked_diagonal_blocks_and_hatch_the_carried_past():
    n, c = 10, 4  # the last chunk is shorter
    fig = diagrams.draw_chunk_blocks(n_tokens=n, chunk_size=c)
    blocks, scan = fig.axes
    cells = [p for p in blocks.patches if isinstance(p, Rectangle) and p.get_width() == 1 and p.get_fill()
             and p.get_alpha() == 0.55]
    chunk_lengths = [4, 4, 2]
    assert len(cells) == sum(length * (length + 1) // 2 for length in chunk_lengths)
    hatched = [p for p in blocks.patches if p.get_hatch() == "//" and p.get_width() > 0.8]
    assert len(hatched) == 3  # blocks (2, 1), (3, 1), (3, 2)
    scan_texts = [t.get_text() for t in scan.texts]
    assert sum(text.startswith("chunk ") for text in scan_texts) == 3
    assert "tokens 9-10" in " ".join(scan_texts)


@pytest.mark.parametrize(
    "draw, kwargs, error, message",
    [
        (diagrams.draw_write_read, {"n_keys": 0}, ValueError, "n_keys must be >= 1, got 0"),
        (diagrams.draw_write_read, {"n_components": 9}, ValueError, "at most"),
        (diagrams.draw_write_read, {"n_keys": 2.5}, TypeError, "n_keys must be an int, got float"),
        (diagrams.draw_bracket_move, {"n_tokens": 1}, ValueError, "n_tokens must be >= 2"),
        (diagrams.draw_chunk_blocks, {"n_tokens": 8, "chunk_size": 9}, ValueError, "chunk_size <= N"),
    ],
)
def test_diagrams_reject_sizes_they_cannot_draw(draw, kwargs, error, message):
    with pytest.raises(error, match=message):
        draw(**kwargs)
