"""Every summary and interval the studies, tables and figures report, each with one contract.

* :func:`mean_std` -- ``(mean, std)``; :func:`describe` -- ``{"mean", "std", "n"}``;
* :func:`mean_interval` -- ``{"mean", "std", "n", "ci95"}``, the 95% Student-t interval of a mean;
  :func:`mean_half_width` -- ``(mean, half width of that interval)``, what an error bar needs;
* :func:`paired_difference` -- per-seed differences of two arms with their 95% t-interval;
  :func:`paired_t_p` -- the two-sided p-value of the paired t-test on the same differences;
* :func:`fisher_exact_p` -- two-sided p-value of Fisher's exact test on two counts;
* :func:`holm` -- Holm-Bonferroni adjusted p-values for a family of tests;
* :func:`fieller_ratio_interval` -- a ratio of two means paired by seed, with Fieller's 95% confidence set (exact
  coverage for normal seeds, t on n - 1 degrees of freedom; unbounded where the denominator is not clearly non-zero);
  :func:`ratio_of_means_interval` -- the same ratio with a percentile bootstrap, which under-covers at a handful of
  seeds (kept to show why);
* :func:`tost` -- two one-sided paired t-tests: are two arms within a declared margin of each other?
  :func:`largest_difference_allowed` -- the largest difference, either way, that an interval leaves open;
* :func:`optional_stopping_rate` -- how often seeds added after a first look make noise look like a difference;
* :func:`paired_t_power` -- the power of the paired t-test (noncentral t); :func:`seeds_to_tell_apart` -- how many
  seeds a paired difference of a given mean and spread would need, at a stated power (80% unless told);
* :func:`t_quantile_975`, :func:`t_quantile`, :func:`student_t_cdf` -- Student's t distribution.

Standard library only (scipy is not a dependency): the t distribution's CDF is the regularized incomplete beta
function, evaluated by its continued fraction; the noncentral t is an integral over the chi distribution of the
spread, by Simpson's rule.

Its parts, each a private module with one job: ``_values`` (the inputs, checked once), ``_distributions`` (Student's
t), ``_intervals`` (summaries and intervals), ``_tests`` (the tests and Holm's correction), ``_ratios`` (a ratio of
two means with its interval) and ``_power`` (optional stopping, power, seeds to plan). A leaf: it imports nothing of
the package but ``gma_teach._checks``.
"""
from __future__ import annotations

from ._distributions import student_t_cdf, t_quantile, t_quantile_975
from ._intervals import (describe, half_width, largest_difference_allowed, mean_half_width, mean_interval, mean_std,
                         paired_difference)
from ._power import optional_stopping_rate, paired_t_power, seeds_to_tell_apart
from ._ratios import fieller_ratio_interval, ratio_of_means_interval
from ._tests import fisher_exact_p, holm, paired_t_p, tost

__all__ = ["describe", "fieller_ratio_interval", "fisher_exact_p", "half_width", "holm", "largest_difference_allowed",
           "mean_half_width", "mean_interval", "mean_std", "paired_difference", "optional_stopping_rate",
           "paired_t_p", "paired_t_power", "ratio_of_means_interval", "seeds_to_tell_apart", "student_t_cdf",
           "t_quantile", "t_quantile_975", "tost"]
