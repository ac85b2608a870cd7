"""Chapter 9's classification runs (ListOps, Text): their data, models and one seed's training and test."""
from __future__ import annotations

import sys
from types import SimpleNamespace

import torch

from ..data import DataUnavailableError, listops, text
from ..environment import device, seed_everything
from ..models import EncoderClassifier, parameter_counts
from ..train import evaluate, fit
from .options import check_seed, chosen_options, history_summary, recorded_gma_options

__all__ = ["build_classifier", "classification_seed", "listops_data", "majority_accuracy", "text_data"]


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
    ``"n_classes"``. Like LRA, validation is the test split, so a run keeps the last epoch's weights.
    ``source``: ``"imdb"`` or ``"stdlib"`` (the stand-in; labelled so in ``"source"``); default ``p.source``."""
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
                     gma_options: dict | None = None, options: dict | None = None):
    """An :class:`~gma_teach.models.EncoderClassifier` sized by preset ``p`` for ``data``; its mixer built with
    ``options`` when given (an arm's, resolved once: :attr:`gma_teach.study.RunConfig.options`), else with
    :func:`~gma_teach.experiments.mixer_options` of ``p``, ``n_components`` and ``gma_options`` (extra
    :class:`~gma_teach.GaussianMixtureAttention` options)."""
    return EncoderClassifier(data["vocab_size"], data["n_classes"], p.d_model, p.n_layers, p.n_heads, mixer=mixer,
                             max_seq_len=data["train"][0].shape[1], pooling=p.pooling, d_ff=p.d_ff,
                             dropout=p.dropout, pad_id=data["pad_id"],
                             mixer_options=chosen_options(p, mixer, n_components, gma_options, options))


def classification_seed(experiment: str, p: SimpleNamespace, mixer: str, data: dict, *, seed: int = 0,
                        n_components: int | None = None, progress: bool = False,
                        gma_options: dict | None = None, options: dict | None = None, prepare=None,
                        return_model: bool = False):
    """One seed of a classifier under the resolved sizes ``p`` (what the runner of every study calls,
    ``gma_teach.runs.arm.train_seed``): trains and tests it on ``data``.

    ``options``: the mixer's options resolved once (an arm's), in place of ``n_components`` and ``gma_options``;
    ``prepare(model, data)``: called once before training (e.g. means from k-means).

    Returns:
        ``{"seed", "mixer", "n_components", "gma_options", "history", "test", "checkpoint", "majority_baseline",
        "parameters", "tokens_per_second", "train_seconds", "data_source"}`` (and the model with
        ``return_model``); ``test`` holds ``loss`` and ``accuracy`` of the weights kept (``checkpoint``): the best
        validation epoch's, or the last epoch's where the validation split is the test split (the Text stand-in,
        as in LRA), so that no checkpoint is chosen on the test set.
    """
    seed_everything(check_seed(seed))
    options = chosen_options(p, mixer, n_components, gma_options, options)
    model = build_classifier(p, mixer, data, options=options).to(device())
    if prepare is not None:
        prepare(model, data)
    pad_id = data["pad_id"] if p.length_buckets else None  # the encoder ignores appended padding
    keep = "last" if data["validation"] is data["test"] else "best"  # never choose a checkpoint on the test split
    history = fit(model, data["train"], val_data=data["validation"], epochs=p.epochs, lr=p.lr,
                  weight_decay=p.weight_decay, warmup=_warmup_steps(p, len(data["train"][1])),
                  batch_size=p.batch_size, seed=seed, task="classify", progress=progress,
                  label=f"{experiment} {mixer} seed {seed}", pad_id=pad_id, length_buckets=p.length_buckets,
                  keep=keep)
    test = evaluate(model, data["test"], task="classify", batch_size=p.batch_size, pad_id=pad_id)
    gma = mixer == "gma"
    record = {"seed": seed, "mixer": mixer, "n_components": options["n_components"] if gma else None,
              "gma_options": recorded_gma_options(mixer, options), "history": history_summary(history),
              "test": test, "checkpoint": keep, "majority_baseline": majority_accuracy(data["test"][1]),
              "parameters": parameter_counts(model), "tokens_per_second": history.tokens_per_second,
              "train_seconds": history.train_seconds, "data_source": data["source"]}
    return (record, model) if return_model else record


def _warmup_steps(p: SimpleNamespace, n_train: int) -> int:
    steps = p.epochs * -(-n_train // p.batch_size)
    return int(round(p.warmup_fraction * steps))

