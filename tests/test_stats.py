"""gma_teach.stats: every summary and interval, each with one contract, checked by hand, against a brute-force
definition and (where installed) against scipy."""
import itertools
import math
import random
import statistics

import pytest

from gma_teach import stats

try:
    import scipy.stats as scipy_stats
except ImportError:  # scipy comes with the dev extra's scikit-learn; the hand-computed checks run without it
    scipy_stats = None


def test_summaries_have_one_contract_each():
    assert stats.mean_std([1.0, 2.0, 6.0]) == (3.0, pytest.approx(math.sqrt(7.0)))
    assert stats.mean_std([4]) == (4.0, 0.0)
    assert stats.describe([1.0, 2.0, 6.0]) == {"mean": 3.0, "std": pytest.approx(math.sqrt(7.0)), "n": 3}
    interval = stats.mean_interval([1.0, 2.0, 6.0])
    half = 4.302653 * math.sqrt(7.0) / math.sqrt(3.0)
    assert interval["ci95"] == pytest.approx([3.0 - half, 3.0 + half])
    assert stats.mean_half_width([1.0, 2.0, 6.0]) == (3.0, pytest.approx(half))
    assert stats.mean_interval([3.0])["ci95"] is None and stats.mean_half_width([3.0]) == (3.0, None)
    for function in (stats.mean_std, stats.describe, stats.mean_interval, stats.mean_half_width):
        with pytest.raises(ValueError, match="at least one value"):
            function([])
    with pytest.raises(TypeError, match="values must be a sequence"):
        stats.mean_std(3.0)


def test_holm_by_hand():
    # sorted 0.005, 0.01, 0.03, 0.04 -> 4 x 0.005, 3 x 0.01, 2 x 0.03, max(0.06, 1 x 0.04)
    assert stats.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert stats.holm([0.5, 0.9]) == [1.0, 1.0]  # capped at 1
    assert stats.holm([0.2]) == [0.2]


def _holm_by_definition(p_values):
    """The adjusted p-value of H_i is the smallest family-wise level alpha at which Holm's step-down procedure
    rejects H_i, capped at 1; below 1 it is one of the values (m - j) p_(j). Try each candidate level, run the
    procedure."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    candidates = sorted({(m - rank) * p_values[i] for rank, i in enumerate(order)})

    def rejected(alpha):
        out = set()
        for rank, i in enumerate(order):
            if p_values[i] * (m - rank) > alpha * (1 + 1e-12):  # a level equal to a candidate rejects it
                break
            out.add(i)
        return out

    return [min(1.0, min((alpha for alpha in candidates if i in rejected(alpha)), default=1.0))
            for i in range(m)]


def test_holm_matches_the_step_down_procedure_and_is_monotone():
    rng = random.Random(0)
    for m in (1, 2, 3, 5, 8):
        for _ in range(30):
            p = [round(rng.random() ** 3, 3) for _ in range(m)]  # rounding makes ties
            adjusted = stats.holm(p)
            assert adjusted == pytest.approx(_holm_by_definition(p), abs=1e-12), p
            assert all(a <= 1.0 and a >= raw for a, raw in zip(adjusted, p))
            for i, j in itertools.product(range(m), repeat=2):
                if p[i] <= p[j]:
                    assert adjusted[i] <= adjusted[j]


@pytest.mark.parametrize("bad, message", [([], "at least one"), ([0.1, 1.5], r"\[0, 1\]"), ([-0.1], r"\[0, 1\]")])
def test_holm_refuses_what_is_not_a_p_value(bad, message):
    with pytest.raises(ValueError, match=message):
        stats.holm(bad)


def test_student_t_cdf_by_hand():
    assert stats.student_t_cdf(0.0, 3) == pytest.approx(0.5, abs=1e-15)
    # one degree of freedom is Cauchy: 1/2 + atan(t)/pi; two: 1/2 + t / (2 sqrt(2 + t^2))
    for t in (-7.0, -1.0, 0.3, 2.5, 40.0):
        assert stats.student_t_cdf(t, 1) == pytest.approx(0.5 + math.atan(t) / math.pi, rel=1e-12, abs=1e-15)
        assert stats.student_t_cdf(t, 2) == pytest.approx(0.5 + t / (2 * math.sqrt(2 + t * t)), rel=1e-12)
    for dof in (1, 4, 29, 30, 200):  # the tabled 0.975 quantiles land where they should
        assert stats.student_t_cdf(stats.t_quantile_975(dof), dof) == pytest.approx(0.975, abs=2e-6)
    with pytest.raises(ValueError, match="dof must be positive"):
        stats.student_t_cdf(1.0, 0)


def test_paired_t_p_by_hand_and_against_the_interval():
    # differences 1, 2, 3: mean 2, std 1, t = 2 sqrt(3) with 2 dof: p = 1 - t / sqrt(2 + t^2) (two-sided)
    t = 2 * math.sqrt(3)
    assert stats.paired_t_p([2, 4, 6], [1, 2, 3]) == pytest.approx(1 - t / math.sqrt(2 + t * t), rel=1e-12)
    assert stats.paired_t_p([1, 2, 3], [1, 2, 3]) == 1.0 and stats.paired_t_p([2, 3, 4], [1, 2, 3]) == 0.0
    rng = random.Random(1)
    for n in (2, 3, 5, 10):
        for _ in range(20):
            a = [rng.gauss(0.3, 1) for _ in range(n)]
            b = [rng.gauss(0, 1) for _ in range(n)]
            low, high = stats.paired_difference(a, b)["ci95"]
            p = stats.paired_t_p(a, b)
            assert (p < 0.05) == (low > 0 or high < 0) or abs(p - 0.05) < 1e-5
    with pytest.raises(ValueError, match="at least 2 seeds"):
        stats.paired_t_p([1.0], [2.0])
    with pytest.raises(ValueError, match="one value per seed"):
        stats.paired_t_p([1.0, 2.0], [2.0])


@pytest.mark.skipif(scipy_stats is None, reason="scipy is not installed")
def test_t_distribution_against_scipy():
    rng = random.Random(2)
    for dof in (1, 2, 3, 7, 30, 150):
        for t in (-12.0, -2.1, -0.4, 0.0, 0.9, 3.3, 25.0):
            assert stats.student_t_cdf(t, dof) == pytest.approx(float(scipy_stats.t.cdf(t, dof)), rel=1e-10,
                                                                abs=1e-14)
    for n in (2, 3, 6, 12):
        a = [rng.gauss(0.5, 1) for _ in range(n)]
        b = [rng.gauss(0, 1) for _ in range(n)]
        assert stats.paired_t_p(a, b) == pytest.approx(float(scipy_stats.ttest_rel(a, b).pvalue), rel=1e-10)


def test_ratio_of_means_interval_is_the_ratio_of_means_with_a_paired_bootstrap():
    numerators, denominators = [0.05, 0.02, 0.04], [0.09, 0.06, 0.01]
    result = stats.ratio_of_means_interval(numerators, denominators, n_boot=2000, seed=0)
    assert result["ratio"] == pytest.approx(sum(numerators) / sum(denominators))
    # a mean of per-seed ratios would be pulled far up by the third seed's tiny denominator
    assert result["ratio"] < sum(n / d for n, d in zip(numerators, denominators)) / 3
    assert result["n"] == 3 and result["n_boot"] == 2000 and result["seed"] == 0
    # the bootstrap by hand: the same generator, the same draws of seed indices, numerator and denominator paired
    generator = random.Random(0)
    draws = []
    for _ in range(2000):
        picked = [generator.randrange(3) for _ in range(3)]
        draws.append(sum(numerators[i] for i in picked) / sum(denominators[i] for i in picked))
    draws.sort()
    low = draws[49] + (0.025 * 1999 - 49) * (draws[50] - draws[49])
    high = draws[1948] + (0.975 * 1999 - 1948) * (draws[1949] - draws[1948])
    assert result["ci95"] == pytest.approx([low, high])
    # every resampled ratio lies between the smallest and largest possible resample, and so does the interval
    possible = [sum(numerators[i] for i in c) / sum(denominators[i] for i in c)
                for c in itertools.product(range(3), repeat=3)]
    assert min(possible) <= result["ci95"][0] <= result["ratio"] <= result["ci95"][1] <= max(possible)
    assert stats.ratio_of_means_interval(numerators, denominators, n_boot=2000, seed=0) == result
    five = ([0.05, 0.02, 0.04, 0.03, 0.06], [0.09, 0.06, 0.01, 0.07, 0.08])
    assert (stats.ratio_of_means_interval(*five, n_boot=500, seed=1)["ci95"]
            != stats.ratio_of_means_interval(*five, n_boot=500, seed=2)["ci95"])
    # identical seeds: no spread, the interval is the point
    same = stats.ratio_of_means_interval([1.0, 1.0], [4.0, 4.0], n_boot=100, seed=3)
    assert same["ratio"] == same["ci95"][0] == same["ci95"][1] == 0.25


def test_ratio_of_means_interval_rejects_bad_input():
    with pytest.raises(ValueError, match="one value per seed"):
        stats.ratio_of_means_interval([1.0, 2.0], [1.0], n_boot=100, seed=0)
    with pytest.raises(ValueError, match="at least 2 seeds"):
        stats.ratio_of_means_interval([1.0], [1.0], n_boot=100, seed=0)
    with pytest.raises(ValueError, match="average 0"):
        stats.ratio_of_means_interval([1.0, 2.0], [1.0, -1.0], n_boot=100, seed=0)
    with pytest.raises(ValueError, match="n_boot must be >= 100"):
        stats.ratio_of_means_interval([1.0, 2.0], [1.0, 2.0], n_boot=10, seed=0)
    with pytest.raises(ValueError, match="finite"):
        stats.ratio_of_means_interval([1.0, math.nan], [1.0, 2.0], n_boot=100, seed=0)
    with pytest.raises(TypeError, match="seed must be an int"):
        stats.ratio_of_means_interval([1.0, 2.0], [1.0, 2.0], n_boot=100, seed=0.5)


def test_optional_stopping_keeps_the_first_look_at_alpha_and_inflates_the_second():
    result = stats.optional_stopping_rate(3, 2, trials=20_000, seed=0)
    spread = 4 * math.sqrt(0.05 * 0.95 / 20_000)  # four binomial standard errors
    assert abs(result["first_look"] - 0.05) < spread  # one declared look: the promised 5%
    assert result["either_look"] > 0.05 + spread  # a second look after a miss: more false findings
    assert result["either_look"] < 2 * 0.05  # and at most the two looks' levels added
    again = stats.optional_stopping_rate(3, 2, trials=20_000, seed=0)
    assert again == result and result["trials"] == 20_000
    with pytest.raises(ValueError, match="first must be >= 2"):
        stats.optional_stopping_rate(1, 2, trials=100, seed=0)
    with pytest.raises(ValueError, match="alpha"):
        stats.optional_stopping_rate(3, 2, trials=100, seed=0, alpha=1.5)


def test_half_width_is_the_t_interval_of_a_summary():
    from gma_teach.stats import describe, half_width, mean_half_width

    values = [2.41, 2.38, 2.45, 2.40]
    summary = describe(values)
    assert half_width(summary["std"], summary["n"]) == pytest.approx(mean_half_width(values)[1], rel=1e-12)
    assert half_width(1.0, 3) == pytest.approx(4.302653 / 3 ** 0.5)
    with pytest.raises(ValueError, match="n must be an int >= 2.*got 1"):
        half_width(1.0, 1)


@pytest.mark.parametrize("mean, std", [(1.0, 1.0), (-0.0469, 0.0082), (0.0228, 0.0065), (0.6, 1.0)])
def test_seeds_to_tell_apart_is_where_the_95_interval_first_leaves_zero(mean, std):
    """At alpha 0.05 the answer is the first n whose t-interval, t_{0.975, n-1} std / sqrt(n), is narrower than
    |mean| (read from the quantile table, not from the CDF the function uses); and data with exactly that mean and
    spread give a paired t p-value below 0.05 at n seeds and not at n - 1."""
    expected = next(n for n in range(2, 31) if stats.t_quantile_975(n - 1) * std / math.sqrt(n) < abs(mean))
    n = stats.seeds_to_tell_apart(mean, std, alpha=0.05)
    assert n == expected

    def sample(count):  # count values with this mean and sample standard deviation
        z = [i - (count - 1) / 2 for i in range(count)]
        scale = statistics.stdev(z)
        return [mean + std * value / scale for value in z]

    assert stats.paired_t_p(sample(n), [0.0] * n) < 0.05 <= stats.paired_t_p(sample(n - 1), [0.0] * (n - 1))


def test_seeds_to_tell_apart_grows_with_a_stricter_level_and_refuses_bad_input():
    loose = stats.seeds_to_tell_apart(0.02, 0.04, alpha=0.05)
    strict = stats.seeds_to_tell_apart(0.02, 0.04, alpha=0.05 / 24)
    assert loose < strict
    assert stats.seeds_to_tell_apart(0.0, 1.0, alpha=0.05) is None
    assert stats.seeds_to_tell_apart(1e-6, 1.0, alpha=0.05, at_most=50) is None
    for kwargs, message in (({"mean": 1.0, "std": 0.0, "alpha": 0.05}, "std positive"),
                            ({"mean": float("nan"), "std": 1.0, "alpha": 0.05}, "mean must be finite"),
                            ({"mean": 1.0, "std": 1.0, "alpha": 1.5}, "alpha must lie")):
        with pytest.raises(ValueError, match=message):
            stats.seeds_to_tell_apart(**kwargs)
