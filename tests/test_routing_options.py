"""The routing-collapse remedies of the GMA layer: each option does what it claims; the defaults change nothing."""
import math

import pytest
import torch

from gma_teach import GaussianMixtureAttention
from gma_teach.gmm import kmeans
from gma_teach.layer import routing_balance_loss
from gma_teach.models import DecoderLM, EncoderClassifier, auxiliary_loss, init_routing_means


def _normalized_inputs(b=3, n=40, d=32, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.nn.functional.layer_norm(torch.randn(b, n, d, generator=generator), (d,))


def _routing_entropy(layer, x):
    gamma_q, _ = layer.routing(x)
    return float(-(gamma_q * gamma_q.clamp_min(1e-30).log()).sum(-1).mean().detach())


def _clustered(n_clusters, per_cluster, dim, *, spread=0.05, scale=3.0, seed=0):
    generator = torch.Generator().manual_seed(seed)
    centres = scale * torch.randn(n_clusters, dim, generator=generator, dtype=torch.float64)
    labels = torch.arange(n_clusters).repeat_interleave(per_cluster)
    points = centres[labels] + spread * torch.randn(len(labels), dim, generator=generator, dtype=torch.float64)
    return points[torch.randperm(len(labels), generator=generator)], centres


def test_defaults_are_the_explicit_old_defaults():
    torch.manual_seed(3)
    default = GaussianMixtureAttention(16, 2, 5, causal=True)
    torch.manual_seed(3)
    explicit = GaussianMixtureAttention(16, 2, 5, causal=True, init_variance=1.0, init_mean_std=1.0,
                                        balance_weight=0.0)
    for (name, a), (_, b) in zip(default.state_dict().items(), explicit.state_dict().items()):
        assert torch.equal(a, b), name
    torch.testing.assert_close(default.mixture.variances, torch.full((2, 5, 8), 1.0 + 1e-3), rtol=1e-6, atol=0)
    assert default.auxiliary_loss().item() == 0.0
    x = torch.randn(2, 9, 16)
    assert torch.equal(default(x), explicit(x))


def test_balance_weight_adds_a_loss_but_leaves_the_output_unchanged():
    torch.manual_seed(4)
    plain = GaussianMixtureAttention(16, 2, 5, causal=True)
    torch.manual_seed(4)
    balanced = GaussianMixtureAttention(16, 2, 5, causal=True, balance_weight=0.5)
    x = torch.randn(2, 9, 16)
    # the balanced layer needs the responsibilities, so gma() takes an operator form where the plain layer takes
    # the lean one: the same function, summed in another order
    torch.testing.assert_close(plain(x), balanced(x), rtol=1e-5, atol=1e-6)
    plain.impl = balanced.impl = "chunked"  # one form for both: identical to the bit
    assert torch.equal(plain(x), balanced(x))
    torch.testing.assert_close(balanced.auxiliary_loss(), 0.5 * balanced.balance_loss())


def test_variance_init_at_d_route_softens_the_initial_routing():
    x = _normalized_inputs(d=64)
    torch.manual_seed(0)
    unit = GaussianMixtureAttention(64, 2, 32, init_variance=1.0)
    torch.manual_seed(0)
    scaled = GaussianMixtureAttention(64, 2, 32, init_variance="d_route")
    assert scaled.init_variance == 32.0
    torch.testing.assert_close(scaled.mixture.variances, torch.full((2, 32, 32), 32.0 + 1e-3))
    low, high = _routing_entropy(unit, x), _routing_entropy(scaled, x)
    assert high > low + 1.0, (low, high)
    assert high > 0.9 * math.log(32)


@pytest.mark.parametrize("batched", [False, True])
def test_kmeans_finds_the_centres_of_clustered_data(batched):
    points, centres = _clustered(6, 30, 5)
    if batched:
        other, other_centres = _clustered(6, 30, 5, seed=1)
        points, centres = torch.stack([points, other]), torch.stack([centres, other_centres])
    found = kmeans(points, 6, n_iter=20, seed=2)
    assert found.shape == centres.shape
    distances = torch.cdist(centres, found)  # each true centre has one found centre within the noise
    assert distances.min(-1).values.max() < 0.05
    assert (distances.argmin(-1).sort(-1).values == torch.arange(6)).all()  # one found centre per cluster


def test_kmeans_refuses_too_few_points():
    with pytest.raises(ValueError, match="at least n_components=5 points"):
        kmeans(torch.randn(4, 3), 5)
    with pytest.raises(TypeError, match="n_components must be an int"):
        kmeans(torch.randn(4, 3), 2.0)


def _projected(layer, x, head):
    route = slice(head * layer.d_route, (head + 1) * layer.d_route)
    return x @ layer.q_proj.weight[route].T + layer.q_proj.bias[route]


def test_init_means_from_places_means_at_cluster_centres():
    torch.manual_seed(5)
    layer = GaussianMixtureAttention(12, 2, 4, d_route=3, d_value=6).double()
    with torch.no_grad():  # queries and keys route the same way, so both see the same clusters
        layer.k_proj.load_state_dict(layer.q_proj.state_dict())
    points, centres = _clustered(4, 25, 12, spread=0.01)
    x = points.reshape(4, 25, 12)
    before = layer.mixture.variances.clone()
    layer.init_means_from(x, n_iter=20)
    for head in range(2):
        projected_centres = _projected(layer, centres, head)
        distances = torch.cdist(projected_centres, layer.mixture.means[head].detach())
        assert distances.min(-1).values.max() < 0.02
    assert torch.equal(layer.mixture.variances, before)  # fit_variances=False leaves them alone


def test_init_means_from_can_fit_the_variances_of_each_cluster():
    torch.manual_seed(6)
    layer = GaussianMixtureAttention(8, 1, 3, d_route=4).double()
    with torch.no_grad():
        layer.k_proj.load_state_dict(layer.q_proj.state_dict())
    points, centres = _clustered(3, 200, 8, spread=0.3, scale=5.0, seed=3)
    layer.init_means_from(points.reshape(6, 100, 8), n_iter=20, fit_variances=True)
    projected = _projected(layer, points, 0)
    labels = torch.cdist(points, centres).argmin(-1)
    for cluster in range(3):
        mine = projected[labels == cluster]
        component = torch.cdist(mine.mean(0, keepdim=True), layer.mixture.means[0].detach()).argmin()
        torch.testing.assert_close(layer.mixture.variances[0, component].detach(), mine.var(0, unbiased=False),
                                   rtol=1e-6, atol=1e-9)


def test_init_means_from_leaves_padding_out():
    torch.manual_seed(7)
    layer = GaussianMixtureAttention(8, 2, 3).double()
    x = torch.randn(2, 6, 8, dtype=torch.float64)
    padded = torch.cat([x, 1e3 * torch.ones(2, 4, 8, dtype=torch.float64)], dim=1)
    mask = torch.arange(10)[None].expand(2, -1) < 6
    layer.init_means_from(padded, key_padding_mask=mask, seed=1)
    with_mask = layer.mixture.means.detach().clone()
    layer.init_means_from(x, seed=1)
    torch.testing.assert_close(with_mask, layer.mixture.means.detach())


def test_balance_loss_is_smallest_for_uniform_usage_and_largest_when_collapsed():
    k = 8
    uniform = torch.eye(k).repeat(3, 1)[None]  # every component wins 3 of 24 tokens, one-hot
    collapsed = torch.zeros(1, 24, k)
    collapsed[..., 0] = 1.0
    soft = torch.softmax(torch.randn(2, 24, k), -1)
    assert routing_balance_loss(uniform).item() == pytest.approx(1.0)
    assert routing_balance_loss(collapsed).item() == pytest.approx(k)
    assert 1.0 <= routing_balance_loss(soft).item() <= k
    assert routing_balance_loss(uniform, form="entropy").item() == pytest.approx(0.0, abs=1e-6)
    assert routing_balance_loss(collapsed, form="entropy").item() == pytest.approx(math.log(k), rel=1e-5)


def test_balance_loss_mask_counts_only_real_tokens():
    gamma = torch.softmax(torch.randn(2, 3, 10, 5, dtype=torch.float64), -1)
    mask = torch.ones(2, 10, dtype=torch.bool)
    mask[1, 6:] = False
    kept = torch.cat([gamma[0].transpose(0, 1), gamma[1, :, :6].transpose(0, 1)], dim=0)  # (16, H, K) real tokens
    for form in ("switch", "entropy"):
        expected = routing_balance_loss(kept.transpose(0, 1)[None], form=form)
        torch.testing.assert_close(routing_balance_loss(gamma, form=form, mask=mask), expected)


@pytest.mark.parametrize("form", ["switch", "entropy"])
def test_balance_loss_has_gradients_for_the_mixture(form):
    torch.manual_seed(8)
    layer = GaussianMixtureAttention(16, 2, 6, causal=True, balance_weight=1.0, balance_form=form)
    layer(torch.randn(2, 11, 16))
    layer.auxiliary_loss().backward()
    for parameter in (layer.mixture.means, layer.mixture.raw_variances, layer.mixture.prior_logits,
                      layer.q_proj.weight):
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0


def test_balance_loss_needs_the_option_and_a_forward():
    with pytest.raises(RuntimeError, match="balance_weight > 0"):
        GaussianMixtureAttention(8, 2, 3).balance_loss()
    with pytest.raises(RuntimeError, match="forward"):
        GaussianMixtureAttention(8, 2, 3, balance_weight=0.1).balance_loss()


@pytest.mark.parametrize("kwargs, error, message", [
    ({"init_variance": "large"}, ValueError, "init_variance"),
    ({"init_variance": 0.0}, ValueError, "init_variance"),
    ({"balance_weight": -1.0}, ValueError, "balance_weight"),
    ({"balance_weight": float("inf")}, ValueError, "balance_weight"),
    ({"balance_weight": "0.1"}, TypeError, "balance_weight"),
    ({"balance_form": "kl"}, ValueError, "balance_form"),
    ({"init_mean_std": -1.0}, ValueError, "init_std"),
])
def test_bad_remedy_options_raise_clear_errors(kwargs, error, message):
    with pytest.raises(error, match=message):
        GaussianMixtureAttention(8, 2, 3, **kwargs)


def test_models_sum_the_auxiliary_losses_and_initialize_every_layer():
    torch.manual_seed(9)
    options = {"n_components": 4, "balance_weight": 0.3, "init_variance": "d_route", "chunk_size": 4}
    model = DecoderLM(30, 16, 3, 2, mixer="gma", max_seq_len=20, mixer_options=options)
    tokens = torch.randint(0, 30, (2, 12), generator=torch.Generator().manual_seed(0))
    means = [block.mixer.mixture.means.detach().clone() for block in model.blocks]
    assert model.init_routing_means(tokens) == 3
    assert all(not torch.equal(m, block.mixer.mixture.means) for m, block in zip(means, model.blocks))
    model(tokens)
    expected = sum(0.3 * block.mixer.balance_loss() for block in model.blocks)
    torch.testing.assert_close(model.auxiliary_loss(), expected)
    torch.testing.assert_close(auxiliary_loss(model), expected)
    plain = EncoderClassifier(30, 2, 16, 1, 2, mixer="softmax", max_seq_len=20)
    assert plain.auxiliary_loss().item() == 0.0 and init_routing_means(plain, tokens) == 0
