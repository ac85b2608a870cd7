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


def test_t_quantile_inverts_the_cdf_and_agrees_with_the_table():
    for dof in (1, 2, 4, 29, 30):
        assert stats.t_quantile(0.975, dof) == pytest.approx(stats.t_quantile_975(dof), abs=1e-6)
    # one degree of freedom is Cauchy: the p quantile is tan(pi (p - 1/2)); two: (2p - 1) sqrt(2 / (4 p (1 - p)))
    for p in (0.001, 0.2, 0.5, 0.9, 0.975, 1 - 0.05 / 48):
        assert stats.t_quantile(p, 1) == pytest.approx(math.tan(math.pi * (p - 0.5)), rel=1e-11, abs=1e-13)
        assert stats.t_quantile(p, 2) == pytest.approx((2 * p - 1) * math.sqrt(2 / (4 * p * (1 - p))), rel=1e-11,
                                                       abs=1e-13)
    for dof in (3, 7, 150):
        for p in (0.01, 0.95, 1 - 0.05 / 24):
            assert stats.student_t_cdf(stats.t_quantile(p, dof), dof) == pytest.approx(p, rel=1e-12)
    for p, dof, message in ((0.0, 3, "p must lie"), (1.0, 3, "p must lie"), (0.5, 0, "dof must be positive")):
        with pytest.raises(ValueError, match=message):
            stats.t_quantile(p, dof)


@pytest.mark.parametrize("effect, n", [(0.2, 199), (0.5, 34), (0.8, 15), (1.0, 10)])
def test_seeds_to_tell_apart_plans_at_80_percent_power_as_the_standard_tables_do(effect, n):
    """The classic sample sizes of a two-sided paired (one-sample) t-test at 5% and 80% power for an effect of
    ``effect`` standard deviations (Cohen's tables; G*Power and R's power.t.test give the same): one seed fewer
    falls short of 80%."""
    assert stats.seeds_to_tell_apart(effect, 1.0, alpha=0.05) == n
    assert stats.seeds_to_tell_apart(-3 * effect, 3.0, alpha=0.05, power=0.80) == n  # only |mean| / std matters
    assert stats.paired_t_power(effect, 1.0, n, alpha=0.05) >= 0.80 > stats.paired_t_power(effect, 1.0, n - 1,
                                                                                           alpha=0.05)


def test_paired_t_power_by_hand_and_by_simulation():
    # R: power.t.test(n = 10, delta = 1, sd = 1, type = "paired") gives 0.8030969
    assert stats.paired_t_power(1.0, 1.0, 10, alpha=0.05) == pytest.approx(0.8030969, abs=2e-7)
    assert stats.paired_t_power(0.0, 1.0, 4, alpha=0.05) == pytest.approx(0.05, abs=1e-8)  # no effect: alpha
    # the chance a simulated study rejects: n = 5 seeds, an effect of 1.2 sd, at Holm's strictest step of 12
    rng = random.Random(3)
    trials, n, alpha = 4000, 5, 0.05 / 12
    rejected = sum(stats.paired_t_p([rng.gauss(1.2, 1.0) for _ in range(n)], [0.0] * n) < alpha
                   for _ in range(trials))
    predicted = stats.paired_t_power(1.2, 1.0, n, alpha=alpha)
    assert abs(rejected / trials - predicted) < 4 * math.sqrt(predicted * (1 - predicted) / trials)


@pytest.mark.skipif(scipy_stats is None, reason="scipy is not installed")
def test_paired_t_power_against_scipys_noncentral_t():
    compared = 0
    for n in (2, 3, 5, 12, 80, 1000):
        for alpha in (0.05, 0.05 / 12, 0.05 / 48):
            critical = float(scipy_stats.t.ppf(1 - alpha / 2, n - 1))
            assert stats.t_quantile(1 - alpha / 2, n - 1) == pytest.approx(critical, rel=1e-10)
            for effect in (0.1, 0.6, 1.5, 4.0):
                delta = effect * math.sqrt(n)
                expected = float(scipy_stats.nct.sf(critical, n - 1, delta) + scipy_stats.nct.cdf(-critical, n - 1,
                                                                                                    delta))
                if math.isnan(expected):  # scipy's noncentral t gives up at some large noncentralities
                    continue
                assert stats.paired_t_power(effect, 1.0, n, alpha=alpha) == pytest.approx(expected, abs=1e-7)
                compared += 1
    assert compared >= 60


def test_the_observed_t_rule_plans_at_about_half_the_power():
    """The old plan -- the fewest seeds at which a difference of exactly the observed mean and spread would pass --
    is where the power crosses about one half (one seed fewer stays near or below it); 80% needs more seeds, and
    far more when the effect is small against the spread."""
    for mean, std, alpha in ((0.0616, 0.0228, 0.05 / 12), (0.0405, 0.0157, 0.05 / 8), (0.6, 1.0, 0.05),
                             (0.02, 0.04, 0.05)):
        observed = next(n for n in range(2, 1000)
                        if abs(mean) / (std / math.sqrt(n)) > stats.t_quantile(1 - alpha / 2, n - 1))
        assert stats.paired_t_power(mean, std, observed - 1, alpha=alpha) < 0.55
        assert abs(stats.seeds_to_tell_apart(mean, std, alpha=alpha, power=0.5) - observed) <= 1
        assert stats.seeds_to_tell_apart(mean, std, alpha=alpha) > observed
    half, planned = (stats.seeds_to_tell_apart(0.6, 1.0, alpha=0.05, power=power) for power in (0.5, 0.8))
    assert (half, planned) == (13, 24)


def test_seeds_to_tell_apart_grows_with_a_stricter_level_and_a_higher_power_and_refuses_bad_input():
    loose = stats.seeds_to_tell_apart(0.02, 0.04, alpha=0.05)
    strict = stats.seeds_to_tell_apart(0.02, 0.04, alpha=0.05 / 24)
    assert loose < strict < stats.seeds_to_tell_apart(0.02, 0.04, alpha=0.05 / 24, power=0.95)
    assert stats.seeds_to_tell_apart(0.0, 1.0, alpha=0.05) is None
    assert stats.seeds_to_tell_apart(1e-6, 1.0, alpha=0.05, at_most=50) is None
    assert stats.seeds_to_tell_apart(100.0, 1.0, alpha=0.05) == 2
    for kwargs, message in (({"mean": 1.0, "std": 0.0, "alpha": 0.05}, "std positive"),
                            ({"mean": float("nan"), "std": 1.0, "alpha": 0.05}, "mean must be finite"),
                            ({"mean": 1.0, "std": 1.0, "alpha": 1.5}, "alpha must lie"),
                            ({"mean": 1.0, "std": 1.0, "alpha": 0.05, "power": 1.0}, "power must lie")):
        with pytest.raises(ValueError, match=message):
            stats.seeds_to_tell_apart(**kwargs)
    with pytest.raises(ValueError, match="n must be >= 2"):
        stats.paired_t_power(1.0, 1.0, 1, alpha=0.05)


def _in_set(pieces, value):
    return any((low is None or low <= value) and (high is None or value <= high) for low, high in pieces)


def test_fieller_interval_is_where_the_paired_t_test_of_x_minus_r_y_does_not_reject():
    """The float64 spec: at each end of the interval, the paired t-test of ``x_i - r y_i`` against 0 has p = 0.05
    (found here by bisection on :func:`paired_t_p`, not by the quadratic); inside it p > 0.05, outside p < 0.05."""
    rng = random.Random(4)
    for n in (2, 3, 5, 7, 11):
        for _ in range(6):
            y = [rng.gauss(1.0, 0.2) for _ in range(n)]
            x = [rng.uniform(-1, 1) * 0.7 * v + rng.gauss(0, 0.2) for v in y]
            result = stats.fieller_ratio_interval(x, y)
            assert result["ratio"] == pytest.approx(statistics.fmean(x) / statistics.fmean(y), rel=1e-14)
            if not result["bounded"]:
                assert abs(result["denominator_t"]) <= result["t"]
                continue
            low, high = result["ci95"]
            assert result["confidence_set"] == [[low, high]] and low < result["ratio"] < high

            def p_at(r, x=x, y=y):
                return stats.paired_t_p([a - r * b for a, b in zip(x, y)], [0.0] * len(x))

            def edge(inside, outside, p_at=p_at):  # bisection for p = 0.05 between a point inside and one outside
                for _ in range(200):
                    middle = 0.5 * (inside + outside)
                    inside, outside = (middle, outside) if p_at(middle) >= 0.05 else (inside, middle)
                return 0.5 * (inside + outside)

            width = high - low
            assert edge(result["ratio"], low - 10 * width - 10) == pytest.approx(low, rel=1e-9, abs=1e-9)
            assert edge(result["ratio"], high + 10 * width + 10) == pytest.approx(high, rel=1e-9, abs=1e-9)
            assert p_at(low + 0.01 * width) > 0.05 > p_at(low - 0.01 * width)
            assert p_at(high - 0.01 * width) > 0.05 > p_at(high + 0.01 * width)
            assert abs(result["denominator_t"]) > result["t"] == pytest.approx(stats.t_quantile_975(n - 1), abs=1e-6)


def test_fieller_says_when_the_denominator_is_not_clearly_non_zero():
    # the denominators' mean is not told from zero: the 95% set is two rays, never a finite interval
    rays = stats.fieller_ratio_interval([0.5, 0.5, 0.4], [1.0, -0.8, 0.7])
    assert rays["ci95"] is None and rays["bounded"] is False
    (none_low, low), (high, none_high) = rays["confidence_set"]
    assert none_low is None and none_high is None and low < high
    for r in (low - 1.0, low - 1e-6, high + 1e-6, high + 100.0, rays["ratio"]):
        assert _in_set(rays["confidence_set"], r)
        assert stats.paired_t_p([a - r * b for a, b in zip([0.5, 0.5, 0.4], [1.0, -0.8, 0.7])], [0.0] * 3) >= 0.05
    middle = 0.5 * (low + high)
    assert not _in_set(rays["confidence_set"], middle)
    # numerators and denominators both noise around zero, uncorrelated: every ratio is in the set
    everything = stats.fieller_ratio_interval([0.1, -0.1, 0.05, -0.04], [0.02, 0.1, -0.1, 0.05])
    assert everything["confidence_set"] == [[None, None]] and everything["ci95"] is None
    # no spread at all: the interval is the point
    assert stats.fieller_ratio_interval([1.0, 1.0], [4.0, 4.0])["ci95"] == [0.25, 0.25]
    for args, message in ((([1.0, 2.0], [1.0]), "one value per seed"), (([1.0], [1.0]), "at least 2 seeds"),
                          (([1.0, 2.0], [1.0, -1.0]), "average 0"), (([1.0, math.nan], [1.0, 2.0]), "finite")):
        with pytest.raises(ValueError, match=message):
            stats.fieller_ratio_interval(*args)


@pytest.mark.parametrize("n", [3, 5])
def test_fieller_covers_95_percent_at_a_handful_of_seeds_where_the_bootstrap_does_not(n):
    """Simulated studies with a known ratio of means (0.6), correlated normal seeds, a denominator whose mean is
    3 of its standard deviations: Fieller's set holds the true ratio 95% of the time within four binomial standard
    errors; the percentile bootstrap's interval, on the same kind of data, well under 90%."""
    rng = random.Random(n)
    truth, trials = 0.6, 4000

    def study():
        y = [rng.gauss(1.0, 0.33) for _ in range(n)]
        return [truth + 0.5 * (v - 1.0) + rng.gauss(0.0, 0.33) for v in y], y

    covered = sum(_in_set(stats.fieller_ratio_interval(*study())["confidence_set"], truth) for _ in range(trials))
    assert abs(covered / trials - 0.95) < 4 * math.sqrt(0.95 * 0.05 / trials)
    boot_trials = 400
    boot = 0
    for _ in range(boot_trials):
        low, high = stats.ratio_of_means_interval(*study(), n_boot=200, seed=rng.randrange(10 ** 6))["ci95"]
        boot += low <= truth <= high
    assert boot / boot_trials < 0.90


def test_tost_by_hand_and_against_the_90_percent_interval():
    a, b = [2.0, 2.3, 2.1, 2.2], [2.05, 2.2, 2.15, 2.1]
    differences = [x - y for x, y in zip(a, b)]
    mean, std = statistics.fmean(differences), statistics.stdev(differences)
    se = std / 2.0
    result = stats.tost(a, b, margin=0.2)
    assert result["mean"] == pytest.approx(mean) and result["n"] == 4
    assert result["p_lower"] == pytest.approx(1 - stats.student_t_cdf((mean + 0.2) / se, 3), rel=1e-12)
    assert result["p_upper"] == pytest.approx(stats.student_t_cdf((mean - 0.2) / se, 3), rel=1e-12)
    assert result["p"] == max(result["p_lower"], result["p_upper"])
    # equivalent exactly when the 90% interval lies inside the margin; its larger end is the smallest margin
    low, high = result["interval"]
    assert high - mean == pytest.approx(stats.t_quantile(0.95, 3) * se)
    smallest = result["smallest_margin"]
    assert smallest == pytest.approx(max(abs(low), abs(high)))
    assert stats.tost(a, b, margin=smallest * 1.001)["equivalent"] is True
    assert stats.tost(a, b, margin=smallest * 0.999)["equivalent"] is False
    assert stats.tost(a, b, margin=smallest)["p"] == pytest.approx(0.05, rel=1e-9)
    # one-sided tests by brute force: random data, margins on both sides of the interval's edge
    rng = random.Random(5)
    for n in (2, 3, 5, 10):
        for _ in range(20):
            x = [rng.gauss(0.1, 1) for _ in range(n)]
            y = [rng.gauss(0, 1) for _ in range(n)]
            margin = rng.uniform(0.1, 3.0)
            result = stats.tost(x, y, margin=margin)
            inside = -margin < result["interval"][0] and result["interval"][1] < margin
            assert result["equivalent"] is inside
    # no spread: equivalent exactly when the difference lies inside the margin
    assert stats.tost([1.0, 1.0], [0.5, 0.5], margin=0.6)["equivalent"] is True
    assert stats.tost([1.0, 1.0], [0.5, 0.5], margin=0.5)["equivalent"] is False
    for kwargs, message in (({"margin": 0.0}, "margin must be positive"), ({"margin": 1.0, "alpha": 0.5}, "alpha")):
        with pytest.raises(ValueError, match=message):
            stats.tost(a, b, **kwargs)


@pytest.mark.skipif(scipy_stats is None, reason="scipy is not installed")
def test_tost_against_scipys_one_sided_t_tests():
    rng = random.Random(6)
    for n in (3, 5, 10):
        a = [rng.gauss(0.2, 1) for _ in range(n)]
        b = [rng.gauss(0, 1) for _ in range(n)]
        result = stats.tost(a, b, margin=0.8)
        lower = scipy_stats.ttest_1samp([x - y + 0.8 for x, y in zip(a, b)], 0.0, alternative="greater").pvalue
        upper = scipy_stats.ttest_1samp([x - y - 0.8 for x, y in zip(a, b)], 0.0, alternative="less").pvalue
        assert result["p_lower"] == pytest.approx(float(lower), rel=1e-9)
        assert result["p_upper"] == pytest.approx(float(upper), rel=1e-9)


def test_largest_difference_allowed_is_the_far_end_of_the_interval():
    assert stats.largest_difference_allowed([-0.0394, 0.0398]) == 0.0398
    assert stats.largest_difference_allowed([-0.81, 0.3]) == 0.81
    assert stats.largest_difference_allowed((0.1, 0.2)) == 0.2
    for bad in ([0.3, 0.1], [0.1], [0.0, math.inf], None):
        with pytest.raises((ValueError, TypeError)):
            stats.largest_difference_allowed(bad)
