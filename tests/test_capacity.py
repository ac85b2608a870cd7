"""gma_teach.capacity: the exact demo against counting (float64), the rank bound, the decayed recurrence against its
explicit formula (with gradcheck and causality), state bytes against the formulas, and the recall study's sentences
read off synthetic tables."""
import itertools
import json
import math
import statistics

import pytest
import torch
from conftest import random_responsibilities

from gma_teach import capacity
from gma_teach.designs import VARIANCE_AND_BALANCE
from gma_teach.layer import LM_ROUTING_REMEDY
from gma_teach.mixing import affinity, gma_from_responsibilities, write_memory
from gma_teach.stats import t_quantile_975

EPS = 1e-6


# ----------------------------------------------------------------------------------------------- the exact demo
def test_slot_routing_rows_are_responsibilities():
    gamma = capacity.slot_routing([2, 0, 2, 4], 5, leak=0.25)
    assert gamma.dtype == torch.float64 and gamma.shape == (4, 5)
    torch.testing.assert_close(gamma.sum(-1), torch.ones(4, dtype=torch.float64), rtol=0, atol=1e-15)
    assert gamma[0, 2] == pytest.approx(0.75 + 0.05) and gamma[0, 1] == pytest.approx(0.05)
    hard = capacity.slot_routing(torch.tensor([[1, 0], [0, 0]]), 3)
    assert torch.equal(hard, torch.tensor([[[0., 1, 0], [1, 0, 0]], [[1, 0, 0], [1, 0, 0]]], dtype=torch.float64))
    assert torch.equal(capacity.round_robin(7, 3), torch.tensor([0, 1, 2, 0, 1, 2, 0]))


@pytest.mark.parametrize("n_pairs, n_slots", [(1, 1), (5, 7), (13, 13), (3, 11)])
def test_k_slots_store_up_to_k_pairs_exactly(n_pairs, n_slots):
    gamma = capacity.slot_routing(capacity.round_robin(n_pairs, n_slots), n_slots)
    values = torch.eye(n_pairs, dtype=torch.float64)
    outputs = capacity.store_and_recall(gamma, values, eps=EPS)
    assert torch.equal(outputs, values / (1 + EPS))  # every read is its own value, to the last bit
    spec = gma_from_responsibilities(gamma, gamma, values, eps=EPS, impl="naive")
    torch.testing.assert_close(outputs, spec, rtol=0, atol=1e-15)
    assert capacity.routed_recall(n_pairs, n_slots, ties="fail") == 1.0


def test_one_pair_too_many_returns_the_average_and_ties():
    n_slots = 6
    n_pairs = n_slots + 1
    gamma = capacity.slot_routing(capacity.round_robin(n_pairs, n_slots), n_slots)
    values = torch.eye(n_pairs, dtype=torch.float64)
    outputs = capacity.store_and_recall(gamma, values, eps=EPS)
    shared = (values[0] + values[n_slots]) / (2 + EPS)
    torch.testing.assert_close(outputs[0], shared, rtol=0, atol=1e-15)
    torch.testing.assert_close(outputs[n_slots], shared, rtol=0, atol=1e-15)
    targets = torch.arange(n_pairs)
    share = capacity.recall_credit(outputs, targets, ties="share")
    fail = capacity.recall_credit(outputs, targets, ties="fail")
    assert share[0] == share[n_slots] == 0.5 and fail[0] == fail[n_slots] == 0.0
    assert torch.equal(share[1:n_slots], torch.ones(n_slots - 1, dtype=torch.float64))
    assert capacity.recall_accuracy(outputs, targets) == pytest.approx(n_slots / n_pairs)


def _alone_share(n_pairs, n_slots):
    """Keys alone in their slot under i mod K, counted one by one."""
    slots = [i % n_slots for i in range(n_pairs)]
    return sum(1 for s in slots if slots.count(s) == 1) / n_pairs


@pytest.mark.parametrize("n_slots", [1, 5, 8])
def test_capacity_without_forgetting_is_k_over_n(n_slots):
    for n_pairs in range(1, 3 * n_slots + 2):
        share = capacity.routed_recall(n_pairs, n_slots)
        fail = capacity.routed_recall(n_pairs, n_slots, ties="fail")
        assert share == pytest.approx(min(1.0, n_slots / n_pairs), abs=1e-15)
        assert fail == pytest.approx(_alone_share(n_pairs, n_slots), abs=1e-15)
        assert capacity.capacity_formula(n_pairs, n_slots) == pytest.approx(share, abs=1e-15)
        assert capacity.capacity_formula(n_pairs, n_slots, ties="fail") == pytest.approx(fail, abs=1e-15)
        if n_slots <= n_pairs <= 2 * n_slots:
            assert fail == pytest.approx((2 * n_slots - n_pairs) / n_pairs, abs=1e-15)


@pytest.mark.parametrize("decay, leak", [(0.9, 0.0), (0.5, 0.0), (0.9, 0.1), (0.8, 0.1), (0.7, 0.3), (1.0, 0.2)])
@pytest.mark.parametrize("n_slots", [3, 8])
def test_the_formula_predicts_the_demo_with_forgetting_and_leaks(decay, leak, n_slots):
    for n_pairs in range(1, 3 * n_slots + 2):
        for ties in capacity.TIES:
            demo = capacity.routed_recall(n_pairs, n_slots, decay=decay, leak=leak, ties=ties)
            formula = capacity.capacity_formula(n_pairs, n_slots, decay=decay, leak=leak, ties=ties)
            assert demo == pytest.approx(formula, abs=1e-15), (n_pairs, ties)


def test_forgetting_caps_recall_by_recency_not_by_slots():
    decay, leak = 0.8, 0.1
    for n_slots in (16, 64, 256):
        horizon = capacity.recency_horizon(n_slots, decay=decay, leak=leak)
        assert abs(horizon - round(horizon)) > 1e-6  # away from an exact tie
        cross = (2 * (1 - leak) * leak + leak * leak) / n_slots
        assert decay ** horizon * ((1 - leak) ** 2 + cross) == pytest.approx(cross, rel=1e-12)
        n_pairs = n_slots
        recalled = capacity.routed_recall(n_pairs, n_slots, decay=decay, leak=leak, ties="fail") * n_pairs
        assert round(recalled) == min(n_pairs, math.ceil(horizon))
    assert capacity.recency_horizon(64, decay=0.8, leak=0.1) < 64  # fewer pairs than slots
    assert capacity.recency_horizon(8, decay=1.0, leak=0.1) == math.inf
    assert capacity.recency_horizon(8, decay=0.9, leak=0.0) == math.inf
    # hard routing with forgetting: the newest key of each slot wins, no ties
    assert capacity.routed_recall(12, 8, decay=0.9, ties="fail") == pytest.approx(8 / 12)


def test_the_affinity_has_rank_at_most_k():
    n_slots = 5
    for n_pairs in (3, 5, 6, 11):
        gamma = capacity.slot_routing(capacity.round_robin(n_pairs, n_slots), n_slots)
        assert torch.linalg.matrix_rank(affinity(gamma, gamma)).item() == min(n_pairs, n_slots)
        outputs = capacity.store_and_recall(gamma, torch.eye(n_pairs, dtype=torch.float64))
        assert torch.linalg.matrix_rank(outputs).item() == min(n_pairs, n_slots)
    soft = random_responsibilities(20, 6)
    assert torch.linalg.matrix_rank(affinity(soft, soft)).item() <= 6


def _expected_random_by_enumeration(n_pairs, n_slots):
    """E[accuracy] over all K^n slot assignments, ties shared: a slot of m keys contributes 1 (m times 1/m)."""
    total = 0.0
    for slots in itertools.product(range(n_slots), repeat=n_pairs):
        total += len(set(slots)) / n_pairs
    return total / n_slots ** n_pairs


@pytest.mark.parametrize("n_pairs, n_slots", [(3, 3), (5, 2), (4, 6)])
def test_random_routing_monte_carlo_matches_enumeration(n_pairs, n_slots):
    mean, error = capacity.random_slot_recall(n_pairs, n_slots, 3000, seed=1)
    assert abs(mean - _expected_random_by_enumeration(n_pairs, n_slots)) <= 4 * error
    assert capacity.random_slot_recall(n_pairs, n_slots, 50, seed=3) == capacity.random_slot_recall(
        n_pairs, n_slots, 50, seed=3)


def test_recall_credit_treats_rounding_as_a_tie_and_checks_its_input():
    outputs = torch.tensor([[0.5, 0.5 + 1e-16, 0.0], [0.2, 0.7, 0.1]], dtype=torch.float64)
    credit = capacity.recall_credit(outputs, torch.tensor([0, 1]))
    assert credit.tolist() == [0.5, 1.0]
    assert capacity.recall_credit(outputs, torch.tensor([0, 1]), rtol=0.0).tolist() == [0.0, 1.0]
    with pytest.raises(TypeError, match="targets must be an int64 tensor"):
        capacity.recall_credit(outputs, torch.tensor([0.0, 1.0]))
    with pytest.raises(ValueError, match="targets must have one entry per read"):
        capacity.recall_credit(outputs, torch.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match=r"targets must lie in \[0, d_v=3\)"):
        capacity.recall_credit(outputs, torch.tensor([0, 3]))
    with pytest.raises(ValueError, match="ties must be one of"):
        capacity.recall_credit(outputs, torch.tensor([0, 1]), ties="coin")


def test_bad_demo_input_raises_clear_errors():
    with pytest.raises(ValueError, match=r"slots must lie in \[0, n_slots=3\)"):
        capacity.slot_routing([0, 3], 3)
    with pytest.raises(TypeError, match="slots must be a tensor of int slot indices"):
        capacity.slot_routing(torch.tensor([0.0, 1.0]), 3)
    with pytest.raises(ValueError, match=r"leak must be in \[0, 1\)"):
        capacity.slot_routing([0], 3, leak=1.0)
    with pytest.raises(ValueError, match="n_slots must be >= 1"):
        capacity.round_robin(3, 0)
    with pytest.raises(ValueError, match=r"decay must be in \(0, 1\]"):
        capacity.routed_recall(3, 2, decay=1.5)
    with pytest.raises(ValueError, match="decay must be > 0"):
        capacity.capacity_formula(3, 2, decay=0.0)
    with pytest.raises(ValueError, match="slots must give one slot per pair"):
        capacity.routed_recall(3, 2, slots=[0, 1])
    gamma = capacity.slot_routing([0, 1], 2)
    with pytest.raises(ValueError, match="values must have one row per key"):
        capacity.store_and_recall(gamma, torch.eye(3, dtype=torch.float64))
    with pytest.raises(ValueError, match="gamma_q and gamma_k must have the same K"):
        capacity.store_and_recall(gamma, torch.eye(2, dtype=torch.float64), torch.ones(2, 3, dtype=torch.float64))


# ---------------------------------------------------------------------------------------------------- forgetting
def _decayed_spec(gamma_q, gamma_k, v, decay, eps):
    """The explicit formula: o_i = sum_{j<=i} decay^(i-j) s_ij v_j / (sum_{j<=i} decay^(i-j) s_ij + eps)."""
    n = gamma_q.shape[-2]
    i = torch.arange(n, dtype=torch.float64)
    age = i[:, None] - i[None, :]
    weights = torch.where(age >= 0, decay ** age.clamp_min(0), torch.zeros(()).double())
    scores = (gamma_q @ gamma_k.transpose(-1, -2)) * weights
    return (scores @ v) / (scores.sum(-1, keepdim=True) + eps)


@pytest.mark.parametrize("decay", [1.0, 0.83, 0.3])
def test_decayed_gma_equals_its_explicit_formula(decay):
    gamma_q, gamma_k = random_responsibilities(2, 3, 11, 4), random_responsibilities(2, 3, 11, 4)
    v = torch.randn(2, 3, 11, 5, dtype=torch.float64)
    got = capacity.decayed_gma(gamma_q, gamma_k, v, decay, eps=EPS)
    torch.testing.assert_close(got, _decayed_spec(gamma_q, gamma_k, v, decay, EPS), rtol=0, atol=1e-12)
    if decay == 1.0:
        causal = gma_from_responsibilities(gamma_q, gamma_k, v, causal=True, eps=EPS, impl="naive")
        torch.testing.assert_close(got, causal, rtol=0, atol=1e-12)
    memory, normalizer = capacity.decayed_state(gamma_k, v, decay)
    age = torch.arange(10, -1, -1, dtype=torch.float64)
    reference = write_memory(gamma_k * (decay ** age)[:, None], v)
    torch.testing.assert_close(memory, reference[0], rtol=0, atol=1e-12)
    torch.testing.assert_close(normalizer, reference[1], rtol=0, atol=1e-12)
    last = capacity.store_and_recall(gamma_k, v, gamma_q[..., -1:, :], decay=decay, eps=EPS)
    torch.testing.assert_close(last, got[..., -1:, :], rtol=0, atol=1e-12)


def test_decayed_gma_is_causal_and_has_exact_gradients():
    gamma_q, gamma_k = random_responsibilities(9, 3), random_responsibilities(9, 3)
    v = torch.randn(9, 2, dtype=torch.float64)
    before = capacity.decayed_gma(gamma_q, gamma_k, v, 0.7)
    changed_k, changed_v = gamma_k.clone(), v.clone()
    changed_k[6:] = random_responsibilities(3, 3)
    changed_v[6:] += 5.0
    after = capacity.decayed_gma(gamma_q, changed_k, changed_v, 0.7)
    torch.testing.assert_close(after[:6], before[:6], rtol=0, atol=0)
    assert not torch.allclose(after[6:], before[6:])
    inputs = [t[:5].clone().requires_grad_(True) for t in (gamma_q, gamma_k, v)]
    assert torch.autograd.gradcheck(lambda q, k, x: capacity.decayed_gma(q, k, x, 0.6), inputs)


def test_decayed_gma_rejects_bad_input():
    gamma = random_responsibilities(4, 3)
    v = torch.randn(4, 2, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"decay must be in \(0, 1\]"):
        capacity.decayed_gma(gamma, gamma, v, 1.01)
    with pytest.raises(ValueError, match="causal GMA needs gamma_q and gamma_k of one shape"):
        capacity.decayed_gma(gamma[:3], gamma, v, 0.9)
    with pytest.raises(TypeError, match="values must be a floating-point tensor"):
        capacity.decayed_gma(gamma, gamma, torch.ones(4, 2, dtype=torch.long), 0.9)
    assert capacity.decayed_gma(gamma[:0], gamma[:0], v[:0], 0.9).shape == (0, 2)


# --------------------------------------------------------------------------------------------------- state bytes
def test_measured_state_bytes_follow_the_formulas():
    d, h = 24, 2
    d_head = d // h
    for n in (0, 5, 13):
        assert capacity.measured_state_bytes("sdpa", d, h, n) == 2 * n * d * 4
        assert capacity.measured_state_bytes("gma", d, h, n, n_components=7) == h * 7 * (d_head + 1) * 4
    assert capacity.measured_state_bytes("linear", d, h, 9) == h * (d_head * d_head + d_head) * 4
    assert capacity.measured_state_bytes("performer", d, h, 9, n_features=5) == h * (5 * d_head + 5 + 1) * 4
    assert capacity.measured_state_bytes("none", d, h, 9) == 0
    with pytest.raises(ValueError, match="mixer must be one of"):
        capacity.measured_state_bytes("flash", d, h, 3)
    with pytest.raises(ValueError, match="seq_len must be >= 0"):
        capacity.measured_state_bytes("sdpa", d, h, -1)
    with pytest.raises(ValueError):
        capacity.measured_state_bytes("linformer", d, h, 3, max_seq_len=8)


def test_shrink_study_copies_and_checks_its_keys():
    design = {"seq_len": 64, "kv_pairs": (4, 8), "arms": {"sdpa": {"mixer": "sdpa"}}}
    small = capacity.shrink_study(design, seq_len=16, kv_pairs=(2,))
    assert small["seq_len"] == 16 and small["kv_pairs"] == (2,) and design["seq_len"] == 64
    small["arms"]["sdpa"]["mixer"] = "changed"
    assert design["arms"]["sdpa"]["mixer"] == "sdpa"
    with pytest.raises(ValueError, match=r"unknown study keys \['width'\]"):
        capacity.shrink_study(design, width=3)
    with pytest.raises(TypeError, match="study must be a Study or a dict"):
        capacity.shrink_study([design])


# ------------------------------------------------------------------------------------------- the study's table
KV = [4, 8, 16]
SEEDS = [0, 1, 2]


def _run(mixer, by_count, state_bytes, options=None, seeds=SEEDS):
    by_count = {n: list(values) for n, values in by_count.items()}
    means = [statistics.fmean(by_count[n][i] for n in by_count) for i in range(len(seeds))]
    return {"mixer": mixer, "options": options or {}, "lr": 1e-3, "seeds": list(seeds), "state_bytes": state_bytes,
            "test_mean": means, "by_count": by_count}


def _curve(levels, offsets=(-0.01, 0.0, 0.01)):
    """Per-count accuracies for 3 seeds: ``levels`` (one per kv count) plus each seed's offset."""
    return {n: [min(1.0, level + offset) for offset in offsets] for n, level in zip(KV, levels)}


def synthetic_table(*, with_extras=True, widths=(64, 128)):
    """A table in the recall study's format: SDPA solves every count, linear attention falls, GMA rises with K."""
    arms = {}
    for width in widths:
        scale = width // 64
        arms.setdefault("sdpa", {})[width] = _run("sdpa", {n: [1.0, 0.995, 1.0] for n in KV}, 65536 * scale)
        arms.setdefault("linear", {})[width] = _run("linear", _curve([0.9, 0.6, 0.3]), 33280 * scale * scale)
        arms.setdefault("performer", {})[width] = _run("performer", _curve([0.7, 0.4, 0.2]), 33280 * scale)
        arms.setdefault("mamba", {})[width] = _run("mamba", _curve([0.8, 0.5, 0.3]), 19456 * scale)
        for k in (8, 16, 32, 64, 128, 256):
            level = min(0.99, 0.2 + 0.12 * math.log2(k))
            for suffix, shift in (("", 0.0), ("_var_bal", 0.02)):
                routing = VARIANCE_AND_BALANCE if suffix else {}
                arms.setdefault(f"gma_k{k}{suffix}", {})[width] = _run(
                    "gma", _curve([level + shift, level - 0.1 + shift, level - 0.2 + shift]),
                    2 * k * (width + 1) * 4, {"n_components": k, **routing})
        if with_extras:
            arms.setdefault("window", {})[width] = _run("window", _curve([0.5, 0.3, 0.2]), 8192 * scale)
            arms.setdefault("local_gma", {})[width] = _run("local_gma", _curve([0.95, 0.85, 0.7], (0.0, 0.0, 0.01)),
                                                           40000 * scale,
                                                           {"n_components": 64, "window": 16})
            arms.setdefault("decay_linear", {})[width] = _run("decay_linear", _curve([0.9, 0.6, 0.31],
                                                                                     (0.01, -0.02, 0.02)),
                                                              33280 * scale * scale)
            arms.setdefault("decay_gma", {})[width] = _run("decay_gma", _curve([0.7, 0.5, 0.4]), 2 * 64 * 65 * 4,
                                                           {"n_components": 64})
    comparisons = []
    for width in widths:
        for k in (8, 16, 32, 64, 128, 256):
            for suffix in ("", "_var_bal"):
                arm = f"gma_k{k}{suffix}"
                for against in ("linear", "sdpa"):
                    a, b = arms[arm][width]["test_mean"], arms[against][width]["test_mean"]
                    difference = statistics.fmean(a) - statistics.fmean(b)
                    told_apart = abs(difference) > 0.08
                    comparisons.append({"arm": arm, "against": against, "width": width, "difference": difference,
                                        "ci95": [difference - 0.05, difference + 0.05], "p": 0.01, "p_holm": 0.04,
                                        "told_apart": told_apart, "seeds": SEEDS})
    design = {"seq_len": 64, "vocab_size": 512, "kv_pairs": KV, "widths": list(widths)}
    return {"design": design, "arms": arms, "comparisons": comparisons}


def _paired(a, b):
    differences = [x - y for x, y in zip(a, b)]
    mean = statistics.fmean(differences)
    half = t_quantile_975(len(differences) - 1) * statistics.stdev(differences) / math.sqrt(len(differences))
    return mean, mean - half, mean + half


def test_findings_read_the_table():
    table = synthetic_table()
    found = capacity.recall_findings(table)
    text = "\n".join(found)
    assert "SDPA at width 64 (3 seeds) reaches 0.99 at every kv count (4, 8 and 16 pairs)." in found
    linear = table["arms"]["linear"][64]["by_count"]
    assert (f"Linear attention at width 64 falls from {statistics.fmean(linear[4]):.3f} at 4 kv pairs to "
            f"{statistics.fmean(linear[16]):.3f} at 16.") in found
    family = [line for line in found if line.startswith("Against linear attention at width 64, GMA with the default")]
    assert len(family) == 1
    higher = sorted(k for k in (8, 16, 32, 64, 128, 256)
                    if statistics.fmean(table["arms"][f"gma_k{k}"][64]["test_mean"])
                    - statistics.fmean(table["arms"]["linear"][64]["test_mean"]) > 0.08)
    joined = ", ".join(str(k) for k in higher[:-1]) + " and " + str(higher[-1])
    assert f"is higher at K = {joined}" in family[0]
    assert "Holm-corrected" in family[0]
    best = max((arm for arm in table["arms"] if arm.startswith("gma_k")),
               key=lambda arm: statistics.fmean(table["arms"][arm][64]["test_mean"]))
    assert f"The best GMA arm at width 64 is {best}" in text
    # the forgetting and hybrid arms, exploratory paired intervals computed here independently
    mean, low, high = _paired(table["arms"]["decay_gma"][64]["test_mean"],
                              table["arms"]["gma_k64"][64]["test_mean"])
    assert (f"decay_gma against gma_k64 at width 64: {mean:+.3f} [{low:+.3f}, {high:+.3f}] "
            f"(paired over 3 seeds, exploratory)") in text
    assert "local_gma against window at width 64" in text and "decay_linear against linear at width 128" in text
    assert "window against sdpa at width 64" in text
    extras = capacity.forgetting_findings(table)
    assert extras == [line for line in found if line.split()[0] in ("window", "local_gma", "decay_linear",
                                                                    "decay_gma")]
    assert len(extras) == 2 * 5  # per width: window, local_gma (twice), decay_linear, decay_gma
    assert capacity.forgetting_findings(synthetic_table(with_extras=False)) == []


def test_findings_name_what_is_missing_and_the_smallest_close_state():
    table = synthetic_table(with_extras=False, widths=(64,))
    del table["arms"]["sdpa"]
    found = capacity.recall_findings(table)
    assert "SDPA is not in the records at width 64." in found
    table = synthetic_table(with_extras=False, widths=(64,))
    table["arms"]["gma_k32"][64] = _run("gma", {n: [0.99, 0.98, 0.97] for n in KV}, 2 * 32 * 65 * 4,
                                        {"n_components": 32})
    found = capacity.recall_findings(table)
    line = [text for text in found if text.startswith("The smallest state within 0.05 of SDPA at width 64")]
    assert line == [f"The smallest state within 0.05 of SDPA at width 64 is gma_k32's: 16,640 bytes "
                    f"({16640 / 65536:.2f} of SDPA's), mean accuracy 0.980."]
    table["arms"]["sdpa"][64] = _run("sdpa", {4: [1.0] * 3, 8: [0.99] * 3, 16: [0.9] * 3}, 65536)
    assert ("SDPA at width 64 (3 seeds) reaches 0.99 at 4 and 8 kv pairs and falls short at 16 (0.900)."
            in capacity.recall_findings(table))


def test_when_to_choose_gma_reads_the_table():
    table = synthetic_table(widths=(64,))
    for k in (128, 256):  # two variance + balance arms told apart above linear attention, one with no more state
        for comparison in table["comparisons"]:
            if comparison["arm"] == f"gma_k{k}_var_bal" and comparison["against"] == "linear":
                comparison["told_apart"] = True
    table["arms"]["gma_k128_var_bal"][64]["state_bytes"] = table["arms"]["linear"][64]["state_bytes"]
    advice = capacity.when_to_choose_gma(table)
    linear_bytes = table["arms"]["linear"][64]["state_bytes"]
    winners = [c["arm"] for c in table["comparisons"] if c["against"] == "linear" and c["told_apart"]
               and c["difference"] > 0 and c["arm"].endswith("_var_bal")]
    cheaper = [arm for arm in winners if table["arms"][arm][64]["state_bytes"] <= linear_bytes]
    dearer = [arm for arm in winners if arm not in cheaper]
    assert cheaper and dearer  # the synthetic table exercises both sentences
    assert any(line.startswith("At width 64, choose GMA over linear attention: ") and all(a in line for a in cheaper)
               for line in advice)
    assert any(line.startswith("At width 64, ") and "keep a larger state" in line
               and all(a in line for a in dearer) for line in advice)
    # the hybrid's GMA heads use the default routing: never recommended, and the sentence says why
    hybrid = [line for line in advice if "local_gma" in line]
    assert len(hybrid) == 1 and "do not recommend local_gma" in hybrid[0]
    assert "recalls more than window (+0.50" in hybrid[0] and "default routing, which collapses" in hybrid[0]
    assert not any("decay_linear" in line and "prefer it" in line for line in advice)  # not told apart
    far = synthetic_table(with_extras=False, widths=(64,))
    for arm in far["arms"]:
        if arm.startswith("gma_k"):
            entry = far["arms"][arm][64]
            entry["test_mean"] = [min(v, 0.5) for v in entry["test_mean"]]
    assert any("no GMA arm comes within 0.05 of it" in line for line in capacity.when_to_choose_gma(far))


def test_when_to_choose_gma_recommends_a_working_hybrid_and_names_every_broken_arm():
    table = synthetic_table(widths=(64,))
    table["arms"]["local_gma"][64] = _run("local_gma", _curve([1.0, 0.99, 0.98], (0.0, 0.005, 0.01)), 40000,
                                          {"n_components": 64, "window": 16, **LM_ROUTING_REMEDY})
    advice = capacity.when_to_choose_gma(table)
    hybrid = [line for line in advice if "local_gma" in line]
    assert len(hybrid) == 1 and hybrid[0].startswith("At width 64, local_gma recalls more than window")
    assert "and recalls more than gma_k64" in hybrid[0] and "prefer it when its state of 40,000 bytes fits" in hybrid[0]
    # no recommendation is about an arm with the default routing, and a sentence about each such arm says why
    default = [arm for arm in table["arms"] if capacity.uses_default_routing(table["arms"][arm][64])]
    assert "decay_gma" in default and "gma_k8" in default and "local_gma" not in default
    for line in advice:
        if "prefer it" in line:
            assert line.split(", ")[1].split()[0] not in default, line
        if "choose GMA over" in line:
            assert not any(f"{arm} " in line or f"{arm}," in line for arm in default), line
    for arm in default:
        size = capacity.gma_size(arm, table["arms"][arm][64])
        assert any((arm in line or (size and f"{size[0]}" in line and "GMA with the default routing" in line))
                   and "default routing, which collapses" in line for line in advice), arm


def test_equal_state_points_and_their_sentences():
    table = synthetic_table()
    # GMA K=64 keeps 2 * 64 * 65 * 4 = 33,280 bytes at width 64, linear attention's state there
    points = capacity.equal_state_points(table)
    assert [(p["width"], p["arm"], p["state_bytes"]) for p in points] == [(64, "gma_k64_var_bal", 33280)]
    table["arms"]["linear"][128]["state_bytes"] = table["arms"]["gma_k128_var_bal"][128]["state_bytes"]
    points = capacity.equal_state_points(table)
    assert [(p["width"], p["arm"]) for p in points] == [(64, "gma_k64_var_bal"), (128, "gma_k128_var_bal")]
    advice = capacity.when_to_choose_gma(table)
    for point in points:
        comparison = point["comparison"]
        low, high = comparison["ci95"]
        how = "less" if comparison["difference"] < 0 else "more"
        lines = [line for line in advice if line.startswith(f"At width {point['width']} and equal state")]
        assert len(lines) == 1
        assert (f"{point['arm']} recalls {how} than linear attention in the means, {point['mean']:.3f} against "
                f"{point['linear_mean']:.3f} ({comparison['difference']:+.3f}") in lines[0]
        assert f"interval, {low:+.3f} to {high:+.3f}, allows" in lines[0]
        ahead = f"linear attention ahead by up to {-low:.3f}" if how == "less" else f"GMA ahead by up to {high:.3f}"
        assert ahead in lines[0]
    # a sentence for the two matched points together only when they agree
    same = all(p["mean"] < p["linear_mean"] for p in points) or all(p["mean"] >= p["linear_mean"] for p in points)
    assert any(line.startswith("At equal state, GMA with variance + balance") for line in advice) == same


def test_the_guessing_floor():
    assert capacity.guessing_floor([4, 6, 8, 12, 16]) == {4: 0.25, 6: 1 / 6, 8: 0.125, 12: 1 / 12, 16: 0.0625}
    assert capacity.mean_guessing_floor((4, 6, 8, 12, 16)) == pytest.approx(0.1375, abs=1e-15)
    assert capacity.mean_guessing_floor([2]) == 0.5
    with pytest.raises(ValueError, match="at least one kv-pair count"):
        capacity.guessing_floor([])
    with pytest.raises(ValueError, match=r"kv_pairs\[...\] must be >= 1"):
        capacity.guessing_floor([4, 0])
    table = synthetic_table(with_extras=False, widths=(64,))
    floor = capacity.mean_guessing_floor(KV)
    table["arms"]["gma_k8"][64] = _run("gma", {n: [0.9 / n] * 3 for n in KV}, 2 * 8 * 65 * 4, {"n_components": 8})
    line = [text for text in capacity.recall_findings(table) if text.startswith("Guessing one of the n values")]
    assert line == [f"Guessing one of the n values in the context scores 1/n, {floor:.3f} in the mean over 4, 8 "
                    f"and 16 pairs; at width 64 gma_k8 ({statistics.fmean(0.9 / n for n in KV):.3f}) recalls no "
                    f"more than that."]


def test_default_routing_floor_reads_the_table():
    table = synthetic_table(with_extras=False)
    for width in (64, 128):
        for k in (8, 16, 32, 64, 128, 256):
            table["arms"][f"gma_k{k}"][width] = _run("gma", {n: [0.9 / n, 0.95 / n, 1.0 / n] for n in KV},
                                                     2 * k * (width + 1) * 4, {"n_components": k})
    found = capacity.default_routing_floor(table)
    assert found["floor"] == capacity.guessing_floor(KV) and list(found["widths"]) == [64, 128]
    row = found["widths"][64]
    assert row["arms"] == [f"gma_k{k}" for k in (8, 16, 32, 64, 128, 256)]
    assert row["by_count"] == {n: pytest.approx(0.95 / n) for n in KV}
    assert found["ratios"] == (pytest.approx(0.95), pytest.approx(0.95))  # the mean over seeds, per arm and count
    mean = statistics.fmean(0.95 / n for n in KV)
    assert found["sentence"] == (f"GMA with the default routing, 12 arms: {mean:.3f} to {mean:.3f} in the mean over "
                                 f"the counts, at most the mean of 1/n, {found['mean_floor']:.3f}; at every count "
                                 f"each arm recalls 0.95 to 0.95 of 1/n.")
    none = {**table, "arms": {arm: e for arm, e in table["arms"].items() if not arm.startswith("gma_k")}}
    assert capacity.default_routing_floor(none)["sentence"] == "No GMA arm with the default routing is recorded."


def test_routing_share_counts_the_slots_in_use():
    one_slot = torch.tensor([[0.01, 0.98, 0.01]] * 4)
    share = capacity.routing_share(one_slot)
    assert share == {"rows": 4, "n_components": 3, "mean_top": pytest.approx(0.98), "busiest": 1,
                     "busiest_share": 1.0, "used": 1}
    spread = capacity.routing_share(capacity.slot_routing(capacity.round_robin(6, 3), 3).float()[None])
    assert spread["used"] == 3 and spread["busiest_share"] == pytest.approx(1 / 3) and spread["mean_top"] == 1.0
    with pytest.raises(TypeError, match="floating-point"):
        capacity.routing_share(torch.ones(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="at least one row"):
        capacity.routing_share(torch.ones(0, 3))


def _recorded_table():
    from gma_teach.records import results_folder

    path = results_folder() / "recall_study_tables.json"
    if not path.exists():
        pytest.skip("the recall study's saved table is not in this copy")
    return json.loads(path.read_text())["table"]


def test_the_recorded_study_supports_the_chapters_advice():
    """Chapter 12's prose about the recorded study, bound to the saved table: it fails when a re-run changes it."""
    table = _recorded_table()
    assert table["design"]["kv_pairs"] == [4, 6, 8, 12, 16]
    floor = capacity.mean_guessing_floor(table["design"]["kv_pairs"])
    assert floor == pytest.approx(0.1375)
    # the two matched points: K=64 with variance + balance at width 64, K=128 at width 128
    points = capacity.equal_state_points(table)
    assert [(p["width"], p["arm"], p["state_bytes"]) for p in points] == [(64, "gma_k64_var_bal", 17152),
                                                                         (128, "gma_k128_var_bal", 67072)]
    for point in points:
        arm = table["arms"][point["arm"]][str(point["width"])]
        linear = table["arms"]["linear"][str(point["width"])]
        assert point["mean"] == pytest.approx(statistics.fmean(arm["test_mean"]))
        assert point["mean"] < statistics.fmean(linear["test_mean"])  # GMA recalls less in the means
        assert not point["comparison"]["told_apart"] and point["comparison"]["ci95"][0] < 0
    advice = capacity.when_to_choose_gma(table)
    assert advice[0] == ("At equal state, GMA with variance + balance recalls less than linear attention in the "
                         "means at all 2 points where their states match (K=64 at width 64 and K=128 at width "
                         "128); after Holm no difference is told apart.")
    # every default-routing arm, the hybrid and the decayed GMA included, recalls no more than the floor
    for arm, by_width in table["arms"].items():
        for entry in by_width.values():
            if capacity.uses_default_routing(entry):
                assert statistics.fmean(entry["test_mean"]) <= floor, arm
    found = capacity.default_routing_floor(table)  # at or near 1/n at every count, as chapter 12 reads them
    assert 0.8 <= found["ratios"][0] and found["ratios"][1] <= 1.1 and len(found["means"]) == 12
    assert capacity.uses_default_routing(table["arms"]["local_gma"]["64"])
    assert capacity.uses_default_routing(table["arms"]["decay_gma"]["64"])
    for arm in ("local_gma", "decay_gma"):
        (line,) = [text for text in advice if arm in text]
        assert f"the records do not recommend {arm}" in line and "default routing, which collapses" in line
    assert not any("prefer it" in line for line in advice)  # nothing the records do not support


def test_the_table_is_checked():
    table = synthetic_table(with_extras=False, widths=(64,))
    assert capacity.check_recall_table(table) is table
    stringly = synthetic_table(with_extras=False, widths=(64,))
    stringly["arms"] = {arm: {str(w): {**e, "by_count": {str(n): v for n, v in e["by_count"].items()}}
                              for w, e in by_width.items()} for arm, by_width in stringly["arms"].items()}
    assert capacity.recall_findings(stringly) == capacity.recall_findings(table)  # JSON's string keys read the same
    with pytest.raises(TypeError, match="table must be a dict"):
        capacity.recall_findings([table])
    with pytest.raises(ValueError, match=r"table lacks \['comparisons'\]"):
        capacity.check_recall_table({"design": table["design"], "arms": {}})
    broken = synthetic_table(with_extras=False, widths=(64,))
    broken["arms"]["sdpa"][64]["test_mean"] = [1.0]
    with pytest.raises(ValueError, match=r"table\['arms'\]\['sdpa'\]\[64\]: 1 test means for 3 seeds"):
        capacity.check_recall_table(broken)
    broken = synthetic_table(with_extras=False, widths=(64,))
    del broken["comparisons"][0]["p_holm"]
    with pytest.raises(ValueError, match=r"table\['comparisons'\]\[0\] lacks \['p_holm'\]"):
        capacity.check_recall_table(broken)
    with pytest.raises(ValueError, match="near must be in"):
        capacity.recall_findings(table, near=2.0)


def test_shrink_study_copies_a_typed_study_with_its_setting_changed():
    from gma_teach.designs import RECALL_STUDY, Study

    small = capacity.shrink_study(RECALL_STUDY, seq_len=16, kv_pairs=(2,))
    assert isinstance(small, Study) and small["seq_len"] == 16 and small.setting["kv_pairs"] == (2,)
    assert RECALL_STUDY["seq_len"] == 64 and small.arms == RECALL_STUDY.arms
    with pytest.raises(ValueError, match=r"unknown study keys \['width'\]"):
        capacity.shrink_study(RECALL_STUDY, width=3)
    assert capacity.uses_default_routing(RECALL_STUDY.arms["gma_k8"])
    assert not capacity.uses_default_routing(RECALL_STUDY.arms["gma_k8_var_bal"])
