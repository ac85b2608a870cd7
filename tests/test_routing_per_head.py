"""Chapter 11 reads each head's hard assignment: hand cases with numbers derived by hand.

The central case: four heads, each one-hot, that disagree. Averaged, every row is four cells of 0.25, the argmax
is a tie broken by index (every token to component 0) and the category information vanishes; read head by head,
every head sorts the tokens perfectly.
"""
import math

import matplotlib
import numpy as np
import pytest
import torch

from gma_teach import diagnostics

matplotlib.use("Agg")


def _disagreeing_heads() -> torch.Tensor:
    """T = 4 tokens, H = 4 heads, K = 4: head h sends token t to component (t + h) mod 4."""
    resp = torch.zeros(4, 4, 4)
    for t in range(4):
        for h in range(4):
            resp[t, h, (t + h) % 4] = 1.0
    return resp


CATEGORIES = ["a", "a", "b", "b"]


def test_the_head_average_ties_where_each_head_is_sharp():
    resp = _disagreeing_heads()
    averaged = resp.mean(dim=1)
    assert torch.allclose(averaged, torch.full((4, 4), 0.25))
    assert diagnostics.tied_share(averaged) == 1.0  # every averaged row is a four-way tie
    assert diagnostics.tied_share(resp) == 0.0  # no head's row is
    assert diagnostics.head_assignments(resp).tolist() == [[0, 1, 2, 3], [1, 2, 3, 0], [2, 3, 0, 1], [3, 0, 1, 2]]
    # head-averaged: the tie goes to component 0 for every token, so one component holds everything
    averaged_metrics = diagnostics.routing_metrics(resp, CATEGORIES)
    assert averaged_metrics["active"] == 1
    assert averaged_metrics["purity"] == 0.5 and averaged_metrics["mi"] == 0.0
    # per head: each head gives every token its own component, so purity 1 and I(Z;C) = H(C) = ln 2
    per_head = diagnostics.head_routing_metrics(resp, CATEGORIES)
    assert per_head["n_heads"] == 4
    for head in per_head["heads"]:
        assert head["active"] == 4 and head["purity"] == 1.0
        assert head["mi"] == pytest.approx(math.log(2)) and head["nmi_category"] == pytest.approx(1.0)
    assert per_head["mean"]["purity"] == 1.0 and per_head["mean"]["mi"] == pytest.approx(math.log(2))
    assert per_head["mean"]["token_entropy"] == 0.0 and per_head["mean"]["mean_max"] == 1.0


def test_head_metrics_average_the_heads_scores():
    # head 0 sorts by category (purity 1, MI ln 2 nats); head 1 splits each category (purity 1/2, MI 0)
    resp = torch.zeros(4, 2, 2)
    for t, (z0, z1) in enumerate([(0, 0), (0, 1), (1, 0), (1, 1)]):
        resp[t, 0, z0], resp[t, 1, z1] = 1.0, 1.0
    table = diagnostics.head_routing_metrics(resp, CATEGORIES)
    assert [head["purity"] for head in table["heads"]] == [1.0, 0.5]
    assert table["heads"][0]["mi"] == pytest.approx(math.log(2)) and table["heads"][1]["mi"] == pytest.approx(0.0)
    assert table["mean"]["purity"] == 0.75
    assert table["mean"]["mi"] == pytest.approx(math.log(2) / 2)
    assert table["mean"]["active"] == 2.0 and table["mean"]["n_components"] == 2


def test_the_head_baseline_shuffles_the_categories_once_for_every_head():
    # one head, z = [0, 0, 1, 1], categories a a b b. Of the 6 ways to place the two a's, 2 put them in one
    # component (purity 1) and 4 split them (purity 1/2): the shuffled purity has mean 2/3, MI mean (1/3) ln 2.
    resp = torch.zeros(4, 1, 2)
    resp[[0, 1], 0, 0], resp[[2, 3], 0, 1] = 1.0, 1.0
    baseline = diagnostics.head_permutation_baseline(resp, CATEGORIES, n_shuffles=3000, seed=1)
    assert baseline["purity"]["mean"] == pytest.approx(2 / 3, abs=0.02)
    assert baseline["mi"]["mean"] == pytest.approx(math.log(2) / 3, abs=0.02)
    # two identical heads give the same head-mean distribution as one
    twice = diagnostics.head_permutation_baseline(resp.repeat(1, 2, 1), CATEGORIES, n_shuffles=3000, seed=1)
    assert twice["purity"] == baseline["purity"]
    report = diagnostics.head_routing_report(resp, CATEGORIES, n_shuffles=50, seed=0)
    assert report["metrics"]["purity"] == 1.0
    assert report["separation_sd"]["purity"] == pytest.approx(
        (1.0 - report["baseline"]["purity"]["mean"]) / report["baseline"]["purity"]["std"])


def test_component_summary_lists_each_heads_components_and_their_distinctive_tokens():
    # head 0: component 1 takes every " x" and one of the four " " tokens; component 0 takes the rest
    tokens = [" ", " ", " ", " ", " x", " x", " y", " y"]
    categories = diagnostics.token_categories(tokens)
    z0 = [0, 0, 0, 1, 1, 1, 0, 0]
    resp = torch.zeros(8, 2, 3)
    for t, k in enumerate(z0):
        resp[t, 0, k] = 1.0
        resp[t, 1, 2] = 1.0  # head 1: every token to component 2
    rows = diagnostics.head_component_summary(resp, categories, tokens=tokens, top=3, examples=2, min_count=1)
    assert [(row["head"], row["component"]) for row in rows] == [(1, 2), (0, 0), (0, 1)]
    assert rows[0]["hard_fraction"] == 1.0 and rows[1]["hard_fraction"] == 5 / 8
    # component 1 of head 0 takes all of " x" (2 of 2) and a quarter of " " (1 of 4): " x" comes first
    assert rows[2]["examples"] == [" x", " "]
    # component 0 takes all of " y" and 3 of the 4 spaces: " y" (share 1) before " " (share 3/4)
    assert rows[1]["examples"] == [" y", " "]
    assert rows[2]["purity"] == 2 / 3 and rows[2]["dominant_category"] == "lower_alpha"


def test_mutual_information_in_bits_by_hand():
    assert diagnostics.mutual_information_bits(torch.tensor([0, 0, 1, 1]), torch.tensor([0, 1, 0, 1])) == 0.0
    assert diagnostics.mutual_information_bits([0, 0, 1, 1], ["u", "u", "v", "v"]) == pytest.approx(1.0)
    assert diagnostics.mutual_information_bits([0, 1, 2, 3], [0, 0, 1, 1]) == pytest.approx(1.0)
    assert diagnostics.mutual_information_bits([0, 1, 2, 3], [0, 1, 2, 3]) == pytest.approx(2.0)


def test_a_usage_matched_hash_keeps_the_usage_and_is_a_function_of_the_token():
    ids = torch.tensor([5, 9, 5, 2, 9, 2, 7, 7, 5, 2, 9, 7])  # four ids, three tokens each
    usage = torch.tensor([6, 3, 3, 0])
    for seed in range(20):
        hashed = diagnostics.usage_matched_hash(ids, usage, generator=torch.Generator().manual_seed(seed))
        assert torch.bincount(hashed, minlength=4).tolist() == usage.tolist()
        for token in ids.unique():  # blocks of 6, 3, 3 never cut an id's three tokens apart
            assert hashed[ids == token].unique().numel() == 1
    with pytest.raises(ValueError, match="summing to T"):
        diagnostics.usage_matched_hash(ids, torch.tensor([6, 3]), generator=torch.Generator())


def test_identity_information_against_hashes_by_hand():
    # ids 0, 1 are category x and ids 2, 3 category y, two tokens each. A router z = id // 2 carries 1 bit about
    # the identity and 1 bit about the category. A hash with its usage (4, 4) puts two whole ids in each
    # component: 1 bit about identity always; about category 1 bit when it groups {0, 1} (1 draw in 3), else 0:
    # 1/3 bit on average. A router by position (z = t mod 2) carries nothing about either.
    ids = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    categories = ["x"] * 4 + ["y"] * 4
    by_identity = diagnostics.identity_information(ids // 2, ids, categories, n_hashes=900, seed=0)
    assert by_identity["router"]["identity"] == pytest.approx(1.0)
    assert by_identity["router"]["category"] == pytest.approx(1.0)
    assert by_identity["router"]["entropy"] == pytest.approx(1.0)
    assert by_identity["hash"]["identity"]["mean"] == pytest.approx(1.0)
    assert by_identity["hash"]["category"]["mean"] == pytest.approx(1 / 3, abs=0.05)
    by_position = diagnostics.identity_information(torch.arange(8) % 2, ids, categories, n_hashes=10, seed=0)
    assert by_position["router"]["identity"] == pytest.approx(0.0)
    assert by_position["router"]["category"] == pytest.approx(0.0)
    two_heads = torch.stack([ids // 2, torch.arange(8) % 2], dim=1)
    both = diagnostics.identity_information(two_heads, ids, categories, n_hashes=10, seed=0)
    assert both["router"]["identity"] == pytest.approx(0.5)  # the mean of the two heads


def test_bands_are_runs_longer_than_the_shuffled_order_gives():
    assert diagnostics.mean_run_length(torch.tensor([0, 1, 0, 1])) == 1.0
    assert diagnostics.mean_run_length(torch.tensor([[0, 0], [1, 1]])) == 2.0  # runs do not cross rows
    assert diagnostics.mean_run_length(torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])) == 4.0
    banded = torch.tensor([[0] * 8 + [1] * 8] * 8)
    report = diagnostics.band_report(banded, n_shuffles=50, seed=0)
    assert report["mean_run"] == 8.0 and report["banded"]
    assert report["shuffled"]["mean"] < 3.0
    alternating = torch.tensor([[0, 1] * 8] * 8)
    assert not diagnostics.band_report(alternating, n_shuffles=50, seed=0)["banded"]


def _saved_tables() -> dict:
    def arm(bpb, info):
        return {"seeds": [0, 1], "val_bits_per_byte": {"mean": bpb}, "information": {"mean": info}}

    comparison = {"against": "default", "ci95": [0.0, 1.0]}
    return {"tables": {"val_bits_per_byte": {"arms": {"default": arm(2.5, 1.0), "loss": arm(2.6, 4.0)}},
                       "routing_information": {"arms": {}}},
            "declared": {"comparisons": [
                {**comparison, "arm": "loss", "metric": "val_bits_per_byte", "mean": 0.1, "p_holm": 0.01,
                 "told_apart": True},
                {**comparison, "arm": "loss", "metric": "routing_information", "mean": 3.0, "p_holm": 0.001,
                 "told_apart": True}]}}


def test_arm_costs_read_the_saved_verdicts():
    rows = diagnostics.arm_costs(_saved_tables())
    assert [row["arm"] for row in rows] == ["default", "loss"]
    assert rows[0]["bits_per_byte_vs"] is None and rows[0]["bits_per_byte"] == 2.5
    assert rows[1]["bits_per_byte_vs"] == {"mean": 0.1, "ci95": [0.0, 1.0], "p_holm": 0.01, "told_apart": True}
    assert rows[1]["information_vs"]["mean"] == 3.0 and rows[1]["information"] == 4.0
    with pytest.raises(ValueError, match="reference"):
        diagnostics.arm_costs(_saved_tables(), reference="none")


def test_layer_information_is_the_mean_over_seeds_of_the_heads_mean():
    def run(initial, later):
        entry = lambda values: [{"information": [0.0, 0.0]}, {"information": values}]  # noqa: E731
        return {"routing": {"initial": entry(initial), "evaluations": [entry(later)], "steps": [200]}}

    record = {"runs": [run([2.0, 2.0], [1.0, 0.0]), run([2.0, 4.0], [3.0, 2.0])]}
    curve = diagnostics.layer_information(record, 1)
    assert curve == {"steps": [0, 200], "bits": [2.5, 1.5], "n": 2}
    assert diagnostics.layer_information({"runs": [{"routing": None}]}, 0)["n"] == 0


def test_figures_and_the_explorer_read_one_head():
    import matplotlib.pyplot as plt

    from gma_teach import plots
    from gma_teach.widgets.routing_explorer import RoutingExplorer

    resp = _disagreeing_heads()
    tokens = ["a", "b", "c", "d"]
    fig = plots.plot_responsibility_heatmap(resp, tokens, top=4, head=2)
    shown = np.asarray(fig.axes[0].images[0].get_array())
    assert set(np.unique(shown)) == {0.0, 1.0}  # one head's one-hot rows, not the average's 0.25
    assert "head 2" in fig.axes[0].get_title()
    fig = plots.plot_component_categories(resp, CATEGORIES, top=4, head=1)
    assert np.asarray(fig.axes[0].images[0].get_array()).shape[0] == 4  # every component of head 1 wins a token
    with pytest.raises(ValueError, match="head"):
        plots.plot_token_strip(tokens, resp, head=4)
    averaged = RoutingExplorer(resp, tokens, position=0)
    assert "4-way tie" in averaged.figure().axes[0].get_title()
    one_head = RoutingExplorer(resp, tokens, position=0, head=2)
    assert one_head.component == 2
    assert "head 2" in one_head.figure().axes[0].get_title()
    assert "component 2 (max 1.000)" in one_head.figure().axes[0].get_title()
    plt.close("all")


def test_the_saved_remedy_costs_agree_with_the_records_and_the_chapters_prose():
    """Chapter 11 prints each arm's cost from the saved tables: the same verdicts come out of the arm records when
    the statistics are asked again, and the page's sentences about them hold (every change moves the information
    by more than a bit and the bits per byte by 0.02 to 0.15; the balance loss is the one arm the rule keeps)."""
    import json

    from gma_teach import designs, study

    saved = json.loads(study.tables_path(designs.REMEDY_STUDY).read_text())
    rows = {row["arm"]: row for row in diagnostics.arm_costs(saved)}
    again = study.declared_comparisons(designs.REMEDY_STUDY)["comparisons"]
    names = {"val_bits_per_byte": "bits_per_byte_vs", "routing_information": "information_vs"}
    assert len(again) == 10
    for comparison in again:
        saved_one = rows[comparison["arm"]][names[comparison["metric"]]]
        assert saved_one["mean"] == pytest.approx(comparison["mean"], abs=1e-9)
        assert saved_one["p_holm"] == pytest.approx(comparison["p_holm"], rel=1e-6)
        assert saved_one["told_apart"] == comparison["told_apart"]
    changes = [row for arm, row in rows.items() if arm != "default"]
    assert all(abs(row["information_vs"]["mean"]) > 1.0 for row in changes)
    assert all(0.02 <= abs(row["bits_per_byte_vs"]["mean"]) <= 0.15 for row in changes)
    selection = study.study_selection(designs.REMEDY_STUDY)
    assert selection["qualified"] == [selection["arm"]] == ["balance"]  # on the study's own arms
    assert {k: v for k, v in designs.REMEDY_STUDY.arms["balance"].options.items()
            if k != "n_components"} == designs.BALANCE_REMEDY
