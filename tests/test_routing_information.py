"""The information a router carries (chapter 11): hand-computed cases, an independent loop spec, the shuffled
baseline, the names it gives a router, the information loss and the health records that carry it."""
import math

import pytest
import torch

from gma_teach import GaussianMixtureAttention, diagnostics
from gma_teach.diagnostics import routing_information, routing_state, shuffled_information
from gma_teach.layer import routing_balance_loss


def _loop_information(resp):
    """I in nats per head by explicit loops: H(mean row) - mean H(row), rows given as lists (T, K)."""
    n_tokens, n_components = len(resp), len(resp[0])
    usage = [sum(row[k] for row in resp) / n_tokens for k in range(n_components)]
    usage_entropy = -sum(p * math.log(p) for p in usage if p > 0)
    token_entropy = sum(-sum(p * math.log(p) for p in row if p > 0) for row in resp) / n_tokens
    return usage_entropy - token_entropy, usage_entropy, token_entropy


@pytest.mark.parametrize("n_components", [2, 7, 64])
def test_hand_computed_cases(n_components):
    log_k = math.log(n_components)
    one_component = torch.zeros(9, n_components, dtype=torch.float64)
    one_component[:, 0] = 1.0  # every token to component 0: collapsed
    uniform = torch.full((11, n_components), 1.0 / n_components, dtype=torch.float64)  # dissolved
    split = torch.eye(n_components, dtype=torch.float64).repeat(3, 1)  # a perfect K-way split
    collapsed, dissolved, perfect = (routing_information(r) for r in (one_component, uniform, split))
    assert collapsed["bits"] == pytest.approx(0.0, abs=1e-12) and collapsed["usage_entropy"] == pytest.approx(0.0)
    assert collapsed["mean_max_ratio"] == pytest.approx(n_components)  # sharp, but always the same component
    assert dissolved["bits"] == pytest.approx(0.0, abs=1e-12) and dissolved["usage_entropy"] == pytest.approx(1.0)
    assert dissolved["token_entropy"] == pytest.approx(1.0) and dissolved["mean_max_ratio"] == pytest.approx(1.0)
    assert perfect["bits"] == pytest.approx(math.log2(n_components)) and perfect["share"] == pytest.approx(1.0)
    assert perfect["token_entropy"] == pytest.approx(0.0, abs=1e-12)
    # two components each taking half the tokens, sharply: exactly one bit whatever K is
    halves = torch.zeros(10, n_components, dtype=torch.float64)
    halves[:5, 0], halves[5:, 1] = 1.0, 1.0
    assert routing_information(halves)["bits"] == pytest.approx(1.0)
    assert routing_information(halves)["share"] == pytest.approx(math.log(2) / log_k)


def test_matches_loops_on_odd_sizes_per_head():
    generator = torch.Generator().manual_seed(3)
    logits = torch.randn(13, 3, 5, generator=generator, dtype=torch.float64) * torch.tensor([0.2, 1.0, 5.0]).view(
        1, 3, 1).double()
    resp = torch.softmax(logits, dim=-1)  # (T, H, K): three heads from nearly uniform to nearly one-hot
    got = routing_information(resp)
    per_head = [_loop_information(resp[:, h].tolist()) for h in range(3)]
    assert got["bits"] == pytest.approx(sum(i for i, _, _ in per_head) / 3 / math.log(2))
    assert got["usage_entropy"] == pytest.approx(sum(u for _, u, _ in per_head) / 3 / math.log(5))
    assert got["token_entropy"] == pytest.approx(sum(t for _, _, t in per_head) / 3 / math.log(5))
    assert got["mean_max_ratio"] == pytest.approx(float(resp.max(-1).values.mean()) * 5)
    assert got["share"] == pytest.approx(got["usage_entropy"] - got["token_entropy"])
    assert got["n_heads"] == 3 and got["n_components"] == 5
    # heads are routers of their own: averaging sharp heads first would make them look dissolved
    sharp_heads = torch.stack([torch.eye(4).repeat(2, 1), torch.eye(4).roll(1, 0).repeat(2, 1)], dim=1).double()
    assert routing_information(sharp_heads)["bits"] == pytest.approx(2.0)
    assert routing_information(sharp_heads.mean(dim=1))["bits"] == pytest.approx(1.0)


def test_shuffled_baseline_separates_a_working_router_from_failed_ones():
    generator = torch.Generator().manual_seed(0)
    n_components = 16
    assignments = torch.randint(0, n_components, (400,), generator=generator)
    working = torch.softmax(6.0 * torch.nn.functional.one_hot(assignments, n_components).double()
                            + 0.3 * torch.randn(400, n_components, generator=generator, dtype=torch.float64), -1)
    dissolved = torch.softmax(0.05 * torch.randn(400, n_components, generator=generator, dtype=torch.float64), -1)
    collapsed = torch.softmax(torch.tensor([8.0] + [0.0] * (n_components - 1), dtype=torch.float64)
                              + 0.1 * torch.randn(400, n_components, generator=generator, dtype=torch.float64), -1)
    for resp, expected in ((working, "in use"), (dissolved, "dissolved"), (collapsed, "collapsed")):
        info = routing_information(resp)
        baseline = shuffled_information(resp, n_shuffles=20, seed=1)
        assert baseline["std"] >= 0 and baseline["n_shuffles"] == 20
        assert routing_state(info["bits"], usage_entropy=info["usage_entropy"],
                             token_entropy=info["token_entropy"], untrained=0.0,
                             shuffled=baseline, n_components=n_components) == expected
    info = routing_information(working)
    baseline = shuffled_information(working, n_shuffles=20, seed=1)
    assert info["bits"] > baseline["mean"] + 3 * baseline["std"]
    # a router that gained less than MIN_SHARE of log K over the untrained model is not in use: sharp rows and
    # spread usage make it neither collapsed nor dissolved
    assert routing_state(info["bits"], usage_entropy=info["usage_entropy"], token_entropy=info["token_entropy"],
                         untrained=info["bits"] - 0.1, shuffled=baseline, n_components=n_components) == "at baseline"
    # reproducible by seed
    assert shuffled_information(working, n_shuffles=5, seed=4) == shuffled_information(working, n_shuffles=5, seed=4)


def test_shuffling_keeps_each_components_column():
    resp = torch.softmax(torch.randn(7, 3, generator=torch.Generator().manual_seed(2), dtype=torch.float64), -1)
    # a column shuffle of a matrix whose rows are all the same changes nothing
    same_rows = resp[:1].repeat(9, 1)
    baseline = shuffled_information(same_rows, n_shuffles=3)
    assert baseline["mean"] == pytest.approx(routing_information(same_rows)["bits"], abs=1e-12)
    assert baseline["std"] == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("bad, error, message", [
    ("rows", TypeError, "resp must be a tensor"),
    (torch.ones(3, 4, dtype=torch.long), TypeError, "floating point"),
    (torch.ones(4), ValueError, "shape"),
    (torch.ones(3, 1), ValueError, "K >= 2"),
    (torch.full((3, 2), 0.7), ValueError, "sum to 1"),
    (torch.tensor([[1.5, -0.5]]), ValueError, "non-negative"),
    (torch.tensor([[float("nan"), 1.0]]), ValueError, "finite"),
])
def test_bad_input_is_refused(bad, error, message):
    with pytest.raises(error, match=message):
        routing_information(bad)
    with pytest.raises(error, match=message):
        shuffled_information(bad)


ZERO = {"mean": 0.0, "std": 0.0}


def test_routing_state_rejects_bad_arguments():
    with pytest.raises(TypeError, match="shuffled"):
        routing_state(1.0, usage_entropy=0.5, token_entropy=0.2, untrained=0.0, shuffled=0.2, n_components=4)
    with pytest.raises(ValueError, match="information"):
        routing_state(float("nan"), usage_entropy=0.5, token_entropy=0.2, untrained=0.0, shuffled=ZERO,
                      n_components=4)
    with pytest.raises(ValueError, match="n_sd"):
        routing_state(1.0, usage_entropy=0.5, token_entropy=0.2, untrained=0.0, shuffled=ZERO, n_components=4,
                      n_sd=0)
    with pytest.raises(ValueError, match="n_components"):
        routing_state(1.0, usage_entropy=0.5, token_entropy=0.2, untrained=0.0, shuffled=ZERO, n_components=1)
    with pytest.raises(ValueError, match="n_shuffles"):
        shuffled_information(torch.eye(3).double(), n_shuffles=1)


def test_information_loss_is_log_k_minus_information():
    generator = torch.Generator().manual_seed(1)
    gamma = torch.softmax(2.0 * torch.randn(3, 2, 9, 5, generator=generator, dtype=torch.float64), dim=-1)
    loss = routing_balance_loss(gamma, form="information")
    per_head = [routing_information(gamma[:, h].reshape(-1, 5))["bits"] * math.log(2) for h in range(2)]
    assert loss.item() == pytest.approx(math.log(5) - sum(per_head) / 2)
    # zero for a perfect split, log K for collapsed or dissolved routing
    split = torch.eye(5, dtype=torch.float64).repeat(2, 1)[None]
    assert routing_balance_loss(split, form="information").item() == pytest.approx(0.0, abs=1e-9)
    uniform = torch.full((1, 6, 5), 0.2, dtype=torch.float64)
    assert routing_balance_loss(uniform, form="information").item() == pytest.approx(math.log(5))
    # padded tokens do not count
    mask = torch.tensor([[True] * 6 + [False] * 3] * 3)
    kept = gamma[:, :, :6].transpose(0, 1).reshape(2, -1, 5)[None]  # (1, H, 3 * 6, K)
    torch.testing.assert_close(routing_balance_loss(gamma, form="information", mask=mask),
                               routing_balance_loss(kept, form="information"))


def test_information_loss_trains_the_mixture_towards_a_split():
    torch.manual_seed(0)
    layer = GaussianMixtureAttention(8, 1, 4, causal=True, balance_weight=1.0, balance_form="information",
                                     init_variance="d_route")
    x = torch.randn(2, 24, 8)
    before = routing_information(layer.routing(x)[0][:, 0].reshape(-1, 4).detach())["bits"]
    optimizer = torch.optim.Adam(layer.parameters(), lr=0.05)
    for _ in range(60):
        optimizer.zero_grad()
        layer(x)
        layer.auxiliary_loss().backward()
        optimizer.step()
    after = routing_information(layer.routing(x)[0][:, 0].reshape(-1, 4).detach())["bits"]
    assert after > before + 0.5


def test_health_records_information_per_head():
    generator = torch.Generator().manual_seed(5)
    logits = torch.randn(3, 2, 7, 5, generator=generator, dtype=torch.float64) * torch.tensor([0.5, 6.0]).view(
        1, 2, 1, 1).double()
    log_resp = torch.log_softmax(logits, dim=-1)
    health = diagnostics.head_health(log_resp)
    for head in range(2):
        rows = log_resp[:, head].reshape(-1, 5).exp()
        expected = routing_information(rows)
        assert health["information"][head] == pytest.approx(expected["bits"])
        assert health["token_entropy"][head] == pytest.approx(expected["token_entropy"])
        assert health["mean_max_ratio"][head] == pytest.approx(expected["mean_max_ratio"])
    assert set(diagnostics.HEALTH_METRICS) <= set(health)


def test_information_report_names_the_router_and_carries_both_baselines():
    split = torch.eye(8, dtype=torch.float64).repeat(20, 1)
    uniform = torch.full((160, 8), 1 / 8, dtype=torch.float64)
    report = diagnostics.information_report(split, [uniform, uniform], n_shuffles=5)
    assert report["state"] == "in use" and report["trained"]["bits"] == pytest.approx(3.0)
    assert report["untrained"] == {"mean": pytest.approx(0.0, abs=1e-12), "std": pytest.approx(0.0, abs=1e-12),
                                   "n": 2}
    assert report["separation_sd"] > 3
    # the same rows before and after training: no better than untrained
    assert diagnostics.information_report(split, [split], n_shuffles=5)["state"] == "at baseline"
    assert diagnostics.information_report(uniform, [uniform], n_shuffles=5)["state"] == "dissolved"
    with pytest.raises(TypeError, match="untrained"):
        diagnostics.information_report(split, split)
