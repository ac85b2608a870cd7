"""The studies of Part IV: ``python -m gma_teach.study ...`` and the names the chapters read.

Every study is a :class:`gma_teach.designs.Study` (the designs are data, in :mod:`gma_teach.designs`), run by one
runner (:func:`run_arm`), one training loop (:func:`gma_teach.train.fit`) and one path to its tables and verdicts
(:func:`declared_comparisons`, at :data:`gma_teach.designs.ALPHA`). This module is the one public path to the
run wing's study names; the code lives in ``gma_teach.runs``, split by job: ``arm`` (the runner), ``arm_records``
(where an arm's record lives, reading and summarizing it), ``study_values`` (a metric's values by seed),
``tables`` (the per-study tables), ``verdicts`` (the declared comparisons and what they found), ``analyses``
(the exploratory analyses), ``recall`` and ``recall_tables`` (chapter 12's recall study: its data, model and
table), ``synthesis`` (Part IV at a glance), ``speed``, ``init_scan`` and ``study_cli`` (the command line, whose
help describes the studies). The statistics are :mod:`gma_teach.stats`.

The designs and statistics this module once passed on under second names (``study.LM_STUDY``, ``study.holm``, ...)
still import, with a ``DeprecationWarning`` naming their one path (:mod:`gma_teach.designs`,
:mod:`gma_teach.stats`) and the date they go.
"""
from __future__ import annotations

from ._aliases import deprecated_getattr
from .runs.analyses import context_recovered, gma_against_baselines, left_plateau, seeds_needed
from .runs.arm import SEED_TRAINERS, RunConfig, planned_runs, resolve, run_arm, study_data, train_seed
from .runs.arm_records import (
    CURVES,
    chosen_lr,
    final_health,
    health_curve,
    load_arm,
    load_speed,
    merged_record,
    read_record,
    record_path,
    record_setting,
    record_spec,
    recorded_under,
    speed_path,
    summarize_arm,
    tables_path,
)
from .runs.baseline_checks import baseline_check_sentences, baseline_checks
from .runs.chapter_runs import run_classification, run_lm, train_run
from .runs.classification import listops_data, text_data
from .runs.fan_out import submit_study
from .runs.init_scan import scan_initial_routing
from .runs.language_model import lm_data
from .runs.recall import accuracy_by_count, build_model, recall_data, split, state_bytes
from .runs.recall_tables import exploratory_comparison, format_recall_table, recall_table
from .runs.speed import measure_training_speed
from .runs.study_cli import main
from .runs.study_values import METRIC_PATHS, declared_metrics, kept_runs, metric_by_seed
from .runs.synthesis import (
    PROFILING_RECORD,
    STUDY_CHAPTERS,
    VERDICTS,
    WHAT,
    format_claims,
    format_glance,
    format_synthesis,
    gma_claims,
    part_iv_synthesis,
    standing_family,
    standing_of,
    tuning_claims,
    verdict_of,
    what_gma_is_for,
)
from .runs.tables import format_study_table, ordering_at_last_evaluations, study_table, study_tables
from .runs.verdicts import (
    declared_comparisons,
    findings_summary,
    follow_on_choice,
    format_declared,
    rests_on_looks,
    selected_arm,
    study_findings,
    study_selection,
)

__all__ = ["merged_record", "planned_runs", "read_record", "submit_study",
           "CURVES", "METRIC_PATHS", "PROFILING_RECORD", "RunConfig", "SEED_TRAINERS", "STUDY_CHAPTERS", "VERDICTS",
           "WHAT", "accuracy_by_count", "baseline_check_sentences", "baseline_checks", "build_model", "chosen_lr",
           "context_recovered", "declared_comparisons",
           "declared_metrics", "exploratory_comparison", "final_health", "findings_summary", "follow_on_choice",
           "format_claims",
           "format_declared", "format_recall_table", "format_study_table", "format_synthesis", "gma_against_baselines",
           "gma_claims", "health_curve", "kept_runs", "left_plateau", "listops_data", "lm_data", "load_arm",
           "load_speed", "main", "measure_training_speed", "metric_by_seed", "ordering_at_last_evaluations",
           "part_iv_synthesis", "recall_data", "recall_table", "record_path", "record_setting", "record_spec",
           "recorded_under", "resolve",
           "rests_on_looks", "run_arm", "run_classification", "run_lm", "scan_initial_routing", "seeds_needed",
           "selected_arm", "speed_path", "split", "standing_family", "standing_of", "state_bytes", "study_data",
           "study_findings", "study_selection", "study_table", "study_tables", "summarize_arm", "tables_path",
           "text_data", "train_run", "train_seed", "tuning_claims", "verdict_of", "what_gma_is_for",
           "format_glance"]

__getattr__ = deprecated_getattr(__name__, {
    **{name: "gma_teach.designs" for name in ("CAUSE_STUDY", "COLLAPSE_STUDY", "INIT_SCAN", "KMEANS_BLOCKS",
                                              "LISTOPS_LRA_STUDY", "LM_SETTING", "LM_STUDY", "PREPARATIONS",
                                              "RECALL_STUDY", "REMEDY", "STUDIES", "TEXT_STUDY")},
    **{name: "gma_teach.stats" for name in ("fisher_exact_p", "holm", "mean_interval", "paired_difference",
                                            "paired_t_p", "ratio_of_means_interval", "t_quantile_975")},
})


if __name__ == "__main__":
    main()
