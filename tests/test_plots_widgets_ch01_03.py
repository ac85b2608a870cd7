"""Figures and the GMM explorer of chapters 1-3: slopes are fitted right, pictures draw what they are given,
the explorer's sliders change the mixture it shows, and bad input fails with a clear message."""
import math

import matplotlib
import numpy as np
import pytest
import torch

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from gma_teach import gmm, plots  # noqa: E402
from gma_teach.widgets import GMMExplorer  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_loglog_slope_recovers_random_power_laws():
    generator = np.random.default_rng(0)
    sizes = np.array([64.0, 128.0, 256.0, 512.0, 1024.0])
    for _ in range(5):
        exponent, scale = generator.uniform(-1, 3), generator.uniform(0.1, 10)
        assert plots.loglog_slope(sizes, scale * sizes**exponent) == pytest.approx(exponent, abs=1e-9)


@pytest.mark.parametrize(
    "sizes, values, message",
    [([1.0], [1.0], "at least 2"), ([1.0, 2.0], [1.0], "same length"), ([1.0, 2.0], [1.0, 0.0], "positive")],
)
def test_loglog_slope_rejects_bad_input(sizes, values, message):
    with pytest.raises(ValueError, match=message):
        plots.loglog_slope(sizes, values)


def test_plot_scaling_labels_fitted_slopes_and_skips_missing_points():
    sizes = [128, 256, 512, 1024]
    quadratic = [float(n) ** 2 for n in sizes]
    linear_with_gap = [float(n) for n in sizes[:-1]] + [float("nan")]
    fig = plots.plot_scaling(sizes, {"softmax": quadratic, "gma": linear_with_gap}, ylabel="bytes")
    labels = [text.get_text() for text in fig.axes[0].get_legend().get_texts()]
    assert labels == ["softmax (slope 2.00)", "gma (slope 1.00)"]
    assert fig.axes[0].get_lines()[0].get_color() == plots.COLORS["softmax"]


def test_plot_scaling_rejects_a_series_of_the_wrong_length():
    with pytest.raises(ValueError, match=r"series\['gma'\] must have one value per size"):
        plots.plot_scaling([1, 2, 3], {"gma": [1.0, 2.0]}, ylabel="s")


def test_plot_matrices_draws_each_matrix_as_given():
    first, second = torch.rand(5, 7), torch.rand(5, 7)
    fig = plots.plot_matrices({"a": first, "b": second})
    images = [ax.get_images()[0] for ax in fig.axes if ax.get_images()]
    assert len(images) == 2
    np.testing.assert_allclose(images[0].get_array(), first.double().numpy())
    np.testing.assert_allclose(images[1].get_array(), second.double().numpy())


def test_plot_matrices_rejects_non_matrices():
    with pytest.raises(ValueError, match=r"matrices\['x'\] must be 2-D"):
        plots.plot_matrices({"x": torch.rand(2, 3, 4)})


def _mixture(k, d, seed=0):
    generator = torch.Generator().manual_seed(seed)
    means = 2 * torch.randn(k, d, generator=generator, dtype=torch.float64)
    variances = 0.3 + torch.rand(k, d, generator=generator, dtype=torch.float64)
    log_priors = torch.log_softmax(torch.randn(k, generator=generator, dtype=torch.float64), -1)
    return means, variances, log_priors


def test_plot_responsibilities_1d_stacks_the_responsibilities():
    means, variances, log_priors = _mixture(3, 1)
    fig = plots.plot_responsibilities_1d(means, variances, log_priors, x_range=(-4.0, 4.0), n_points=50)
    stack_ax = fig.axes[1]
    # the top edge of the last stacked band is the sum of all responsibilities: 1 everywhere
    top = stack_ax.collections[-1].get_paths()[0].vertices[:, 1].max()
    assert top == pytest.approx(1.0)
    grid = torch.linspace(-4.0, 4.0, 50, dtype=torch.float64).unsqueeze(-1)
    densities = gmm.log_joint(grid, means, variances, log_priors).exp()
    for k, line in enumerate(fig.axes[0].get_lines()[:3]):
        np.testing.assert_allclose(line.get_ydata(), densities[:, k].numpy())


def test_plot_responsibilities_2d_pixels_are_responsibility_blends():
    means, variances, log_priors = _mixture(4, 2, seed=1)
    extent = (-3.0, 3.0, -2.0, 2.0)
    fig = plots.plot_responsibilities_2d(means, variances, log_priors, extent=extent, n_points=9)
    image = np.asarray(fig.axes[0].get_images()[0].get_array())
    xs, ys = torch.linspace(-3, 3, 9, dtype=torch.float64), torch.linspace(-2, 2, 9, dtype=torch.float64)
    point = torch.stack([xs[2], ys[6]]).unsqueeze(0)
    gamma = gmm.responsibilities_direct(point, means, variances, log_priors)[0].numpy()
    np.testing.assert_allclose(image[6, 2], gamma @ plots.component_colors(4), atol=1e-12)


def test_plot_responsibilities_rejects_wrong_dimension():
    means, variances, log_priors = _mixture(3, 2)
    with pytest.raises(ValueError, match=r"\(K, 1\) for a 1-D plot"):
        plots.plot_responsibilities_1d(means, variances, log_priors)
    with pytest.raises(ValueError, match="variances must have the shape of means"):
        plots.plot_responsibilities_2d(means, variances[:, :1], log_priors)


@pytest.mark.parametrize("dim", [1, 2])
def test_explorer_sliders_change_the_mixture_it_draws(dim):
    explorer = GMMExplorer(dim=dim, n_components=3)
    controls = explorer._build_controls()
    component, mean_x = controls.children[0], controls.children[1]
    variance, n_components = controls.children[-2], controls.children[-1]
    component.value = 1
    mean_x.value = 1.7
    variance.value = 2.0
    assert explorer.means[1, 0].item() == pytest.approx(1.7)
    assert explorer.variances[1].tolist() == pytest.approx([2.0] * dim)
    n_components.value = 5
    assert explorer.means.shape == (5, dim)
    assert explorer.log_priors.exp().sum().item() == pytest.approx(1.0)
    assert component.options == tuple(range(5))
    fig = explorer.figure()
    assert fig.axes, "the explorer draws a figure"


def test_explorer_rejects_bad_arguments():
    with pytest.raises(ValueError, match="dim must be 1 or 2"):
        GMMExplorer(dim=3)
    with pytest.raises(ValueError, match=r"n_components must be an int in \[1, 8\]"):
        GMMExplorer(dim=1, n_components=0)
    explorer = GMMExplorer(dim=2, n_components=2)
    with pytest.raises(ValueError, match="mean must have 2 number"):
        explorer.set_component(0, mean=1.0)
    with pytest.raises(ValueError, match="variance must be > 0"):
        explorer.set_component(0, variance=-1.0)
    assert math.isclose(explorer.log_priors.exp().sum().item(), 1.0)


# ----------------------------------------------------------------------------------------- chapter 3's explorer
def test_query_explorer_rows_are_gma_and_softmax_attention_of_the_query():
    from gma_teach.widgets.query_explorer import QueryExplorer

    explorer = QueryExplorer(n_components=5, n_keys=17, variance=0.7, seed=2)
    explorer.set_query(0.3, -1.9)
    rows = explorer.rows()
    priors = torch.full((5,), -math.log(5), dtype=torch.float64)
    gamma_q = gmm.responsibilities_direct(explorer.query[None], explorer.means, explorer.variances, priors)[0]
    gamma_k = gmm.responsibilities_direct(explorer.keys, explorer.means, explorer.variances, priors)
    affinity = gamma_k @ gamma_q
    torch.testing.assert_close(rows["gamma_q"], gamma_q)
    torch.testing.assert_close(rows["gma"], affinity / (affinity.sum() + 1e-6))
    torch.testing.assert_close(rows["softmax"], torch.softmax(explorer.keys @ explorer.query / math.sqrt(2), -1))
    # keys are drawn sorted by their most likely component
    assert torch.equal(gamma_k.argmax(-1), gamma_k.argmax(-1).sort(stable=True).values)


def test_query_explorer_figure_follows_the_query_and_the_variance():
    from gma_teach.widgets.query_explorer import QueryExplorer

    explorer = QueryExplorer(n_components=4, n_keys=12)
    bars_before = [bar.get_height() for bar in explorer.figure().axes[1].patches]
    explorer.set_query(-2.5, 0.0)  # onto component 2 (means on a circle)
    fig = explorer.figure()
    bars_after = [bar.get_height() for bar in fig.axes[1].patches]
    assert len(bars_after) == 4 and int(np.argmax(bars_after)) == 2 and bars_after != bars_before
    lines = {line.get_label(): line.get_ydata() for line in fig.axes[2].lines}
    assert set(lines) == {"GMA", "softmax"}
    np.testing.assert_allclose(lines["GMA"], explorer.rows()["gma"].numpy())
    sharp = explorer.rows()["gamma_q"].max()
    explorer.set_variance(5.0)  # wide components: softer responsibilities
    assert explorer.rows()["gamma_q"].max() < sharp


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"n_components": 1}, "n_components must be an int in \\[2, 8\\], got 1"),
        ({"n_keys": 100}, "n_keys must be an int in \\[2, 64\\], got 100"),
        ({"variance": 0.0}, "variance must be > 0, got 0.0"),
    ],
)
def test_query_explorer_rejects_bad_arguments(kwargs, message):
    from gma_teach.widgets.query_explorer import QueryExplorer

    with pytest.raises(ValueError, match=message):
        QueryExplorer(**kwargs)
    with pytest.raises(ValueError, match="x must be a finite number, got nan"):
        QueryExplorer().set_query(float("nan"), 0.0)


def _scaling(**kwargs):
    return plots.plot_scaling([1, 2, 4], {"a": [1.0, 2.0, 4.0]}, ylabel="s", **kwargs)


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: plots.component_colors(2.0), TypeError, "n_components must be an int, got float"),
        (lambda: plots.component_colors(0), ValueError, "n_components must be >= 1, got 0"),
        (lambda: _scaling(fit_last=2.5), TypeError, "fit_last must be an int"),
        (lambda: _scaling(fit_last=1), ValueError, "fit_last must be >= 2"),
        (lambda: GMMExplorer(n_components=True), TypeError, "n_components must be an int, got bool"),
        (lambda: GMMExplorer(n_components=2).set_component(2), ValueError, r"k must be an int in \[0, 1\], got 2"),
        (lambda: GMMExplorer().set_component(0, variance="1"), TypeError, "variance must be a positive number"),
        (lambda: GMMExplorer().set_n_components(9), ValueError, r"n_components must be an int in \[1, 8\], got 9"),
    ],
)
def test_views_follow_the_one_error_rule(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_query_explorer_refuses_wrong_types_with_type_error():
    from gma_teach.widgets.query_explorer import QueryExplorer

    with pytest.raises(TypeError, match="n_keys must be an int, got float"):
        QueryExplorer(n_keys=10.0)
    with pytest.raises(TypeError, match="y must be a number, got str"):
        QueryExplorer().set_query(0.0, "1")
    with pytest.raises(TypeError, match="variance must be a positive number, got bool"):
        QueryExplorer().set_variance(True)


def test_routing_explorer_follows_the_one_error_rule():
    from gma_teach.widgets.routing_explorer import RoutingExplorer

    resp = torch.softmax(torch.randn(5, 3, generator=torch.Generator().manual_seed(0)), -1)
    explorer = RoutingExplorer(resp, list("abcde"))
    explorer.set_position(np.int64(4))  # NumPy ints are ints
    assert explorer.position == 4
    with pytest.raises(TypeError, match="single str"):
        RoutingExplorer(resp, "abcde")
    with pytest.raises(TypeError, match="position must be an int, got float"):
        explorer.set_position(1.0)
    with pytest.raises(ValueError, match=r"component must be an int in \[0, 2\], got 3"):
        explorer.set_component(3)
