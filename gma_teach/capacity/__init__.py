r"""Chapter 12: what a K-slot memory holds.

GMA's decoding state is a memory of K slots, :math:`\tilde V = (\Gamma^K)^\top V` and :math:`Z = (\Gamma^K)^\top
\mathbf 1` (:func:`gma_teach.mixing.write_memory`), read by :func:`gma_teach.mixing.read_memory`. This module holds
the chapter's exact demo of what such a memory can store, the forgetting variant, and the sentences the chapter
reads off the recall study's table.

* **The exact demo.** :func:`slot_routing` builds hand-made responsibilities that send key ``i`` to slot
  ``slots[i]`` (with an optional ``leak`` spread evenly over every slot, as a soft router would);
  :func:`store_and_recall` writes one-hot values with them and reads them back; :func:`recall_credit` scores each
  read by its arg-max, with ties either shared fairly or counted as failures. :func:`routed_recall` runs the whole
  demo for ``n_pairs`` pairs in ``n_slots`` slots and :func:`capacity_formula` predicts its accuracy exactly.
* **Random routing.** :func:`random_slot_recall` repeats the demo with every key in a random slot (a Monte Carlo
  estimate; Exercise 12.3 derives its expectation).
* **Forgetting.** :func:`decayed_gma` and :func:`decayed_state` are causal GMA with a fixed decay ``lambda`` on both
  :math:`\tilde V` and :math:`Z` (RetNet's recurrence with GMA's normalizer).
* **State bytes.** :func:`measured_state_bytes` builds a causal mixer, decodes ``seq_len`` tokens and returns its
  decoding state's ``nbytes()``.
* **The live run.** :func:`shrink_study` copies a study design with a few sizes replaced; :func:`routing_share`
  measures how a trained model's GMA layer spreads its queries over the components.
* **The guessing floor.** :func:`guessing_floor` is the accuracy of a model that stores nothing but knows the answer
  is one of the ``n`` values in its context: ``1/n`` at each kv count (:func:`mean_guessing_floor` averages it over
  the counts, as the study's metric averages accuracy).
* **The fast-weight capacity test.** Schlag, Irie and Schmidhuber's Setting 1 (``S`` distinct pairs, one
  query, one layer): :func:`fast_weight_data` draws its sequences, :class:`FastWeightModel` is one registered mixer
  with fixed random value embeddings, :func:`train_fast_weight` trains it under their :class:`StoppingRule`,
  :func:`retrieval_scores` scores it by the nearest value embedding, and :func:`fast_weight_seed` runs one arm and
  seed of ``gma_teach.designs.CAPACITY_STUDY`` over its grid of ``S`` (module ``_fast_weight``).
* **The capacity study's curves.** :func:`capacity_curves` reads each arm's record into accuracy and loss against
  ``S`` over its seeds, :func:`slot_predictions` draws the perfect and the random router's predictions for ``K``
  slots, :func:`state_at` sets every arm's accuracy at one ``S`` against its state bytes and
  :func:`published_comparison` sets each arm's loss beside its published counterpart's (module ``_curves``).
* **Their published curves.** :data:`PUBLISHED_CURVES` quotes the evaluation losses that Schlag, Irie and
  Schmidhuber logged in their own runs (:data:`PUBLISHED_MODELS`), and :func:`published_final` reads each run's end
  (module ``_published``).
* **The study's table.** :func:`check_recall_table` validates the table the recall study's records give (format in
  its docstring); :func:`recall_findings` (with its part :func:`forgetting_findings`) and
  :func:`when_to_choose_gma` turn it into sentences, every number computed from the table;
  :func:`uses_default_routing` tells which arms route with GMA's default (collapsing) routing,
  :func:`default_routing_floor` sets those arms beside the guessing floor and :func:`equal_state_points` finds the
  GMA arms that keep exactly linear attention's state.
* **The slots, the stopping and the primary family of a capacity-form study** (module ``_slots_table``):
  :func:`lost_pair_table` splits each GMA arm's lost pairs into collisions, misrouted queries and blur, the mean
  over the seeds that recorded them; :func:`stopping_table` and :func:`format_stopping` give each run's stopping
  reason and steps, :func:`ceiling_count` how many runs of the primary family reached the step ceiling (and how
  many of those were still improving, :data:`IMPROVING_WINDOW`), :func:`study_progress` how many declared runs are
  recorded, and :func:`primary_family` with :func:`format_primary_family` the declared family read from
  ``gma_teach.study.declared_comparisons``, :data:`NOT_YET` where declared seeds are missing; :func:`slot_goal` says
  how far each routing got towards the slot-routing study's declared goal (``gma_teach.designs.SLOT_ROUTING_GOAL``)
  and what remains, and :func:`slot_winner` names the routing its rule picks.
* **The MQAR pilot.** :func:`pilot_curves` reads each arm's validation curve, per kv-pair count and averaged over
  the counts, from the records of ``gma_teach.designs.MQAR_PILOT``; :func:`pilot_learned` says whether each arm
  learned (averaged accuracy above :data:`LEARNED_ABOVE` at any evaluation) and :func:`pilot_sentences` says so in
  words (module ``_pilot``).

The package's modules are private (``_exact``: the demo, random routing and forgetting; ``_table``: state bytes, the
live run, the guessing floor and the table; ``_findings``: the sentences; ``_fast_weight``: the capacity test;
``_pilot``: the MQAR pilot's curves; ``_curves``: the capacity study's curves; ``_published``: their logged curves;
``_slots_table``: the slots, stopping and primary family of a capacity-form study):
every name is imported from ``gma_teach.capacity``. Which arms are forgetting or hybrid arms, what each is compared
with and which mixers' routing can collapse are read from the mixers' registry (:mod:`gma_teach.mixers`).
"""
from ..baselines import MIXERS, make_mixer
from ..mixing import read_memory, write_memory
from ..stats import paired_difference
from . import _curves, _exact, _fast_weight, _pilot, _published, _slots_table, _table
from ._exact import (
    round_robin,
    slot_routing,
    store_and_recall,
    recall_credit,
    recall_accuracy,
    routed_recall,
    capacity_formula,
    recency_horizon,
    random_slot_recall,
    decayed_state,
    decayed_gma,
)
from ._table import (
    measured_state_bytes,
    shrink_study,
    routing_share,
    guessing_floor,
    mean_guessing_floor,
    check_recall_table,
    table_entries,
    gma_size,
    gma_routing,
    uses_default_routing,
    equal_state_points,
    default_routing_floor,
)
from ._findings import recall_findings, forgetting_findings, when_to_choose_gma
from ._pilot import pilot_curves, pilot_learned, pilot_sentences
from ._curves import (
    capacity_curves,
    key_routing_phrase,
    published_comparison,
    routing_curves,
    routing_sentences,
    slot_predictions,
    state_at,
)
from ._published import published_final
from ._slots_table import (
    ceiling_count,
    family_sizes,
    format_primary_family,
    format_stopping,
    lost_pair_table,
    primary_family,
    slot_goal,
    slot_winner,
    stopping_table,
    study_progress,
)
from ._fast_weight import (
    FastWeightBatch,
    FastWeightModel,
    StoppingRule,
    fast_weight_batch,
    fast_weight_data,
    value_embeddings,
    reconstruction_loss,
    nearest_value,
    retrieval_scores,
    train_fast_weight,
    fast_weight_seed,
    routing_sample,
    routing_summary,
    slot_summary,
)

# The documented names, in the book's order (the package-level names imported above, MIXERS, make_mixer,
# read_memory, ..., stay importable from here, as before the module was split).
__all__ = [
    "TIES", "round_robin", "slot_routing", "store_and_recall", "recall_credit", "recall_accuracy", "routed_recall",
    "capacity_formula", "recency_horizon", "random_slot_recall", "decayed_state", "decayed_gma",
    "measured_state_bytes", "shrink_study", "routing_share", "guessing_floor", "mean_guessing_floor",
    "check_recall_table", "table_entries", "gma_size", "gma_routing", "ROUTING_SUFFIXES", "recall_findings",
    "forgetting_findings",
    "uses_default_routing", "equal_state_points", "default_routing_floor", "when_to_choose_gma",
    "FAST_WEIGHT_SIZES", "FastWeightBatch", "FastWeightModel", "StoppingRule", "fast_weight_batch",
    "fast_weight_data", "value_embeddings", "reconstruction_loss", "nearest_value", "retrieval_scores",
    "train_fast_weight", "fast_weight_seed", "ROUTING_SEQUENCES", "routing_sample", "routing_summary",
    "slot_summary",
    "capacity_curves", "routing_curves", "routing_sentences", "key_routing_phrase", "slot_predictions", "state_at",
    "PUBLISHED_COUNTERPARTS", "published_comparison", "PUBLISHED_MODELS", "PUBLISHED_CURVES", "published_final",
    "LEARNED_ABOVE",
    "pilot_curves", "pilot_learned", "pilot_sentences",
    "family_sizes", "lost_pair_table", "stopping_table", "format_stopping", "IMPROVING_WINDOW", "ceiling_count",
    "study_progress", "NOT_YET", "primary_family", "format_primary_family", "slot_goal", "slot_winner",
]

# The package's data, documented here (the page documents a name with the docstring its package gives it).
TIES = _exact.TIES
"""The two ways a tied arg-max is scored. ``"share"`` gives ``1/m`` to a read whose correct value is one of ``m`` tied
maxima (a fair coin's expected score), ``"fail"`` counts any tie as a miss."""

ROUTING_SUFFIXES = _table.ROUTING_SUFFIXES
"""The endings of a GMA arm's name that say its routing is not the default, and what each routing is:
``gma_k{K}_remedy`` runs the balance remedy (:data:`gma_teach.designs.BALANCE_REMEDY`), ``gma_k{K}_var_bal`` the
variance change with the balance loss (:data:`gma_teach.designs.VARIANCE_AND_BALANCE`)."""

ROUTING_SEQUENCES = _fast_weight.ROUTING_SEQUENCES
"""The number of test sequences, the first ones, that :func:`routing_sample` reads for a GMA arm's routing (256)."""

FAST_WEIGHT_SIZES = _fast_weight.FAST_WEIGHT_SIZES
"""The grid of ``S`` (stored pairs) of Schlag, Irie and Schmidhuber's Setting 1: 20, 40, ..., 600."""

PUBLISHED_MODELS = _published.PUBLISHED_MODELS
"""The published runs quoted, by short name (``softmax``, ``linear``, ``favor_m64``, ``favor_m128``,
``favor_m512``), each with the model part of its log files' names in their repository."""

PUBLISHED_CURVES = _published.PUBLISHED_CURVES
"""Their logged evaluation losses, one seed a run, every 100 steps until their stopping rule ended the run, as
``{model: {S: (steps, losses)}}`` (module ``_published`` says where each number comes from)."""

PUBLISHED_COUNTERPARTS = _curves.PUBLISHED_COUNTERPARTS
"""The arms of the capacity study that have a published counterpart of the same kind and feature count. ``sdpa``
goes with their softmax, ``linear`` with their linear attention, ``performer_m128`` (128 positive features) with
their FAVOR at ``m = 64`` (``2m = 128`` features)."""

LEARNED_ABOVE = _pilot.LEARNED_ABOVE
"""The MQAR pilot's criterion, the accuracy an arm must pass to have *learned*, its validation accuracy averaged
over the kv-pair counts above this at any evaluation (far above the guessing floor ``1/n``, 0.073 on average over
8, 16 and 32 pairs)."""

IMPROVING_WINDOW = _slots_table.IMPROVING_WINDOW
"""How many evaluations back a run stopped at the step ceiling is read as still improving (5), its validation loss
at the last evaluation being below its value that many evaluations earlier (500 steps at an evaluation every
100)."""

NOT_YET = _slots_table.NOT_YET
"""The status of a declared comparison whose declared seeds are not all recorded for both arms:
``"not yet recorded"``."""
