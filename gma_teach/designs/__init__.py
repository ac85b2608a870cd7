"""The studies' declared designs: typed :class:`Study` and :class:`Arm`, and every study of Part IV as data.

A *study* is a fixed setting (scale, the sizes it pins, seeds) and its *arms*, each a registered mixer name
(:func:`gma_teach.mixers.registered_names`) with that mixer's options. The designs are data: this module imports
nothing above the core (``layer``), runs nothing and reads no record. The run wing resolves a study once
(:meth:`Study.resolved`) into a frozen run configuration that flows down unchanged to the training loop; the tables
and verdicts read the same object.

Each study declares, beside its arms and seeds:

* ``metric`` -- the metric its comparisons pair (a key of :data:`METRICS`), or ``metrics`` when its claims concern
  more than one;
* ``primary`` -- the primary comparisons, ``(arm, against)`` pairs: the family that "told apart" speaks of;
* ``test`` -- the test each gets: the paired t-test over the declared ``seeds``, two-sided, its p-values
  Holm-adjusted over the whole primary family at :data:`ALPHA`;
* ``exploratory`` -- what was added after seeing data (seeds given later, tests chosen later), which the tables,
  chapters and README label exploratory.

The recall study (:data:`RECALL_STUDY`) was declared before it ran. The collapse, LM, ListOps-LRA and Text studies
ran before designs were declared here; their ``primary`` family is the set of comparisons their chapters and
README make claims about, fixed before the correction was applied, and everything else is exploratory.

A :class:`Study` and an :class:`Arm` also read as the mappings they replace (``study["seeds"]``,
``arm.get("options")``), so that code written against the earlier dict designs keeps working.
"""
from __future__ import annotations

from ._studies import (
    CAUSE_STUDY,
    COLLAPSE_STUDY,
    INIT_SCAN,
    LISTOPS_LRA_STUDY,
    LM_SETTING,
    LM_STUDY,
    PERFORMER_RERUN,
    RECALL_GMA_SIZES,
    RECALL_STUDY,
    RECALL_WINDOW,
    REMEDY,
    STUDIES,
    TEXT_STUDY,
)
from ._types import (
    ALPHA,
    EXPERIMENTS,
    KMEANS_BLOCKS,
    METRICS,
    PREPARATIONS,
    Arm,
    MetricFacts,
    Study,
    as_study,
    metric_facts,
    thawed,
)

__all__ = ["ALPHA", "Arm", "CAUSE_STUDY", "COLLAPSE_STUDY", "EXPERIMENTS", "INIT_SCAN", "KMEANS_BLOCKS",
           "LISTOPS_LRA_STUDY", "LM_SETTING", "LM_STUDY", "METRICS", "MetricFacts", "PERFORMER_RERUN", "PREPARATIONS",
           "RECALL_GMA_SIZES", "RECALL_STUDY", "RECALL_WINDOW", "REMEDY", "STUDIES", "Study", "TEXT_STUDY",
           "as_study", "metric_facts", "thawed"]
