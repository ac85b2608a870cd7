"""The recall study of chapter 12: multi-query associative recall (MQAR) against the size of each mixer's state.

The design is declared before any recorded run, in :data:`gma_teach.designs.RECALL_STUDY`; its vocabulary,
steps, learning rates, position-embedding scale and the convolution under every mixer were chosen after pilot runs
that are not in the records:

* **Task.** :func:`gma_teach.tasks.mqar` at one sequence length; every model trains on an equal mixture of the
  study's kv-pair counts and is tested on each count separately (Zoology's protocol). Train, validation and test
  examples come from different seeds.
* **Model.** A two-block causal decoder of pre-norm :class:`gma_teach.models.Block` s without FFNs: the first
  block's mixer is a short convolution (:class:`gma_teach.convolution.ShortConvolution`), the second's is the mixer
  under study (one mixer layer; one head, where the hybrid splits two: one window head, one GMA head), scored only
  at the query positions (:meth:`gma_teach.models.DecoderLM.logits_at`). This is the layout Zoology's code gives
  its two-layer attention, Based and sliding-window models in the Based paper's MQAR sweep (a BaseConv layer, then
  the mixer, no MLP); its Mamba models there are two Mamba layers instead, while here Mamba too sits on the
  convolution.
* **Learning rate.** Every arm and width trains seed 0 at each rate of ``learning_rates``; the rate with the best
  mean *validation* accuracy is kept, and the other seeds train at it. The test split never chooses anything.
* **Metric.** Test accuracy over the queries of each kv-pair count, and the decoding state's bytes after
  ``seq_len`` tokens (batch 1, both blocks: the mixer's own state plus the convolution's ``2 d_model`` numbers,
  512 bytes at width 64).
* **Primary comparisons.** Each GMA arm against linear attention and against SDPA, on the mean test accuracy over
  the kv counts, paired on seeds; the family is corrected by Holm's method. Anything else is exploratory.

The study runs through the runner of every study (:func:`gma_teach.study.run_arm`):
``python -m gma_teach.study recall --arms sdpa linear --widths 64`` trains what is missing and saves each arm's
record (``recall_study_<arm>_d<width>.json``) after every run. This module holds what is the recall study's own:
its data, its model, the training of one seed (through :func:`gma_teach.train.fit`, ``task="queries"``) and the
scoring per kv-pair count.
"""
from __future__ import annotations

import time
from collections import ChainMap
from collections.abc import Mapping
from types import SimpleNamespace

import torch

from ..baselines import mixer_state_bytes
from ..designs import Arm
from ..environment import seed_everything
from ..models import DecoderLM
from ..tasks import IGNORE_INDEX, MQARData, mqar
from ..train import fit
from .options import arm_options

__all__ = ["accuracy_by_count", "build_model", "recall_data", "recall_seed", "split", "state_bytes"]


def split(study: Mapping, name: str) -> MQARData:
    """The ``train``, ``val`` or ``test`` split: an equal share of examples at each kv-pair count, interleaved."""
    sizes = {"train": study["n_train"], "val": study["n_val"], "test": study["n_test"]}
    if name not in sizes:
        raise ValueError(f"name must be 'train', 'val' or 'test', got {name!r}")
    counts = study["kv_pairs"]
    per_count = max(1, sizes[name] // len(counts))
    parts = [mqar(per_count, study["seq_len"], n, vocab_size=study["vocab_size"],
                  seed=study["data_seeds"][name] + n) for n in counts]
    inputs = torch.stack([p.inputs for p in parts], dim=1).flatten(0, 1)
    labels = torch.stack([p.labels for p in parts], dim=1).flatten(0, 1)
    return MQARData(inputs, labels, study["vocab_size"], max(counts))


def recall_data(study: Mapping) -> dict:
    """The three splits of ``study``, ``{"train", "val", "test"}`` (each a :class:`gma_teach.tasks.MQARData`)."""
    return {name: split(study, name) for name in ("train", "val", "test")}


def _model(sizes, arm: Arm, width: int, options: dict | None = None, arm_name: str | None = None) -> DecoderLM:
    """The recall model of ``arm``: its mixer built with ``options`` (resolved once by the runner), or with the
    arm's options resolved here (:func:`gma_teach.runs.options.arm_options`) for a chapter's live run."""
    n_heads = arm.n_heads or sizes["n_heads"]
    if options is None:
        options = arm_options(ChainMap({"n_heads": n_heads, "d_model": width}, sizes), arm, arm_name)
    n_layers = sizes.get("n_layers", 1)  # pairs of blocks: a short convolution, then the mixer
    model = DecoderLM(sizes["vocab_size"], width, 2 * n_layers, n_heads, mixer=["conv", arm.mixer] * n_layers, d_ff=0,
                      max_seq_len=sizes["seq_len"], mixer_options=[{}, dict(options)] * n_layers)
    torch.nn.init.normal_(model.positions.weight, std=0.02)
    return model


def build_model(study: Mapping, arm: str, width: int) -> DecoderLM:
    """The study's causal decoder of width ``width``: blocks without FFNs, a short convolution
    (:class:`gma_teach.convolution.ShortConvolution`) then ``arm``'s mixer, ``n_layers`` times (the setting's;
    one mixer layer when it names none, as the first recall study).

    The position embeddings start at standard deviation 0.02 like the tokens' (GPT-2's initialization; the
    language model's default of 1 drowns the tokens and stalls recall)."""
    if arm not in study["arms"]:
        raise ValueError(f"arm must be one of {sorted(study['arms'])}, got {arm!r}")
    return _model(study, Arm.from_spec(study["arms"][arm]), width, arm_name=arm)


@torch.no_grad()
def _hits_by_count(model: DecoderLM, data: MQARData, batch_size: int) -> tuple[dict, dict]:
    """``({n_pairs: right answers}, {n_pairs: queries})`` of ``model`` on ``data`` (a query's count is its
    example's); the model is left in training mode."""
    model.eval()
    right, total = {}, {}
    for start in range(0, len(data), batch_size):
        inputs, labels = data.inputs[start:start + batch_size], data.labels[start:start + batch_size]
        where = labels != IGNORE_INDEX
        hits = model.logits_at(inputs, where).argmax(-1) == labels[where]
        counts = where.sum(1).repeat_interleave(where.sum(1))
        for n in counts.unique().tolist():
            chosen = counts == n
            right[n] = right.get(n, 0) + int(hits[chosen].sum())
            total[n] = total.get(n, 0) + int(chosen.sum())
    model.train()
    return right, total


def accuracy_by_count(model: DecoderLM, data: MQARData, batch_size: int = 250) -> dict:
    """Query accuracy of ``model`` on ``data``, ``{n_pairs: accuracy}`` (a query's count is its example's)."""
    right, total = _hits_by_count(model, data, batch_size)
    return {n: right[n] / total[n] for n in sorted(total)}


def _curve_point(model: DecoderLM, data: MQARData) -> dict:
    """One evaluation of a validation curve: ``{"by_count": {n_pairs: accuracy}, "pooled": accuracy over every
    query}`` (one pass over ``data``)."""
    right, total = _hits_by_count(model, data, 250)
    return {"by_count": {n: right[n] / total[n] for n in sorted(total)},
            "pooled": sum(right.values()) / sum(total.values())}


def state_bytes(model: DecoderLM, n_tokens: int) -> int:
    """Bytes of every layer's decoding state after ``n_tokens`` tokens (batch 1), by
    :func:`gma_teach.baselines.mixer_state_bytes` (which equals each state's ``nbytes()``, tested): the mixer's
    own state plus the short convolution's (``2 d_model`` float32 numbers, 512 bytes at width 64)."""
    return sum(mixer_state_bytes(block.mixer, n_tokens) for block in model.blocks)


def recall_seed(p: SimpleNamespace, arm: Arm, lr: float, seed: int, data: dict, *, progress=False,
                return_model=False, arm_name: str | None = None, options: dict | None = None, prepare=None):
    """Train one recall model under the resolved sizes ``p`` (the study's setting, ``p.d_model`` the width) with
    :func:`gma_teach.train.fit` (``task="queries"``, the last weights kept: nothing is chosen on a split) and
    measure it: validation and test accuracy per kv count, state bytes, time; with ``p.eval_every``, also the
    validation accuracy every ``eval_every`` steps, to see whether (and when) the run learned and converged:
    ``"curve": {"steps": [...], "val_accuracy": [pooled over every validation query], "val_by_count": [{n_pairs:
    accuracy}, one per evaluation]}`` (the pooled accuracy weighs a count by its ``n`` queries per example; the
    study's metric, and :func:`gma_teach.capacity.pilot_learned`, average the counts).
    ``options``: the mixer's options resolved once (the study runner's; default: the arm's, resolved here);
    ``prepare(model, data)``: called once before training (e.g. means from k-means).

    Returns the run's record (a dict of numbers), or ``(record, model)`` with ``return_model=True``."""
    sizes = vars(p)
    seed_everything(seed)
    model = _model(sizes, arm, p.d_model, options, arm_name)
    if prepare is not None:
        prepare(model, data)
    train = data["train"]
    name = arm_name or arm.mixer
    started, cpu_started = time.perf_counter(), time.process_time()
    curve = getattr(p, "eval_every", None)  # a design that records its validation curve evaluates as it trains
    evaluate = (lambda trained: _curve_point(trained, data["val"])) if curve else None  # one pass each evaluation
    history = fit(model, (train.inputs, train.labels), steps=p.steps, lr=lr, weight_decay=p.weight_decay,
                  warmup=p.warmup, batch_size=p.batch_size, seed=seed, task="queries", progress=progress,
                  label=f"{name} d={p.d_model} lr={lr:g} seed {seed}", keep="last", eval_every=curve,
                  monitor=evaluate)
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
    val, test = accuracy_by_count(model, data["val"]), accuracy_by_count(model, data["test"])
    last = history.step_loss[-50:]
    run = {"arm": name, "width": p.d_model, "lr": lr, "seed": seed, "steps": p.steps,
           "final_train_loss": sum(last) / len(last),
           "val_accuracy": val, "val_mean": sum(val.values()) / len(val),
           "test_accuracy": test, "test_mean": sum(test.values()) / len(test),
           "state_bytes": state_bytes(model, p.seq_len),
           "parameters": sum(q.numel() for q in model.parameters()),
           "train_seconds": seconds, "cpu_seconds": cpu_seconds}
    if curve:
        run["curve"] = {"steps": history.steps, "val_accuracy": [point["pooled"] for point in history.monitor],
                        "val_by_count": [point["by_count"] for point in history.monitor]}
    return (run, model) if return_model else run
