"""The recall model (chapter 12 and the recall study): one training run of the recall study's two-block model, the
MQAR data it trains on, chapter 12's live runs and demos, and the ``"recall"`` entry, which reads the study's
declared design (:func:`declared_design`) instead of keeping a copy of it. Every function here takes the design it
costs as an argument: a mapping with the study's keys (``design["seq_len"]``, ``design["arms"]``, ...), whether the
declared study, a record's ``"design"`` or chapter 12's live sizes.
"""
from __future__ import annotations

from .. import designs, mixers
from ..layer import DEFAULT_COMPONENTS
from ._devices import CPU_CACHE_BYTES, FLOAT32, PROFILES
from ._work import Point, Work, block_cost, block_sizes, mixer_flops, mixer_peak_values, point_seconds

MQAR_SECONDS_PER_TOKEN = 2e-7  # gma_teach.tasks.mqar on one core: 0.24 s for the study's 21,500 examples of 64 tokens
CONV_BLOCK_FLOPS_PER_TOKEN_WIDTH = 2 * 3 + 1  # the short convolution's three taps and its gate (projections apart)
CONV_BLOCK_OPS = 20  # pad, two projections, the depthwise convolution, the gate: forward + backward
LOGIT_PASSES = 6  # the output product writes the logits, log-softmax reads and writes them, the loss reads them,
# the backward writes their gradient and the two weight and input products read it (each a pass over memory)
OPTIMIZER_OPS_PER_TENSOR = 15  # AdamW's per-tensor loop on a CPU, the gradient clipping and zeroing


def recall_run_work(*, seq_len: int, vocab_size: int, kv_pairs, batch_size: int, n_steps: int, d_model: int,
                    n_heads: int, mixer: str,
                    n_components: int = DEFAULT_COMPONENTS, n_features: int = 64, n_eval_examples: int = 0,
                    n_parameter_tensors: int = 24, n_layers: int = 1) -> Work:
    """One training run of the recall model (:func:`gma_teach.study.build_model`): blocks without an FFN, a short
    convolution then ``mixer``, ``n_layers`` times, logits only at the queries (an example at ``n`` kv pairs has
    ``n``).

    FLOPs: the six ``D x D`` projections (two in the convolution block, four around the mixer) on every token, the
    mixer's causal core (its :class:`~gma_teach.mixers.BlockCost` with ``causal_flops``), the output layer at the
    queries; three times that for a
    training step, once for each of the ``n_eval_examples``. Bytes: the activations' passes when they outgrow
    :data:`CPU_CACHE_BYTES`, none when they stay in the caches, and likewise ``LOGIT_PASSES`` passes over the
    logits at the queries (``B x queries x vocabulary``). Ops: both blocks' forward + backward, the optimizer
    over ``n_parameter_tensors`` tensors, 60 for the batch, the loss and the step. Peak: the model, its gradients
    and AdamW's moments, and the activations of a batch."""
    queries = sum(kv_pairs) / len(kv_pairs)
    sizes = dict(n_components=n_components, n_features=n_features, linformer_k=64)
    tokens = batch_size * seq_len
    per_batch = (n_layers * (tokens * (12 * d_model**2 + CONV_BLOCK_FLOPS_PER_TOKEN_WIDTH * d_model)
                             + mixer_flops(mixer, batch_size, seq_len, d_model, n_heads, causal=True, **sizes))
                 + batch_size * queries * 2 * d_model * vocab_size)
    mixer_values = mixer_peak_values(mixer, batch_size, seq_len, d_model, n_heads, **sizes)
    activations = n_layers * FLOAT32 * (mixer_values + 16 * tokens * d_model)  # + the convolutions, norms, residuals
    extra = block_cost(mixer).extra_peak_values(block_sizes(batch_size, seq_len, d_model, n_heads, **sizes))
    largest = FLOAT32 * max(tokens * d_model, extra / 2)  # extra: two or more tensors (softmax 2, GMA 3.2)
    streamed = 0.0 if largest <= CPU_CACHE_BYTES else 3 * activations
    logits = FLOAT32 * batch_size * queries * vocab_size  # the output layer's, at the queries
    streamed += 0.0 if logits <= CPU_CACHE_BYTES else LOGIT_PASSES * logits
    eval_batches = n_eval_examples / batch_size
    ops_per_step = n_layers * ((block_cost(mixer).ops + 30) + (CONV_BLOCK_OPS + 30)) \
        + OPTIMIZER_OPS_PER_TENSOR * n_parameter_tensors * n_layers + 60
    parameters = 6 * n_layers * d_model**2 + d_model * (vocab_size + seq_len)
    return Work(per_batch * (3 * n_steps + eval_batches), streamed * (n_steps + eval_batches / 3),
                ops_per_step * n_steps + 60 * eval_batches, 16 * parameters + activations)


def recall_run_point(design, arm, width: int, *, evaluate: bool) -> Point:
    """One run of the recall model: ``design`` holds a study's sizes (a mapping: the declared study, a record's
    ``"design"``, chapter 12's live sizes), ``arm`` its mixer and options (``{"mixer", "options", "n_heads"}``)."""
    options = arm.get("options") or {}
    curve = design["steps"] // design["eval_every"] * design["n_val"] if design.get("eval_every") else 0
    work = recall_run_work(seq_len=design["seq_len"], vocab_size=design["vocab_size"], kv_pairs=design["kv_pairs"],
                           batch_size=design["batch_size"], n_steps=design["steps"], d_model=width,
                           n_heads=arm.get("n_heads", design["n_heads"]), mixer=arm["mixer"],
                           n_components=options.get("n_components", DEFAULT_COMPONENTS),
                           n_features=options.get("n_features", 64),
                           n_eval_examples=design["n_val"] + design["n_test"] + curve if evaluate else 0,
                           n_layers=design.get("n_layers", 1))
    label = f"recall {arm['mixer']}" + "".join(f" {key}={value}" for key, value in options.items()) + f" d={width}"
    return Point(label, work, single_thread=True)  # the study and chapter 12 train on one CPU thread


def mqar_point(design) -> Point:
    """Generating the MQAR splits of ``design`` (its train, validation and test examples), on the host."""
    examples = design["n_train"] + design["n_val"] + design["n_test"]
    return Point("generate the MQAR splits", Work(seconds=examples * design["seq_len"] * MQAR_SECONDS_PER_TOKEN),
                 on="host")


def declared_design():
    """The recall study's design as declared, ``gma_teach.designs.RECALL_STUDY``: read at each call, so the cost
    always follows the design as it stands."""
    return designs.RECALL_STUDY


def predicted_arm(design) -> tuple:
    """``(arm, width)``: the run of ``design`` that the ``"recall"`` entry predicts, its largest GMA arm (the most
    components; the first declared of a tie) at its first width."""
    gma_arms = [arm for arm in design["arms"].values() if arm["mixer"] == "gma"]
    if not gma_arms:
        raise ValueError(f"the recall study's design has no GMA arm; its arms: {sorted(design['arms'])}")
    largest = max(gma_arms, key=lambda arm: (arm.get("options") or {}).get("n_components", DEFAULT_COMPONENTS))
    return largest, design["widths"][0]


def study_points(design) -> list[Point]:
    """One run of the recall study ``design`` (one arm, seed and learning rate: :func:`predicted_arm`), its training
    and its evaluation, after generating its MQAR splits."""
    arm, width = predicted_arm(design)
    return [mqar_point(design), recall_run_point(design, arm, width, evaluate=True)]


def study_seconds(design, device_profile: str) -> float:
    """The predicted seconds of every run a recall study ``design`` declares on the named device profile: each arm
    at each width, its first seed at every swept learning rate and its other seeds at the kept one, one run after
    another (each on one thread on a CPU), plus generating the data once (a mixer the cost model has not fitted
    is costed as the mixer its registry entry names, :attr:`MixerEntry.costed_as
    <gma_teach.mixers.MixerEntry.costed_as>`). What a design states as its cost."""
    device = PROFILES[device_profile]
    runs_per_arm = len(design["learning_rates"]) + len(design["seeds"]) - 1
    total = point_seconds(mqar_point(design), device)
    for width in design["widths"]:
        for arm in design["arms"].values():
            costed = {"mixer": mixers.entry(arm["mixer"]).costed_as or arm["mixer"],
                      "options": arm.get("options") or {},
                      **({"n_heads": arm["n_heads"]} if arm.get("n_heads") else {})}
            total += runs_per_arm * point_seconds(recall_run_point(design, costed, width, evaluate=True), device)
    return total


def recall(p, on_cuda):
    """The ``"recall"`` entry: one run of the declared recall study (:func:`study_points`). The study has one
    declared setting, not a preset per scale, so every scale predicts the same run (``p`` is ``None``)."""
    return study_points(declared_design())


RECALL_DEMO_OPS = 30  # one float64 store-and-recall of chapter 12's exact demo (routing, write, read, scoring)


def ch12(p, on_cuda):
    """Chapter 12: the exact demos and the Monte Carlo in float64, the state-byte table (each mixer decodes its
    tokens one step at a time), then the live MQAR run: SDPA and GMA K=``live_gma_k`` at ``live_width`` on the
    recall study's model, shrunk to ``live`` (one head, one thread on a CPU); the study's records are only read."""
    k = p.n_slots
    pairs = range(1, p.max_pairs + 1)
    curves = (2 + 2 + 2 * len(p.decays)) * len(pairs)  # two scorings, demo and formula, and each decay's curve
    demo = Work(sum(4 * n * n * k for n in pairs) * (2 + len(p.decays)), 0, curves * RECALL_DEMO_OPS)
    carlo = sum((Work(4 * p.mc_trials * n * n * k, 8 * 4 * p.mc_trials * n * k, RECALL_DEMO_OPS)
                for n in (k // 2, k, 2 * k)), Work())
    horizon = Work(sum(4 * s**3 for s in p.horizon_slots) * len(p.decays), 0,
                   sum(5 * s for s in p.horizon_slots) * len(p.decays))  # decayed writes: one step a key
    decoded = 2 * len(p.state_seq_lens) * p.state_seq_lens[-1] + 12 * p.state_seq_lens[0]  # steps of the table
    states = Work(decoded * 4 * p.state_width**2, 0, decoded * 20)
    points = [Point("exact demos and the Monte Carlo", demo + carlo + horizon, on="host"),
              Point("state-byte table", states, on="host")]
    live = dict(p.live, n_heads=1)  # the recall study's one head
    points.append(mqar_point(live))
    for arm in ({"mixer": "sdpa"}, {"mixer": "gma", "options": {"n_components": p.live_gma_k}}):
        points.append(recall_run_point(live, arm, p.live_width, evaluate=True))
    return points
