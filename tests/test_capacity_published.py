"""The published Setting-1 curves of Schlag, Irie and Schmidhuber, as quoted in ``gma_teach.capacity._published``."""

import pytest

from gma_teach.capacity._published import PUBLISHED_CURVES, PUBLISHED_MODELS, published_final


def test_every_model_is_quoted_and_every_curve_is_well_formed():
    assert set(PUBLISHED_CURVES) == set(PUBLISHED_MODELS)
    for model, curves in PUBLISHED_CURVES.items():
        assert curves, model
        for s, (steps, losses) in curves.items():
            assert steps == tuple(range(100, 100 * len(steps) + 1, 100)), (model, s)
            assert len(losses) == len(steps), (model, s)
            assert all(loss > 0 for loss in losses), (model, s)
            # Every run starts from the untrained 0.5; only softmax is already far below it at step 100.
            assert losses[0] <= 0.7, (model, s)
            if model != "softmax":
                assert 0.3 <= losses[0] <= 0.7, (model, s)


def test_softmax_at_20_reaches_the_target_and_stops():
    final = published_final("softmax")[20]
    assert final["reached_target"]
    assert final == {"steps": 200, "loss": 0.000634325, "best": 0.000634325, "reached_target": True,
                     "first_below": 100}


def test_linear_reaches_the_target_only_at_20_and_40():
    finals = published_final("linear")
    assert finals[20]["reached_target"] and finals[40]["reached_target"]
    assert not any(finals[s]["reached_target"] for s in finals if s >= 60)
    assert finals[600]["first_below"] is None


def test_values_match_the_log_files():
    # d64_linear_sum_AssocSeq60N60R0.csv, first and last rows: 100,0.47293812 and 4200,0.024646008.
    steps, losses = PUBLISHED_CURVES["linear"][60]
    assert (steps[0], losses[0]) == (100, pytest.approx(0.47293812, rel=1e-5))
    assert (steps[-1], losses[-1]) == (4200, pytest.approx(0.024646008, rel=1e-5))
    # d64_linear_sum_AssocSeq20N20R0.csv, last row: 800,0.0008887422.
    steps, losses = PUBLISHED_CURVES["linear"][20]
    assert (steps[-1], losses[-1]) == (800, pytest.approx(0.0008887422, rel=1e-5))


def test_unknown_model_is_refused_by_name():
    with pytest.raises(ValueError, match=r"model must be one of .*'softmax'.*got 'performer'"):
        published_final("performer")
