"""The experiments of chapters 9 and 10, as functions and as a command line.

* ``listops`` -- LRA ListOps (10 classes): generated with LRA's generator offline, or the official data at ``full``;
* ``text`` -- LRA Text, byte-level IMDb (2 classes); offline, the labelled stand-in "standard-library docstring ->
  package" (4 classes) from :mod:`gma_teach.data.text`;
* ``lm`` -- a causal language model on WikiText-103 (``full``) or, offline, on the Python standard library's
  English (pydoc topics + docstrings), GPT-2 BPE (its vocabulary ships with the package); every LM record
  reports validation bits per byte and names its tokenizer.

Sizes come from ``gma_teach.preset("listops" | "text" | "lm", scale)``. The chapters call the same functions as the
command line::

    python -m gma_teach.experiments listops --mixer gma --scale small --seeds 3 --out book/results/listops_gma.json

writes a JSON record: the configuration, per-epoch metrics and final test metric of every seed, their mean and
standard deviation, training tokens per second, parameter counts and the provenance of
:func:`gma_teach.measure.provenance` (hardware, threads, load, date, commit, command). The recorded studies (several
arms, seeds resumed after an interruption, paired intervals) are :mod:`gma_teach.study`. Any recorded seed of either is
re-run from the command its record stores, and compared number by number, with::

    python -m gma_teach.experiments reproduce book/results/lm_study_sdpa.json --seed 1

:func:`load_or_train_lm` keeps chapter 10's language model under ``gma_teach.cache_dir()`` for chapter 11.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import torch

from .. import _checks, diagnostics, mixers
from ..baselines import MIXER_NAMES
from ..data import DataUnavailableError, listops, text, wikitext
from ..data.wikitext import bits_per_byte
from ..environment import cache_dir, device, preset, scale, seed_everything
from ..models import DecoderLM, EncoderClassifier, parameter_counts
from ..records import provenance, results_folder, write_record
from ..stats import mean_std
from ..train import History, evaluate, fit, save_atomically
from .reproduce import reproduce_main

EXPERIMENTS = ("listops", "text", "lm")
CLASSIFIER_MIXERS = MIXER_NAMES
LM_MIXERS = tuple(name for name in MIXER_NAMES if mixers.entry(name).causal_lm)
"""The mixers a causal language model can use, as registered when the package was imported."""


# ----------------------------------------------------------------------------------------------------------------
# Models
# ----------------------------------------------------------------------------------------------------------------
def mixer_options(p: SimpleNamespace, mixer: str, n_components: int | None = None,
                  gma_options: dict | None = None) -> dict:
    """The options :func:`gma_teach.make_mixer` gets for ``mixer`` under preset ``p``: its registered
    ``options(p)`` (:class:`gma_teach.mixers.MixerEntry`); for GMA, ``n_components`` and any ``gma_options``
    (keyword options of :class:`~gma_teach.GaussianMixtureAttention`, e.g. a routing remedy)."""
    if mixer not in mixers.registered_names():
        raise ValueError(f"mixer must be one of {mixers.registered_names()}, got {mixer!r}")
    if gma_options is not None and not isinstance(gma_options, dict):
        raise TypeError(f"gma_options must be a dict of GaussianMixtureAttention options, got "
                        f"{type(gma_options).__name__}")
    if gma_options and mixer != "gma":
        raise ValueError(f"gma_options apply to mixer='gma' only, got mixer={mixer!r}")
    options = mixers.entry(mixer).options(p)
    if mixer == "gma":
        return {**options, "n_components": int(n_components or p.n_components), **(gma_options or {})}
    return options


def _check_seed(seed) -> int:
    return _checks.integer("seed", seed, minimum=0)


# ----------------------------------------------------------------------------------------------------------------
# Classification (ListOps, Text)
# ----------------------------------------------------------------------------------------------------------------
def listops_data(p: SimpleNamespace, *, source: str | None = None) -> dict:
    """ListOps splits for preset ``p``: ``{"train", "validation", "test"}`` of ``(tokens, labels)`` plus
    ``"source"`` (a description), ``"vocab_size"`` and ``"n_classes"``.

    ``source``: ``"generate"``, ``"hub"`` or ``"auto"`` (the hub if it answers, else the generator); default
    ``p.source``.
    """
    source = source or p.source
    if source not in ("generate", "hub", "auto"):
        raise ValueError(f"ListOps source must be 'generate', 'hub' or 'auto', got {source!r}")
    settings = dict(max_depth=p.max_depth, max_args=p.max_args, min_length=p.min_length, max_length=p.max_length,
                    add_cls=False)  # the model prepends its own learned CLS token
    data, used = None, source
    if source in ("hub", "auto"):
        try:
            data = listops.splits(p.n_train, p.n_val, p.n_test, source="hub", **settings)
            used = f"hub ({listops.HUB_REPO}, validated)"
        except DataUnavailableError:
            if source == "hub":
                raise
    if data is None:
        data = listops.splits(p.n_train, p.n_val, p.n_test, source="generate", seed=p.data_seed, **settings)
        used = (f"generated with LRA's generator (max_depth={p.max_depth}, max_args={p.max_args}, "
                f"{p.min_length} < length < {p.max_length}, seed {p.data_seed})")
    return {**data, "source": used, "vocab_size": len(listops.VOCAB), "n_classes": listops.N_CLASSES,
            "pad_id": listops.PAD_ID}


def text_data(p: SimpleNamespace, *, source: str | None = None) -> dict:
    """Text splits for preset ``p``: ``{"train", "validation", "test"}`` plus ``"source"``, ``"vocab_size"``,
    ``"n_classes"``. Like LRA, validation is the test split, so :func:`run_classification` keeps the last epoch's
    weights. ``source``: ``"imdb"`` or ``"stdlib"`` (the stand-in; labelled so in ``"source"``); default
    ``p.source``."""
    source = source or p.source
    data = text.splits(p.n_train, p.n_test, source=source, max_length=p.max_length, seed=p.data_seed)
    if source == "stdlib":
        described = (f"STAND-IN for IMDb: standard-library docstring -> package ({', '.join(data['classes'])}), "
                     f"Python {sys.version_info.major}.{sys.version_info.minor}, byte-level, {p.max_length} bytes")
    else:
        described = f"IMDb ({text.HUB_REPO}), byte-level, {p.max_length} bytes"
    return {"train": data["train"], "validation": data["test"], "test": data["test"], "source": described,
            "vocab_size": text.VOCAB_SIZE, "n_classes": len(data["classes"]), "pad_id": text.PAD_ID,
            "classes": data["classes"]}


def majority_accuracy(labels: torch.Tensor) -> float:
    """Accuracy of always answering the most frequent label of ``labels``."""
    return float(torch.bincount(labels).max()) / len(labels)


def build_classifier(p: SimpleNamespace, mixer: str, data: dict, *, n_components: int | None = None,
                     gma_options: dict | None = None):
    """An :class:`~gma_teach.models.EncoderClassifier` sized by preset ``p`` for ``data`` (``gma_options``: extra
    :class:`~gma_teach.GaussianMixtureAttention` options)."""
    return EncoderClassifier(data["vocab_size"], data["n_classes"], p.d_model, p.n_layers, p.n_heads, mixer=mixer,
                             max_seq_len=data["train"][0].shape[1], pooling=p.pooling, d_ff=p.d_ff,
                             dropout=p.dropout, pad_id=data["pad_id"],
                             mixer_options=mixer_options(p, mixer, n_components, gma_options))


def run_classification(experiment: str, mixer: str, *, scale_name: str | None = None, seed: int = 0,
                       n_components: int | None = None, source: str | None = None, data: dict | None = None,
                       progress: bool = False, gma_options: dict | None = None, **overrides) -> dict:
    """Train and test one classifier; returns a JSON-ready record of this seed.

    Args:
        experiment: ``"listops"`` or ``"text"``.
        mixer: a name of :data:`gma_teach.baselines.MIXER_NAMES`.
        scale_name: preset scale (default: the scale in force).
        seed: model initialization, dropout and batch order.
        n_components: GMA's K (default ``p.n_components``).
        source: data source (see :func:`listops_data`, :func:`text_data`).
        data: already-loaded data (to share it between runs).
        gma_options: extra :class:`~gma_teach.GaussianMixtureAttention` options (a routing remedy).
        **overrides: replace preset entries (``epochs=1``, ...).

    Returns:
        ``{"seed", "gma_options", "history", "test", "majority_baseline", "parameters", "tokens_per_second",
        "train_seconds", "data_source", "checkpoint"}``; ``test`` holds ``loss`` and ``accuracy`` of the weights
        kept (``checkpoint``): the best validation epoch's, or the last epoch's where the validation split is the
        test split (the Text stand-in, as in LRA), so that no checkpoint is chosen on the test set.
    """
    if experiment not in ("listops", "text"):
        raise ValueError(f"experiment must be 'listops' or 'text', got {experiment!r}")
    p = preset(experiment, scale_name)
    for key, value in overrides.items():
        if not hasattr(p, key):
            raise ValueError(f"unknown override {key!r} for preset {experiment!r}; known: {sorted(vars(p))}")
        setattr(p, key, value)
    if data is None:
        data = listops_data(p, source=source) if experiment == "listops" else text_data(p, source=source)
    seed_everything(_check_seed(seed))
    model = build_classifier(p, mixer, data, n_components=n_components, gma_options=gma_options).to(device())
    pad_id = data["pad_id"] if p.length_buckets else None  # the encoder ignores appended padding
    keep = "last" if data["validation"] is data["test"] else "best"  # never choose a checkpoint on the test split
    history = fit(model, data["train"], val_data=data["validation"], epochs=p.epochs, lr=p.lr,
                  weight_decay=p.weight_decay, warmup=_warmup_steps(p, len(data["train"][1])),
                  batch_size=p.batch_size, seed=seed, task="classify", progress=progress,
                  label=f"{experiment} {mixer} seed {seed}", pad_id=pad_id, length_buckets=p.length_buckets,
                  keep=keep)
    test = evaluate(model, data["test"], task="classify", batch_size=p.batch_size, pad_id=pad_id)
    return {"seed": seed, "mixer": mixer, "n_components": (n_components or p.n_components) if mixer == "gma" else None,
            "gma_options": dict(gma_options or {}), "history": _history_summary(history), "test": test,
            "checkpoint": keep,
            "majority_baseline": majority_accuracy(data["test"][1]), "parameters": parameter_counts(model),
            "tokens_per_second": history.tokens_per_second, "train_seconds": history.train_seconds,
            "data_source": data["source"]}


def _warmup_steps(p: SimpleNamespace, n_train: int) -> int:
    steps = p.epochs * -(-n_train // p.batch_size)
    return int(round(p.warmup_fraction * steps))


def _history_summary(history: History) -> dict:
    """A :class:`History` as a JSON-ready dict, without the per-step learning rates."""
    summary = history.to_dict()
    summary.pop("learning_rate")
    return summary


# ----------------------------------------------------------------------------------------------------------------
# Language modelling
# ----------------------------------------------------------------------------------------------------------------
def lm_data(p: SimpleNamespace, *, source: str | None = None):
    """:class:`gma_teach.data.wikitext.LMData` for preset ``p`` (``source`` default ``p.source``)."""
    return wikitext.lm_data(source=source or p.source, tokenizer=p.tokenizer, block_size=p.seq_len,
                            max_train_tokens=p.max_train_tokens, max_val_tokens=p.max_val_tokens,
                            compact_vocab=p.compact_vocab, seed=p.data_seed)


def build_lm(p: SimpleNamespace, mixer: str, vocab_size: int, *, n_components: int | None = None,
             gma_options: dict | None = None) -> DecoderLM:
    """A :class:`~gma_teach.models.DecoderLM` sized by preset ``p``."""
    lm_mixers = tuple(name for name in mixers.registered_names() if mixers.entry(name).causal_lm)
    if mixer not in lm_mixers:
        raise ValueError(f"LM mixer must be one of {lm_mixers}, got {mixer!r}")
    return DecoderLM(vocab_size, p.d_model, p.n_layers, p.n_heads, mixer=mixer, max_seq_len=p.seq_len,
                     d_ff=p.d_ff, dropout=p.dropout, mixer_options=mixer_options(p, mixer, n_components, gma_options))


def validation_bytes(data) -> int:
    """UTF-8 bytes of the text behind the validation targets of :class:`~gma_teach.data.wikitext.LMData`
    (``data.val[:, 1:]``, the tokens whose losses :func:`~gma_teach.train.evaluate` sums)."""
    return wikitext.utf8_bytes(data.tokenizer, data.val[:, 1:])


def routing_monitor(data, *, n_blocks: int = 8):
    """A ``monitor`` for :func:`~gma_teach.train.fit`: the routing health
    (:func:`gma_teach.diagnostics.routing_health`) of every GMA layer on the first ``n_blocks`` validation blocks,
    with the spreads of its logits' terms (:func:`gma_teach.diagnostics.routing_logit_terms`) in the same per-layer
    dict, from one forward pass, or ``None`` for a model without GMA layers."""
    tokens = data.val[:n_blocks, :-1]

    def monitor(model):
        if not diagnostics.gma_layers(model):
            return None
        return diagnostics.routing_health(model, tokens.to(next(model.parameters()).device), with_logit_terms=True)

    return monitor


def _train_lm(p, mixer, data, *, n_components, seed, progress, checkpoint_path=None, gma_options=None,
              prepare=None, monitor=None):
    seed_everything(_check_seed(seed))
    model = build_lm(p, mixer, data.tokenizer.n_vocab, n_components=n_components,
                     gma_options=gma_options).to(device())
    if prepare is not None:
        prepare(model, data)
    initial = monitor(model) if monitor is not None else None
    label = f"lm {mixer}" + (f" K={n_components or p.n_components}" if mixer == "gma" else "") + f" seed {seed}"
    history = fit(model, data.train, val_data=data.val, steps=p.n_steps, eval_every=p.eval_every, lr=p.lr,
                  weight_decay=p.weight_decay, warmup=int(round(p.warmup_fraction * p.n_steps)),
                  batch_size=p.batch_size, seed=seed, task="lm", progress=progress, label=label,
                  checkpoint_path=checkpoint_path, monitor=monitor)
    return model, history, initial


def run_lm(mixer: str, *, scale_name: str | None = None, seed: int = 0, n_components: int | None = None,
           source: str | None = None, data=None, progress: bool = False, return_model: bool = False,
           gma_options: dict | None = None, prepare=None, track_routing: bool = True, **overrides):
    """Train one causal LM for ``p.n_steps`` steps; returns a JSON-ready record (and the model if
    ``return_model``).

    Args:
        mixer, n_components: the token mixer (GMA's K).
        gma_options: extra :class:`~gma_teach.GaussianMixtureAttention` options (a routing remedy).
        prepare: ``prepare(model, data)`` called once before training (e.g. means from k-means).
        track_routing: record the routing health of GMA layers at initialization and every evaluation.
        **overrides: replace preset entries (``n_steps=2400``, ...).

    The record holds ``history`` (validation loss and perplexity every ``p.eval_every`` steps, and
    ``val_bits_per_byte``), ``val`` (loss, perplexity and ``bits_per_byte`` of the best-validation weights),
    ``routing`` (``initial`` and per-evaluation health, GMA only), ``tokens_per_second`` (training),
    ``parameters``, ``data_source`` and ``tokenizer``.
    """
    p = preset("lm", scale_name)
    for key, value in overrides.items():
        if not hasattr(p, key):
            raise ValueError(f"unknown override {key!r} for preset 'lm'; known: {sorted(vars(p))}")
        setattr(p, key, value)
    data = data if data is not None else lm_data(p, source=source)
    monitor = routing_monitor(data) if track_routing and mixer == "gma" else None
    model, history, initial = _train_lm(p, mixer, data, n_components=n_components, seed=seed, progress=progress,
                                        gma_options=gma_options, prepare=prepare, monitor=monitor)
    n_targets, n_bytes = data.val[:, 1:].numel(), validation_bytes(data)
    nats_to_bpb = n_targets / n_bytes / math.log(2)
    summary = _history_summary(history)
    summary["val_bits_per_byte"] = [loss * nats_to_bpb for loss in history.val_loss]
    val = evaluate(model, data.val, task="lm", batch_size=p.batch_size)
    val["bits_per_byte"] = bits_per_byte(val["loss"] * n_targets, n_bytes)
    record = {"seed": seed, "mixer": mixer,
              "n_components": (n_components or p.n_components) if mixer == "gma" else None,
              "gma_options": dict(gma_options or {}), "history": summary, "val": val,
              "validation_tokens": n_targets, "validation_bytes": n_bytes,
              "parameters": parameter_counts(model), "tokens_per_second": history.tokens_per_second,
              "train_seconds": history.train_seconds, "data_source": data.source, "tokenizer": data.tokenizer.name}
    if monitor is not None:
        record["routing"] = {"initial": initial, "steps": history.steps, "evaluations": summary.pop("monitor")}
    else:
        summary.pop("monitor")
    return (record, model) if return_model else record


@dataclass
class LMRun:
    """Chapter 10's trained language model, as chapter 11 reads it.

    Attributes:
        model: the :class:`~gma_teach.models.DecoderLM` (eval mode, on ``gma_teach.device()``).
        tokenizer: ``encode``, ``decode`` and ``token_strings(ids) -> list[str]`` (the BPE surface strings).
        val_ids: the validation token stream ``(T,)`` int64 in the model's vocabulary.
        history: the :class:`~gma_teach.train.History` of its training.
        path: the checkpoint file.
        config: the preset sizes used, with ``mixer``, ``n_components``, ``seed`` and ``scale``.
    """

    model: DecoderLM
    tokenizer: object
    val_ids: torch.Tensor
    history: History
    path: Path
    config: dict


def lm_checkpoint_path(scale_name: str, mixer: str, n_components: int | None, seed: int) -> Path:
    """Where :func:`load_or_train_lm` keeps a model:
    ``cache_dir()/checkpoints/lm-<scale>-<mixer>[-K<k>]-s<seed>.pt``."""
    suffix = f"-K{n_components}" if mixer == "gma" else ""
    return cache_dir() / "checkpoints" / f"lm-{scale_name}-{mixer}{suffix}-s{seed}.pt"


def load_or_train_lm(scale_name: str | None = None, *, mixer: str = "gma", n_components: int | None = None,
                     seed: int = 0, progress: bool = False, data=None, **overrides) -> LMRun:
    """Chapter 10's language model: loaded from ``gma_teach.cache_dir()`` if saved, else trained at the scale's
    preset (``gma_teach.preset("lm", scale_name)``, with ``overrides`` such as ``n_steps=150``) and saved as soon as
    it is trained.

    A saved model is reused only if its preset (overrides included) and tokenizer match the current ones; otherwise
    it is retrained. ``data``: the preset's data, if already loaded (:func:`lm_data`).
    """
    chosen = scale_name or scale()
    p = preset("lm", chosen)
    for key, value in overrides.items():
        if not hasattr(p, key):
            raise ValueError(f"unknown override {key!r} for preset 'lm'; known: {sorted(vars(p))}")
        setattr(p, key, value)
    n_components = int(n_components or p.n_components) if mixer == "gma" else None
    path = lm_checkpoint_path(chosen, mixer, n_components, _check_seed(seed))
    data = data if data is not None else lm_data(p)
    config = {**vars(p), "mixer": mixer, "n_components": n_components, "seed": seed, "tokenizer": data.tokenizer.name,
              "vocab_size": data.tokenizer.n_vocab}
    model = build_lm(p, mixer, data.tokenizer.n_vocab, n_components=n_components).to(device())
    saved = torch.load(path, map_location=device(), weights_only=False) if path.exists() else None
    if saved is not None and saved.get("config") == config:
        model.load_state_dict(saved["model"])
        history = History(**saved["history"])
    else:
        model, history, _ = _train_lm(p, mixer, data, n_components=n_components, seed=seed, progress=progress)
        path.parent.mkdir(parents=True, exist_ok=True)
        save_atomically(path, {"model": model.state_dict(), "history": history.to_dict(), "config": config})
    model.eval()
    return LMRun(model, data.tokenizer, data.val_ids, history, path, config)


def decoding_state_bytes(model: DecoderLM, n_steps: int, *, prompt_id: int = 0) -> list[int]:
    """Bytes held by the decoding states of all layers after each of ``n_steps`` recurrent steps (batch 1).

    Counted by each state's own ``nbytes()``: a KV cache grows by ``2 H d_head`` values per
    layer and token; GMA's memory and normalizer keep ``H K (d_v + 1)`` values per layer whatever the position.
    """
    if not model.can_decode_recurrently():
        raise ValueError("model's mixers have no init_state/step")
    _checks.integer("n_steps", n_steps, minimum=1, maximum=model.max_seq_len)
    states = [block.mixer.init_state(1) for block in model.blocks]
    token = torch.tensor([prompt_id], device=model.embedding.weight.device)
    sizes = []
    with torch.no_grad():
        for position in range(n_steps):
            x = model.embedding(token) + model.positions.weight[position]
            new_states = []
            for block, state in zip(model.blocks, states):
                x, state = block.step(x, state)
                new_states.append(state)
            states = new_states
            token = (model.norm(x) @ model.embedding.weight.T).argmax(-1)
            sizes.append(sum(state.nbytes() for state in states))
    return sizes


# ----------------------------------------------------------------------------------------------------------------
# Several seeds, summaries, the command line
# ----------------------------------------------------------------------------------------------------------------
def run(experiment: str, mixer: str, *, scale_name: str | None = None, seeds=(0,), n_components: int | None = None,
        source: str | None = None, progress: bool = False, command: str | None = None, on_seed=None,
        **overrides) -> dict:
    """Run ``experiment`` for every seed in ``seeds``; returns the JSON-ready record the command line writes.

    The record: ``experiment``, ``mixer``, ``scale``, ``config`` (the preset with overrides), ``runs`` (one record per
    seed), ``summary`` (mean and std of the final metric and of tokens/s), ``parameters``, ``data_source``,
    ``complete`` (all seeds ran) and the provenance (``hardware``, ``date``, ``commit``, ``command``).
    ``on_seed(record)``, if given, receives the partial record after every seed (the command line saves it, so an
    interrupted run keeps its finished seeds).
    """
    if experiment not in EXPERIMENTS:
        raise ValueError(f"experiment must be one of {EXPERIMENTS}, got {experiment!r}")
    if not seeds:
        raise ValueError("seeds must name at least one seed")
    chosen = scale_name or scale()
    p = preset(experiment, chosen)
    config = {**vars(p), **overrides, "mixer": mixer, "mixer_options": mixer_options(p, mixer, n_components)}
    origin = provenance(command or " ".join(["python -m gma_teach.experiments", *sys.argv[1:]]),
                                device())  # taken before training: the commit and date of the code that runs
    started = time.perf_counter()
    q = SimpleNamespace(**{**vars(p), **overrides})
    if experiment == "lm":
        data = lm_data(q, source=source)
    else:
        data = listops_data(q, source=source) if experiment == "listops" else text_data(q, source=source)
    runs = []
    record = None
    for seed in seeds:
        if experiment == "lm":
            runs.append(run_lm(mixer, scale_name=chosen, seed=seed, n_components=n_components, data=data,
                               progress=progress, **overrides))
        else:
            runs.append(run_classification(experiment, mixer, scale_name=chosen, seed=seed, n_components=n_components,
                                           data=data, progress=progress, **overrides))
        record = _record(experiment, mixer, chosen, config, runs, len(runs) == len(seeds), started, origin)
        if on_seed is not None:
            on_seed(record)
    return record


def _record(experiment, mixer, scale_name, config, runs, complete, started, origin) -> dict:
    if experiment == "lm":
        metric, values = "val_perplexity", [r["val"]["perplexity"] for r in runs]
    else:
        metric, values = "test_accuracy", [r["test"]["accuracy"] for r in runs]
    mean, std = mean_std(values)
    speed_mean, speed_std = mean_std([r["tokens_per_second"] for r in runs])
    summary = {"metric": metric, "mean": mean, "std": std, "values": values, "seeds": [r["seed"] for r in runs],
               "tokens_per_second_mean": speed_mean, "tokens_per_second_std": speed_std}
    if experiment == "lm":
        bpb = [r["val"]["bits_per_byte"] for r in runs]
        bpb_mean, bpb_std = mean_std(bpb)
        summary.update(bits_per_byte_values=bpb, bits_per_byte_mean=bpb_mean, bits_per_byte_std=bpb_std,
                       tokenizer=runs[0]["tokenizer"])
    return {"experiment": experiment, "mixer": mixer, "n_components": runs[0]["n_components"], "scale": scale_name,
            "config": config, "data_source": runs[0]["data_source"], "parameters": runs[0]["parameters"],
            "summary": summary,
            "complete": complete, "runs": runs, "wall_seconds": time.perf_counter() - started, **origin}


def load_results(pattern: str = "*.json", folder: str | os.PathLike | None = None) -> list[dict]:
    """The recorded result files under :func:`gma_teach.measure.results_folder` (or ``folder``) matching
    ``pattern``, sorted by name."""
    folder = Path(folder) if folder is not None else results_folder()
    return [json.loads(path.read_text()) for path in sorted(folder.glob(pattern))]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m gma_teach.experiments", description=__doc__.split("\n\n")[0])
    parser.add_argument("experiment", choices=EXPERIMENTS)
    parser.add_argument("--mixer", default="gma", choices=MIXER_NAMES)
    parser.add_argument("--scale", default=None, choices=("tiny", "small", "full"),
                        help="preset scale (default: GMA_TEACH_SCALE, else full on a GPU and small on a CPU)")
    parser.add_argument("--seeds", type=int, default=1, help="run seeds 0 .. N-1")
    parser.add_argument("--n-components", type=int, default=None, help="GMA's K (default: the preset's)")
    parser.add_argument("--source", default=None,
                        help="listops: generate|hub|auto; text: stdlib|imdb; lm: stdlib|wikitext-2|wikitext-103")
    parser.add_argument("--out", required=True, help="JSON file to write")
    parser.add_argument("--progress", action="store_true", help="show progress bars")
    return parser


def main(argv=None) -> dict:
    """Command-line entry point: run, write the JSON record to ``--out`` and return it; or, as
    ``python -m gma_teach.experiments reproduce RECORD [--seed S] [--out-dir D]``, :func:`reproduce`."""
    words = list(argv) if argv is not None else sys.argv[1:]
    if words[:1] == ["reproduce"]:
        return reproduce_main(words[1:])
    args = _parser().parse_args(argv)
    if args.seeds < 1:
        raise SystemExit(f"--seeds must be >= 1, got {args.seeds}")
    shown = argv if argv is not None else sys.argv[1:]
    command = "python -m gma_teach.experiments " + " ".join(shown)
    out = Path(args.out)

    def save(record):
        write_record(out, record)

    record = run(args.experiment, args.mixer, scale_name=args.scale, seeds=tuple(range(args.seeds)),
                 n_components=args.n_components, source=args.source, progress=args.progress, command=command,
                 on_seed=save)
    summary = record["summary"]
    print(f"{args.experiment} {args.mixer} ({record['scale']}): {summary['metric']} {summary['mean']:.4f} +- "
          f"{summary['std']:.4f} over {len(summary['values'])} seed(s); {summary['tokens_per_second_mean']:.0f} "
          f"tokens/s; wrote {out}")
    return record


if __name__ == "__main__":
    main()
