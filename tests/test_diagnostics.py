"""Routing diagnostics (chapter 11): metrics against independent computations, category rules, capture."""
import math
import statistics

import numpy as np
import pytest
import torch
from sklearn.decomposition import PCA
from sklearn.metrics import mutual_info_score, normalized_mutual_info_score
from torch import nn

from gma_teach import GaussianMixtureAttention, diagnostics
from gma_teach.diagnostics import (
    CATEGORIES,
    capture_responsibilities,
    component_summary,
    contingency_table,
    head_averaged_tokens,
    permutation_baseline,
    responsibility_pca,
    routing_metrics,
    separation,
    token_categories,
)


def _one_hot(assignments, n_components):
    return torch.nn.functional.one_hot(torch.as_tensor(assignments), n_components).double()


def _correlated_sample(n_tokens, n_heads, n_components, seed):
    """Random head-wise responsibilities and categories that depend partly on the winning component."""
    generator = torch.Generator().manual_seed(seed)
    logits = 2.0 * torch.randn(n_tokens, n_heads, n_components, generator=generator, dtype=torch.float64)
    resp = torch.softmax(logits, dim=-1)
    winners = resp.mean(dim=1).argmax(dim=-1)
    noise = torch.randint(0, 5, (n_tokens,), generator=generator)
    keep = torch.rand(n_tokens, generator=generator) < 0.6
    labels = torch.where(keep, winners % 5, noise)
    categories = [CATEGORIES[int(code)] for code in labels]
    return resp, categories


def _entropy_np(labels):
    _, counts = np.unique(np.asarray(labels), return_counts=True)
    p = counts / counts.sum()
    return float(-(p * np.log(p)).sum())


def _slow_hard_scores(assignments, categories):
    """Purity and MI by explicit loops over the (component, category) table."""
    assignments, categories = list(assignments), list(categories)
    n = len(assignments)
    pairs = {}
    for z, c in zip(assignments, categories):
        pairs[(z, c)] = pairs.get((z, c), 0) + 1
    by_component, by_category = {}, {}
    for (z, c), count in pairs.items():
        by_component[z] = by_component.get(z, 0) + count
        by_category[c] = by_category.get(c, 0) + count
    purity = sum(max(count for (zz, _), count in pairs.items() if zz == z) for z in by_component) / n
    mi = sum(
        count / n * math.log((count / n) / ((by_component[z] / n) * (by_category[c] / n)))
        for (z, c), count in pairs.items()
    )
    return purity, mi


# ----------------------------------------------------------------------------------------------- metrics


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_hard_scores_match_sklearn_and_loops(seed):
    resp, categories = _correlated_sample(n_tokens=301, n_heads=3, n_components=11, seed=seed)
    metrics = routing_metrics(resp, categories)
    assignments = resp.mean(dim=1).argmax(dim=-1).numpy()
    purity, mi = _slow_hard_scores(assignments.tolist(), categories)
    assert metrics["purity"] == pytest.approx(purity, abs=1e-12)
    assert metrics["mi"] == pytest.approx(mi, abs=1e-12)
    assert metrics["mi"] == pytest.approx(mutual_info_score(categories, assignments), abs=1e-10)
    assert metrics["nmi_arithmetic"] == pytest.approx(normalized_mutual_info_score(categories, assignments), abs=1e-10)
    h_category = _entropy_np(categories)
    assert metrics["category_entropy"] == pytest.approx(h_category, abs=1e-12)
    assert metrics["assignment_entropy"] == pytest.approx(_entropy_np(assignments), abs=1e-12)
    assert metrics["nmi_category"] == pytest.approx(mi / h_category, abs=1e-12)
    assert h_category <= _entropy_np(assignments)  # then MI / H(C) is scikit-learn's "min" normalization
    assert metrics["nmi_category"] == pytest.approx(
        normalized_mutual_info_score(categories, assignments, average_method="min"), abs=1e-10
    )
    assert metrics["active"] == len(np.unique(assignments))
    _, counts = np.unique(categories, return_counts=True)
    assert metrics["majority_fraction"] == pytest.approx(counts.max() / len(categories), abs=1e-15)


def test_hand_built_table_has_known_purity_and_mi():
    # component 0: a a a b; component 1: b b; component 2: a c d  -> purity (3 + 2 + 1) / 9
    assignments = [0, 0, 0, 0, 1, 1, 2, 2, 2]
    categories = ["a", "a", "a", "b", "b", "b", "a", "c", "d"]
    metrics = routing_metrics(_one_hot(assignments, 4), categories)
    assert metrics["purity"] == pytest.approx(6 / 9, abs=1e-15)
    n = 9
    table = {(0, "a"): 3, (0, "b"): 1, (1, "b"): 2, (2, "a"): 1, (2, "c"): 1, (2, "d"): 1}
    p_z = {0: 4 / n, 1: 2 / n, 2: 3 / n}
    p_c = {"a": 4 / n, "b": 3 / n, "c": 1 / n, "d": 1 / n}
    mi = sum(v / n * math.log(v / n / (p_z[z] * p_c[c])) for (z, c), v in table.items())
    assert metrics["mi"] == pytest.approx(mi, abs=1e-14)
    assert metrics["active"] == 3


def test_perfect_alignment_and_independence():
    assignments = torch.arange(40) % 4
    aligned = [CATEGORIES[int(z)] for z in assignments]
    metrics = routing_metrics(_one_hot(assignments, 4), aligned)
    assert metrics["purity"] == 1.0
    assert metrics["mi"] == pytest.approx(math.log(4), abs=1e-14)
    assert metrics["nmi_category"] == pytest.approx(1.0, abs=1e-14)
    assert metrics["nmi_arithmetic"] == pytest.approx(1.0, abs=1e-14)
    # every component sees every category equally often: no information
    independent = [CATEGORIES[(i // 4) % 2] for i in range(40)]
    metrics = routing_metrics(_one_hot(assignments, 4), independent)
    assert metrics["mi"] == pytest.approx(0.0, abs=1e-15)
    assert metrics["nmi_category"] == 0.0
    assert metrics["purity"] == pytest.approx(0.5, abs=1e-15)


@pytest.mark.parametrize("n_components", [2, 7, 128])
def test_entropy_extremes(n_components):
    n_tokens = 3 * n_components
    categories = ["x"] * n_tokens
    uniform = torch.full((n_tokens, n_components), 1.0 / n_components, dtype=torch.float64)
    metrics = routing_metrics(uniform, categories)
    assert metrics["token_entropy"] == pytest.approx(1.0, abs=1e-12)
    assert metrics["usage_entropy"] == pytest.approx(1.0, abs=1e-12)
    assert metrics["mean_max"] == pytest.approx(1.0 / n_components, abs=1e-15)
    collapsed = _one_hot([n_components - 1] * n_tokens, n_components)
    metrics = routing_metrics(collapsed, categories)
    assert metrics["token_entropy"] == 0.0
    assert metrics["usage_entropy"] == 0.0
    assert metrics["mean_max"] == 1.0
    assert metrics["active"] == 1
    spread = _one_hot(torch.arange(n_tokens) % n_components, n_components)
    metrics = routing_metrics(spread, categories)
    assert metrics["token_entropy"] == 0.0
    assert metrics["usage_entropy"] == pytest.approx(1.0, abs=1e-12)
    assert metrics["active"] == n_components


def test_soft_metrics_match_loops_and_head_average():
    resp, categories = _correlated_sample(n_tokens=57, n_heads=4, n_components=9, seed=3)
    metrics = routing_metrics(resp, categories)
    averaged = resp.mean(dim=1).numpy()
    token_entropies = [-sum(p * math.log(p) for p in row if p > 0) / math.log(9) for row in averaged]
    usage = averaged.mean(axis=0)
    assert metrics["token_entropy"] == pytest.approx(float(np.mean(token_entropies)), abs=1e-12)
    assert metrics["usage_entropy"] == pytest.approx(-float((usage * np.log(usage)).sum()) / math.log(9), abs=1e-12)
    assert metrics["mean_max"] == pytest.approx(float(averaged.max(axis=1).mean()), abs=1e-14)
    assert routing_metrics(resp.mean(dim=1), categories) == metrics
    assert routing_metrics(resp.float().numpy(), categories)["purity"] == metrics["purity"]


def test_contingency_and_component_summary():
    resp, categories = _correlated_sample(n_tokens=200, n_heads=2, n_components=6, seed=4)
    counts, names = contingency_table(resp, categories)
    assignments = resp.mean(dim=1).argmax(dim=-1)
    for k in range(6):
        for c, name in enumerate(names):
            assert counts[k, c] == sum(1 for z, cat in zip(assignments.tolist(), categories) if z == k and cat == name)
    tokens = [f"tok{i % 13}" for i in range(200)]
    rows = component_summary(resp, categories, tokens=tokens, top=3, examples=2)
    assert [row["hard_fraction"] for row in rows] == sorted((row["hard_fraction"] for row in rows), reverse=True)
    for row in rows:
        mine = [cat for z, cat in zip(assignments.tolist(), categories) if z == row["component"]]
        assert row["hard_fraction"] == len(mine) / 200
        assert row["purity"] == max(mine.count(c) for c in set(mine)) / len(mine)
        assert mine.count(row["dominant_category"]) == max(mine.count(c) for c in set(mine))
        assert len(row["examples"]) == 2


def test_permutation_baseline_matches_slow_spec():
    resp, categories = _correlated_sample(n_tokens=150, n_heads=2, n_components=8, seed=5)
    baseline = permutation_baseline(resp, categories, n_shuffles=12, seed=7)
    assignments = resp.mean(dim=1).argmax(dim=-1).tolist()
    generator = torch.Generator().manual_seed(7)
    purities, mis = [], []
    for _ in range(12):
        order = torch.randperm(150, generator=generator).tolist()
        shuffled = [categories[i] for i in order]
        purity, mi = _slow_hard_scores(assignments, shuffled)
        purities.append(purity)
        mis.append(mi)
    assert baseline["purity"]["mean"] == pytest.approx(np.mean(purities), abs=1e-12)
    assert baseline["purity"]["std"] == pytest.approx(np.std(purities, ddof=1), abs=1e-12)
    assert baseline["mi"]["mean"] == pytest.approx(np.mean(mis), abs=1e-12)
    assert baseline["mi"]["std"] == pytest.approx(np.std(mis, ddof=1), abs=1e-12)
    observed = routing_metrics(resp, categories)
    assert separation(observed["mi"], baseline["mi"]) > 3  # the sample's categories depend on the winner


def test_permutation_baseline_of_unrelated_labels_covers_observed():
    generator = torch.Generator().manual_seed(11)
    resp = torch.softmax(torch.randn(2000, 10, generator=generator, dtype=torch.float64), dim=-1)
    categories = [CATEGORIES[int(c)] for c in torch.randint(0, 4, (2000,), generator=generator)]
    observed = routing_metrics(resp, categories)
    baseline = permutation_baseline(resp, categories, n_shuffles=50, seed=0)
    assert abs(separation(observed["purity"], baseline["purity"])) < 4
    assert abs(separation(observed["mi"], baseline["mi"])) < 4


def test_separation():
    assert separation(0.5, {"mean": 0.3, "std": 0.1}) == pytest.approx(2.0)
    assert separation(0.5, {"mean": 0.3, "std": 0.0}) == math.inf
    assert separation(0.3, {"mean": 0.3, "std": 0.0}) == 0.0


def test_pca_matches_sklearn():
    resp, _ = _correlated_sample(n_tokens=120, n_heads=1, n_components=7, seed=6)
    scores, explained = responsibility_pca(resp, n_components=2)
    reference = PCA(n_components=2).fit(resp[:, 0].numpy())
    np.testing.assert_allclose(explained.numpy(), reference.explained_variance_ratio_, atol=1e-10)
    projected = reference.transform(resp[:, 0].numpy())
    for axis in range(2):  # principal directions are defined up to sign
        sign = np.sign(np.dot(scores[:, axis].numpy(), projected[:, axis]))
        np.testing.assert_allclose(sign * scores[:, axis].numpy(), projected[:, axis], atol=1e-10)


# ----------------------------------------------------------------------------------------------- categories

_EXPECTED_CATEGORIES = [
    ("<|endoftext|>", "eos"),
    ("Ċ", "newline_or_space"),
    ("ĊĊ", "newline_or_space"),
    ("Ġ", "newline_or_space"),
    ("\n", "newline_or_space"),
    ("Ġ1997", "numeric"),
    ("000", "numeric"),
    ("3.5", "numeric"),
    (",", "punctuation"),
    ("Ġ@-@", "punctuation"),
    ("Ġ=", "punctuation"),
    ("(", "punctuation"),
    ("—", "punctuation"),
    ("Ġthe", "function_word"),
    ("ĠThe", "function_word"),
    ("ĠI", "function_word"),
    ("Ġwhich", "function_word"),
    ("'s", "function_word"),
    ("the", "subword_alpha"),
    ("ing", "subword_alpha"),
    ("Sh", "subword_alpha"),
    ("1st", "other"),
    ("\ufffd", "other"),
    ("<unk>", "other"),
    ("ĠU.S", "other"),
    ("ĠNASA", "all_caps"),
    ("ĠM", "capitalized"),
    ("ĠParis", "capitalized"),
    ("ĠMcC", "capitalized"),
    ("Ġcity", "lower_alpha"),
    ("ĠiPhone", "lower_alpha"),
]


def test_token_category_rules():
    tokens = [token for token, _ in _EXPECTED_CATEGORIES]
    assert token_categories(tokens) == [category for _, category in _EXPECTED_CATEGORIES]


def test_decoded_and_byte_level_forms_agree():
    byte_level = [token for token, _ in _EXPECTED_CATEGORIES]
    decoded = [token.replace("Ġ", " ").replace("Ċ", "\n") for token in byte_level]
    assert token_categories(decoded) == token_categories(byte_level)
    assert set(token_categories(byte_level)) == set(CATEGORIES)


def test_token_categories_rejects_a_string():
    with pytest.raises(TypeError, match="single str"):
        token_categories("the")
    with pytest.raises(TypeError, match="token must be a str"):
        token_categories(["the", 3])


# ----------------------------------------------------------------------------------------------- capture


class _TinyGMAModel(nn.Module):
    """Embedding, two causal GMA layers with residuals, a head: enough to exercise the capture."""

    def __init__(self, vocab=23, d_model=12, n_heads=3, n_components=5):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.blocks = nn.ModuleList(
            [GaussianMixtureAttention(d_model, n_heads, n_components, causal=True) for _ in range(2)]
        )
        self.dropout = nn.Dropout(0.5)
        self.head = nn.Linear(d_model, vocab)

    def forward(self, ids):
        x = self.dropout(self.embed(ids))
        for block in self.blocks:
            x = x + block(x)
        return self.head(x)


def test_capture_equals_direct_routing_and_restores_the_model():
    torch.manual_seed(0)
    model = _TinyGMAModel().double()
    model.train()
    model.blocks[1].store_responsibilities = False
    ids = torch.randint(0, 23, (2, 9))
    captured = capture_responsibilities(model, ids)
    assert sorted(captured) == [0, 1]
    with torch.no_grad():
        x = model.embed(ids)  # eval mode: dropout is the identity
        for index, block in enumerate(model.blocks):
            gamma_q, _ = block.routing(x)
            assert captured[index].shape == (2, 3, 9, 5)
            torch.testing.assert_close(captured[index], gamma_q.float(), atol=1e-6, rtol=1e-5)
            torch.testing.assert_close(captured[index].sum(-1), torch.ones(2, 3, 9), atol=1e-5, rtol=0)
            x = x + block(x)
    assert model.training and model.dropout.training and all(block.training for block in model.blocks)
    for block in model.blocks:
        assert block.store_responsibilities is False
        assert not block._forward_hooks
    last = capture_responsibilities(model, ids, layers=[-1])
    assert list(last) == [1]
    torch.testing.assert_close(last[1], captured[1])


def test_capture_keeps_mixed_modes_and_flags():
    model = _TinyGMAModel()
    model.eval()
    model.dropout.train()
    model.blocks[0].store_responsibilities = True
    capture_responsibilities(model, torch.randint(0, 23, (1, 4)), layers=[1])
    assert model.dropout.training and not model.training
    assert model.blocks[0].store_responsibilities is True
    assert model.blocks[1].store_responsibilities is False


def test_head_averaged_tokens_order():
    gamma = torch.softmax(torch.randn(2, 3, 5, 4), dim=-1)
    flat = head_averaged_tokens(gamma)
    assert flat.shape == (10, 4)
    torch.testing.assert_close(flat[1 * 5 + 2], gamma[1, :, 2].mean(dim=0))


def test_capture_rejects_bad_input():
    with pytest.raises(ValueError, match="no GaussianMixtureAttention"):
        capture_responsibilities(nn.Linear(3, 3), torch.zeros(1, 3))
    with pytest.raises(ValueError, match="out of range"):
        capture_responsibilities(_TinyGMAModel(), torch.zeros(1, 3, dtype=torch.long), layers=[2])
    with pytest.raises(TypeError, match="layers"):
        capture_responsibilities(_TinyGMAModel(), torch.zeros(1, 3, dtype=torch.long), layers=1)
    with pytest.raises(TypeError, match="nn.Module"):
        capture_responsibilities("model", torch.zeros(1, 3))
    with pytest.raises(ValueError, match=r"\(B, H, N, K\)"):
        head_averaged_tokens(torch.zeros(3, 4))


# ----------------------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "resp, categories, error, message",
    [
        (torch.full((4,), 0.25), ["a"] * 4, ValueError, r"\(T, K\) or \(T, H, K\)"),
        (torch.full((3, 4), 0.3), ["a"] * 3, ValueError, "sum to 1"),
        (torch.full((3, 4), 0.25), ["a"] * 2, ValueError, "2 labels but resp has 3"),
        (torch.tensor([[0.5, float("nan")]]), ["a"], ValueError, "NaN"),
        (torch.tensor([[1.5, -0.5]]), ["a"], ValueError, "non-negative"),
        (torch.ones(3, 1), ["a"] * 3, ValueError, "K >= 2"),
        (torch.zeros(0, 3), [], ValueError, "at least one token"),
        (torch.ones(2, 2, dtype=torch.long), ["a"] * 2, TypeError, "floating point"),
        ("resp", ["a"], TypeError, "resp must be"),
        (torch.full((2, 2), 0.5), "ab", TypeError, "single string"),
        (torch.full((2, 2), 0.5), 7, TypeError, "sequence of labels"),
    ],
)
def test_routing_metrics_rejects_bad_input(resp, categories, error, message):
    with pytest.raises(error, match=message):
        routing_metrics(resp, categories)


def test_permutation_baseline_rejects_bad_arguments():
    resp = torch.full((4, 2), 0.5)
    with pytest.raises(ValueError, match="n_shuffles"):
        permutation_baseline(resp, ["a", "b", "a", "b"], n_shuffles=1)
    with pytest.raises(TypeError, match="seed"):
        permutation_baseline(resp, ["a", "b", "a", "b"], seed=0.5)
    with pytest.raises(ValueError, match="labels but resp"):
        permutation_baseline(resp, ["a"], n_shuffles=3)
    with pytest.raises(ValueError, match="n_components"):
        responsibility_pca(resp, n_components=3)
    assert diagnostics.hard_assignments(resp).tolist() == [0, 0, 0, 0]


# ----------------------------------------------------------------------------------------------- figures


def test_figures_draw_the_numbers_they_claim():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from gma_teach.plots import (
        plot_component_categories,
        plot_component_usage,
        plot_responsibility_heatmap,
        plot_responsibility_pca,
        plot_token_strip,
    )
    from gma_teach.widgets.routing_explorer import RoutingExplorer

    resp, categories = _correlated_sample(n_tokens=90, n_heads=2, n_components=12, seed=8)
    averaged = resp.mean(dim=1)
    tokens = [f"Ġw{i % 7}" for i in range(90)]
    fig = plot_responsibility_heatmap(resp[:40], tokens[:40], top=5)
    top = torch.argsort(averaged[:40].sum(0), descending=True)[:5]
    np.testing.assert_allclose(fig.axes[0].images[0].get_array(), averaged[:40, top].T.numpy())
    fig = plot_component_categories(resp, categories, top=4)
    counts, _ = contingency_table(resp, categories)
    shown = np.asarray(fig.axes[0].images[0].get_array())
    np.testing.assert_allclose(shown.sum(axis=1), 1.0)
    largest = int(counts.sum(1).argmax())
    np.testing.assert_allclose(shown[0], (counts[largest] / counts[largest].sum()).numpy())
    fig = plot_component_usage(resp, categories, top=6)
    heights = sorted((patch.get_height() for patch in fig.axes[0].patches), reverse=True)
    np.testing.assert_allclose(heights, np.sort(averaged.mean(0).numpy())[::-1])
    fig = plot_token_strip(tokens[:30], resp[:30])
    assert len([text for text in fig.axes[0].texts if text.get_text().startswith(" w")]) == 30
    fig = plot_responsibility_pca(resp, categories, max_points=50, top=20)
    assert sum(len(collection.get_offsets()) for collection in fig.axes[0].collections) == 50
    labels = fig.axes[1].get_legend_handles_labels()[1]
    assert len(labels) == 1 + len(torch.unique(averaged.argmax(-1)))  # "other components" + every winner, no more
    explorer = RoutingExplorer(resp[:30], tokens[:30], position=4)
    assert explorer.component == int(averaged[4].argmax())
    fig = explorer.figure()
    assert "position 4" in fig.axes[0].get_title()
    with pytest.raises(ValueError, match="position must be"):
        explorer.set_position(30)
    with pytest.raises(ValueError, match="tokens has 3 entries"):
        plot_token_strip(tokens[:3], resp[:30])
    plt.close("all")


def test_routing_report_combines_the_pieces():
    resp, categories = _correlated_sample(n_tokens=120, n_heads=2, n_components=6, seed=9)
    report = diagnostics.routing_report(resp, categories, n_shuffles=5, seed=3)
    assert report["metrics"] == routing_metrics(resp, categories)
    assert report["baseline"] == permutation_baseline(resp, categories, n_shuffles=5, seed=3)
    for name, sd in report["separation_sd"].items():
        assert sd == separation(report["metrics"][name], report["baseline"][name])


def test_lm_routing_reads_whole_rows_of_the_stream():
    class _Tokenizer:
        def token_strings(self, ids):
            return [" the" if int(i) % 2 else "ing" for i in ids]

    torch.manual_seed(1)
    model = _TinyGMAModel()
    model.max_seq_len = 6
    stream = torch.randint(0, 23, (40,))
    read = diagnostics.lm_routing(model, stream, _Tokenizer(), n_tokens=13, layer=0, batch_size=2)
    assert read["ids"].shape == (3, 6) and torch.equal(read["ids"].flatten(), stream[:18])
    assert read["layer"] == 0
    torch.testing.assert_close(read["gamma_q"], capture_responsibilities(model, read["ids"], layers=[0])[0])
    torch.testing.assert_close(read["resp"], head_averaged_tokens(read["gamma_q"]))
    assert read["categories"] == ["function_word" if int(i) % 2 else "subword_alpha" for i in stream[:18]]
    assert diagnostics.lm_routing(model, stream, _Tokenizer(), n_tokens=10_000)["ids"].shape == (6, 6)
    with pytest.raises(ValueError, match="1-D token stream"):
        diagnostics.lm_routing(model, stream.view(4, 10), _Tokenizer(), n_tokens=5)
    with pytest.raises(ValueError, match="n_tokens"):
        diagnostics.lm_routing(model, stream, _Tokenizer(), n_tokens=0)
    with pytest.raises(ValueError, match="batch_size"):
        diagnostics.lm_routing(model, stream, _Tokenizer(), n_tokens=5, batch_size=0)


# ----------------------------------------------------------------------------------------------- edge cases, health


def test_single_category_gives_zero_nmi():
    # One category has H(C) = 0; its float sum can come out ~1e-16 and must not be divided by.
    generator = torch.Generator().manual_seed(3)
    resp = torch.softmax(3 * torch.randn(97, 5, 13, generator=generator, dtype=torch.float64), dim=-1)
    for labels in (["lower_alpha"] * 97, ["x"] * 97):
        metrics = routing_metrics(resp, labels)
        assert metrics["nmi_category"] == 0.0 and metrics["mi"] == pytest.approx(0.0, abs=1e-12)
        assert metrics["category_entropy"] == pytest.approx(0.0, abs=1e-12)
        baseline = permutation_baseline(resp, labels, n_shuffles=5)
        assert baseline["nmi_category"] == {"mean": 0.0, "std": 0.0}


def test_public_validators():
    resp = torch.softmax(torch.randn(6, 2, 4), dim=-1)
    averaged = diagnostics.as_responsibilities(resp)
    assert averaged.dtype == torch.float64 and torch.allclose(averaged, resp.double().mean(dim=1))
    assert diagnostics.as_labels(torch.tensor([1, 2, 3]), 3) == [1, 2, 3]
    with pytest.raises(ValueError, match="sum to 1"):
        diagnostics.as_responsibilities(torch.rand(5, 4) + 1)
    with pytest.raises(TypeError, match="single string"):
        diagnostics.as_labels("abc", 3)
    with pytest.raises(ValueError, match="2 labels but resp has 3"):
        diagnostics.as_labels(["a", "b"], 3)


def _slow_health(log_resp):
    """Loops over heads, tokens and components: (B, H, N, K) log-responsibilities -> the three lists."""
    b, h, n, k = log_resp.shape
    active, entropy, spread = [], [], []
    for head in range(h):
        rows = [[math.exp(float(log_resp[i, head, t, c])) for c in range(k)] for i in range(b) for t in range(n)]
        winners = {max(range(k), key=lambda c, row=row: row[c]) for row in rows}
        active.append(len(winners) / k)
        usage = [sum(row[c] for row in rows) / len(rows) for c in range(k)]
        entropy.append(-sum(u * math.log(u) for u in usage if u > 0) / math.log(k))
        stds = []
        for i in range(b):
            for t in range(n):
                values = [float(log_resp[i, head, t, c]) for c in range(k)]
                mean = sum(values) / k
                stds.append(math.sqrt(sum((v - mean) ** 2 for v in values) / (k - 1)))
        spread.append(sum(stds) / len(stds))
    return active, entropy, spread


def test_head_health_matches_loops():
    generator = torch.Generator().manual_seed(5)
    logits = torch.randn(3, 2, 7, 5, generator=generator, dtype=torch.float64) * torch.tensor([0.5, 6.0]).view(
        1, 2, 1, 1).double()
    log_resp = torch.log_softmax(logits, dim=-1)
    health = diagnostics.head_health(log_resp)
    active, entropy, spread = _slow_health(log_resp)
    assert health["active_share"] == pytest.approx(active) and health["usage_entropy"] == pytest.approx(entropy)
    assert health["logit_spread"] == pytest.approx(spread)
    assert health["logit_spread"][1] > health["logit_spread"][0]  # the head with 12x larger logits
    collapsed = torch.log_softmax(torch.tensor([[[[9.0, 0.0, 0.0, 0.0]] * 6]]), dim=-1)  # every token -> 0
    assert diagnostics.head_health(collapsed)["active_share"] == [0.25]
    with pytest.raises(ValueError, match="log_resp"):
        diagnostics.head_health(torch.zeros(2, 3))
    with pytest.raises(TypeError, match="log_resp"):
        diagnostics.head_health([[0.0]])


def test_routing_health_reads_each_layers_routing_and_restores_the_model():
    from gma_teach.models import DecoderLM

    torch.manual_seed(0)
    model = DecoderLM(30, 16, 2, 2, mixer="gma", max_seq_len=12, mixer_options={"n_components": 6}).train()
    tokens = torch.randint(0, 30, (3, 12))
    health = diagnostics.routing_health(model, tokens)
    captured = capture_responsibilities(model, tokens)
    assert [layer["layer"] for layer in health] == [0, 1]
    for index, layer in enumerate(health):
        expected = diagnostics.head_health(captured[index].double().log())
        for name in diagnostics.HEALTH_METRICS:
            assert layer[name] == pytest.approx(expected[name], rel=1e-4, abs=1e-5)
    assert model.training and all(not m._forward_pre_hooks for m in diagnostics.gma_layers(model))
    summary = diagnostics.summarize_health(health)
    assert summary["min_active_share"] <= summary["active_share"] <= 1
    with pytest.raises(ValueError, match="no GaussianMixtureAttention"):
        diagnostics.routing_health(DecoderLM(30, 16, 1, 2, mixer="sdpa", max_seq_len=12), tokens)


def test_summarize_health_averages_every_head_of_every_layer_and_keeps_the_lowest_share():
    names = diagnostics.HEALTH_METRICS
    health = [{"layer": 0, **{name: [1.0 + i, 3.0 + i] for i, name in enumerate(names)}},
              {"layer": 1, **{name: [8.0 + i] for i, name in enumerate(names)}}]
    health[0]["active_share"], health[1]["active_share"] = [0.5, 1.0], [0.25]
    summary = diagnostics.summarize_health(health)
    for i, name in enumerate(names[:-1]):  # three heads in all: (1 + 3 + 8) / 3 = 4, shifted by i
        assert summary[name] == pytest.approx(4.0 + i), name
    assert summary["active_share"] == pytest.approx(1.75 / 3)  # not the largest (1.0) nor the lowest
    assert summary["min_active_share"] == 0.25
    with pytest.raises(ValueError, match="empty"):
        diagnostics.summarize_health([])


def _slow_term_spreads(x, means, variances, log_priors, min_variance):
    """Loops over heads, tokens and components, float64, with the log joint written out term by term."""
    heads, tokens, dim = x.shape
    n_components = means.shape[1]
    out = {name: [] for name in ("prior", "volume", "distance", "prior_entropy", "floor_share", "spread_ratio")}
    for h in range(heads):
        prior = [float(log_priors[h, k]) for k in range(n_components)]
        volume = [-0.5 * sum(math.log(float(variances[h, k, d])) for d in range(dim)) for k in range(n_components)]
        distance_std = []
        for t in range(tokens):
            row = [-0.5 * sum((float(x[h, t, d]) - float(means[h, k, d])) ** 2 / float(variances[h, k, d])
                              for d in range(dim)) for k in range(n_components)]
            distance_std.append(statistics.stdev(row))
        out["prior"].append(statistics.stdev(prior))
        out["volume"].append(statistics.stdev(volume))
        out["distance"].append(statistics.fmean(distance_std))
        out["prior_entropy"].append(-sum(math.exp(p) * p for p in prior) / math.log(n_components))
        values = [float(v) for v in variances[h].flatten()]
        out["floor_share"].append(sum(v <= 2 * min_variance for v in values) / len(values))

        def rms_from_centre(points):
            centre = [statistics.fmean(float(p[d]) for p in points) for d in range(dim)]
            return math.sqrt(statistics.fmean(sum((float(p[d]) - centre[d]) ** 2 for d in range(dim))
                                              for p in points))

        out["spread_ratio"].append(rms_from_centre(list(x[h])) / rms_from_centre(list(means[h])))
    return out


def test_logit_term_spreads_match_loops_and_add_up_to_the_log_joint():
    from gma_teach import gmm

    generator = torch.Generator().manual_seed(11)
    heads, tokens, n_components, dim = 2, 9, 5, 3
    x = torch.randn(heads, tokens, dim, generator=generator, dtype=torch.float64)
    means = 2 * torch.randn(heads, n_components, dim, generator=generator, dtype=torch.float64)
    variances = 0.2 + torch.rand(heads, n_components, dim, generator=generator, dtype=torch.float64)
    variances[1, :2] = 1e-3  # two components of head 1 at a floor
    log_priors = torch.log_softmax(torch.randn(heads, n_components, generator=generator, dtype=torch.float64), -1)
    terms = diagnostics.logit_term_spreads(x, means, variances, log_priors, 1e-3)
    slow = _slow_term_spreads(x, means, variances, log_priors, 1e-3)
    for name, values in slow.items():
        assert terms[name] == pytest.approx(values, rel=1e-9), name
    assert terms["floor_share"] == pytest.approx([0.0, 2 * dim / (n_components * dim)])
    # the three terms are the log joint, less the constant -d/2 log(2 pi)
    prior = log_priors[:, None, :]
    volume = -0.5 * variances.log().sum(-1)[:, None, :]
    distance = -0.5 * (((x[:, :, None] - means[:, None]) ** 2) / variances[:, None]).sum(-1)
    joint = gmm.log_joint(x, means, variances, log_priors)
    assert torch.allclose(prior + volume + distance - 0.5 * dim * math.log(2 * math.pi), joint, atol=1e-9)
    with pytest.raises(ValueError, match="means"):
        diagnostics.logit_term_spreads(x, means[:, :, :2], variances, log_priors, 1e-3)
    with pytest.raises(TypeError, match="log_priors"):
        diagnostics.logit_term_spreads(x, means, variances, log_priors.tolist(), 1e-3)
    with pytest.raises(ValueError, match="min_variance"):
        diagnostics.logit_term_spreads(x, means, variances, log_priors, 0.0)


def test_routing_logit_terms_read_each_layer_and_restore_the_model():
    from gma_teach.models import DecoderLM

    torch.manual_seed(1)
    model = DecoderLM(30, 16, 2, 2, mixer="gma", max_seq_len=12, mixer_options={"n_components": 6}).train()
    tokens = torch.randint(0, 30, (3, 12))
    terms = diagnostics.routing_logit_terms(model, tokens)
    assert [layer["layer"] for layer in terms] == [0, 1]
    for layer in terms:
        assert len(layer["distance"]) == 2 and layer["prior"] == pytest.approx([0.0, 0.0])  # uniform priors
        assert layer["prior_entropy"] == pytest.approx([1.0, 1.0]) and layer["floor_share"] == [0.0, 0.0]
    assert model.training and all(not m._forward_pre_hooks for m in diagnostics.gma_layers(model))


def test_routing_health_with_logit_terms_is_both_reports_from_one_forward_pass():
    from gma_teach.models import DecoderLM

    torch.manual_seed(2)
    model = DecoderLM(30, 16, 2, 2, mixer="gma", max_seq_len=12, mixer_options={"n_components": 6}).train()
    tokens = torch.randint(0, 30, (3, 12))
    separate = [{**health, **terms} for health, terms in zip(diagnostics.routing_health(model, tokens),
                                                             diagnostics.routing_logit_terms(model, tokens))]
    calls = []
    handle = model.register_forward_pre_hook(lambda module, args: calls.append(1))
    together = diagnostics.routing_health(model, tokens, with_logit_terms=True)
    handle.remove()
    assert len(calls) == 1 and together == separate
    assert set(diagnostics.routing_health(model, tokens)[0]) == {"layer", *diagnostics.HEALTH_METRICS}
    with pytest.raises(TypeError, match="with_logit_terms"):
        diagnostics.routing_health(model, tokens, with_logit_terms="yes")
