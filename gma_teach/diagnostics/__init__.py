"""Reading the routing: what a trained GMA layer's responsibilities say about the tokens (chapter 11).

A GMA layer routes every query token ``t`` through a probability vector over ``K`` components. Averaging it over
the ``H`` heads gives one row :math:`\\bar\\gamma_t \\in \\Delta^{K-1}` per token, and the paper's Table 4 reads
these rows two ways:

* **softly**, as distributions: how broadly the components are used (usage entropy), how spread each token's
  routing is (token entropy, mean maximum responsibility);
* **hardly**, through the assignment :math:`z_t = \\arg\\max_k \\bar\\gamma_{t,k}`, compared with a surface-form
  category :math:`c_t` of the token (:func:`token_categories`): purity, mutual information, normalized MI.

:func:`capture_responsibilities` collects the query responsibilities from any model that contains GMA layers
without changing the model; :func:`routing_metrics` computes Table 4 from them; :func:`permutation_baseline` says
what the hard-assignment numbers would be if components and categories were unrelated.

Before any of these, :func:`routing_information` asks whether the routing carries information at all: the mutual
information between a token and its component, which is near 0 both when the routing *collapses* (every token to the
same few components) and when it *dissolves* (every token spread evenly over all K); :func:`shuffled_information` is
its baseline and :func:`routing_state` names the router.

A slot memory is read by its slots (chapter 12), per head from hard assignments: :func:`slot_occupancy` counts the
slots that hold exactly one key of a sequence and the keys that collide, :func:`slot_agreement` the share of keys
whose query lands in the key's slot, :func:`predicted_pairs` the pairs these predict the memory returns, and
:func:`lost_pair_split` splits a measured number of lost pairs into collisions, misrouted queries and blur.

Apart from routing, :func:`favor_approximation_error` measures how far Performer's FAVOR+ weights are from the
softmax weights they estimate on given queries and keys, :func:`performer_approximation_error` on a Performer's
own projections of an input, and :func:`model_favor_errors` on every Performer layer of a model: whether a
Performer that learns nothing reads noise.

The package, one module per job: ``diagnostics.information`` (the information a router carries),
``diagnostics.categories`` (surface categories of tokens),
``diagnostics.capture`` (responsibilities out of a model), ``diagnostics.metrics``
(Table 4, its permutation baseline, summaries, PCA), ``diagnostics.heads`` (the same read head by head, from
each head's hard assignment), ``diagnostics.knowledge`` (what the assignment knows about token identity and
category against usage-matched hashes; bands along a sequence), ``diagnostics.choice`` (what each arm of a
recorded routing study costs in bits per byte), ``diagnostics.health`` (information, usage
entropy and logit spread while a model trains), ``diagnostics.slots`` (a slot memory's occupancy, agreement and
lost pairs) and the private ``diagnostics._kernel_error`` (FAVOR+ against
softmax). Every public name is importable from ``gma_teach.diagnostics``.
"""
from ._kernel_error import favor_approximation_error, model_favor_errors, performer_approximation_error
from .capture import (
    capture_responsibilities,
    gma_layers,
    head_averaged_tokens,
    lm_routing,
)
from .categories import CATEGORIES, EOS_STRINGS, token_categories, token_category
from .choice import arm_costs, layer_information
from .heads import (
    HARD_SCORES,
    head_assignments,
    head_component_summary,
    head_permutation_baseline,
    head_rows,
    head_routing_metrics,
    head_routing_report,
    tied_share,
)
from .health import (
    HEALTH_METRICS,
    head_health,
    logit_term_spreads,
    routing_health,
    routing_logit_terms,
    summarize_health,
)
from .information import (
    MIN_SHARE,
    ROUTING_STATES,
    information_from_log,
    information_report,
    routing_information,
    routing_state,
    shuffled_information,
)
from .knowledge import (
    band_report,
    identity_information,
    mean_run_length,
    mutual_information_bits,
    usage_matched_hash,
)
from .metrics import (
    PAPER_TABLE4,
    as_labels,
    as_responsibilities,
    checked_responsibilities,
    component_summary,
    contingency_table,
    encode_labels,
    hard_assignments,
    hard_scores,
    joint_counts,
    permutation_baseline,
    responsibility_pca,
    routing_metrics,
    routing_report,
    separation,
)
from .slots import (
    LostPairSplit,
    PredictedPairs,
    SlotOccupancy,
    lost_pair_split,
    predicted_pairs,
    slot_agreement,
    slot_occupancy,
    slot_report,
)

__all__ = [
    "CATEGORIES", "EOS_STRINGS", "HEALTH_METRICS", "MIN_SHARE", "PAPER_TABLE4", "ROUTING_STATES", "as_labels",
    "as_responsibilities", "checked_responsibilities", "information_from_log", "information_report",
    "routing_information", "routing_state", "shuffled_information",
    "capture_responsibilities", "component_summary", "contingency_table", "gma_layers", "hard_assignments",
    "head_averaged_tokens", "head_health", "lm_routing", "logit_term_spreads", "permutation_baseline",
    "responsibility_pca", "routing_health", "routing_logit_terms", "routing_metrics", "routing_report", "separation",
    "summarize_health", "token_categories", "token_category",
    "favor_approximation_error", "model_favor_errors", "performer_approximation_error",
    "LostPairSplit", "PredictedPairs", "SlotOccupancy", "lost_pair_split", "predicted_pairs", "slot_agreement",
    "slot_occupancy", "slot_report",
    "HARD_SCORES", "arm_costs", "band_report", "encode_labels", "hard_scores", "head_assignments",
    "head_component_summary", "head_permutation_baseline", "head_rows", "head_routing_metrics",
    "head_routing_report", "identity_information", "joint_counts", "layer_information", "mean_run_length",
    "mutual_information_bits", "tied_share", "usage_matched_hash",
]
