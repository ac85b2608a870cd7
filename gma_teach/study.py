"""The recorded studies of Part IV: ``python -m gma_teach.study ...`` and the names the chapters read.

The code lives in the run wing, split by job: ``gma_teach.runs.settings`` (the declared designs),
``gma_teach.runs.arm`` (running an arm), ``gma_teach.runs.arm_records`` (reading an arm's record),
``gma_teach.runs.study_values`` (a metric's values by seed), ``gma_teach.runs.tables`` (the per-study tables),
``gma_teach.runs.verdicts`` (the declared comparisons and what they found), ``gma_teach.runs.analyses`` (the
exploratory analyses), ``gma_teach.runs.speed``, ``gma_teach.runs.init_scan`` and ``gma_teach.runs.study_cli``
(the command line, whose help describes the studies); the statistics are :mod:`gma_teach.stats`. This module keeps
the command and the names at the path the book and the records use.
"""
from __future__ import annotations

from .runs.analyses import context_recovered, gma_against_baselines, left_plateau, seeds_needed
from .runs.arm import run_arm, study_data
from .runs.arm_records import (
    CURVES,
    final_health,
    health_curve,
    load_arm,
    load_speed,
    record_path,
    recorded_under,
    speed_path,
    summarize_arm,
    tables_path,
)
from .runs.classification import listops_data, run_classification, text_data
from .runs.init_scan import scan_initial_routing
from .runs.language_model import lm_data, run_lm
from .runs.settings import (
    CAUSE_STUDY,
    COLLAPSE_STUDY,
    INIT_SCAN,
    KMEANS_BLOCKS,
    LISTOPS_LRA_STUDY,
    LM_SETTING,
    LM_STUDY,
    PREPARATIONS,
    REMEDY,
    STUDIES,
    TEXT_STUDY,
)
from .runs.speed import measure_training_speed
from .runs.study_cli import main
from .runs.study_values import METRIC_PATHS, declared_metrics, metric_by_seed
from .runs.tables import format_study_table, ordering_at_last_evaluations, study_table, study_tables
from .runs.verdicts import declared_comparisons, findings_summary, format_declared, study_findings
from .stats import (
    fisher_exact_p,
    holm,
    mean_interval,
    paired_difference,
    paired_t_p,
    ratio_of_means_interval,
    t_quantile_975,
)

__all__ = ["CAUSE_STUDY", "COLLAPSE_STUDY", "CURVES", "INIT_SCAN", "KMEANS_BLOCKS", "LISTOPS_LRA_STUDY", "LM_SETTING",
           "LM_STUDY", "METRIC_PATHS", "PREPARATIONS", "REMEDY", "STUDIES", "TEXT_STUDY", "context_recovered",
           "declared_comparisons", "declared_metrics", "final_health", "findings_summary", "fisher_exact_p",
           "format_declared", "format_study_table", "gma_against_baselines", "health_curve", "holm", "left_plateau",
           "listops_data", "lm_data", "load_arm", "load_speed", "main", "mean_interval", "measure_training_speed",
           "metric_by_seed", "ordering_at_last_evaluations", "paired_difference", "paired_t_p",
           "ratio_of_means_interval", "record_path", "recorded_under", "run_arm", "run_classification", "run_lm",
           "scan_initial_routing", "seeds_needed", "speed_path", "study_data", "study_findings", "study_table",
           "study_tables", "summarize_arm", "t_quantile_975", "tables_path", "text_data"]


if __name__ == "__main__":
    main()
