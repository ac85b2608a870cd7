"""Chapter 10's language model: its data, model, one seed's training, the model chapter 11 reads (kept under
``gma_teach.cache_dir()``) and the bytes its decoding states hold."""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import torch

from .. import _checks, diagnostics, mixers
from ..baselines import PerformerAttention
from ..data import wikitext
from ..data.wikitext import bits_per_byte
from ..environment import cache_dir, device, seed_everything
from ..models import DecoderLM, parameter_counts
from ..train import History, evaluate, fit
from .options import check_seed, chosen_options, history_summary, recorded_gma_options

__all__ = ["FAVOR_PROBE_ROWS", "LMRun", "build_lm", "decoding_state_bytes", "lm_checkpoint_path", "lm_data", "lm_seed",
           "routing_monitor", "train_lm", "validation_bytes"]

FAVOR_PROBE_ROWS = 16
"""The validation rows (one batch of the LM study) on which a Performer LM's record measures how far each layer's
FAVOR+ weights are from softmax's (``"favor_error"``)."""


def lm_data(p: SimpleNamespace, *, source: str | None = None):
    """:class:`gma_teach.data.wikitext.LMData` for preset ``p`` (``source`` default ``p.source``)."""
    return wikitext.lm_data(source=source or p.source, tokenizer=p.tokenizer, block_size=p.seq_len,
                            max_train_tokens=p.max_train_tokens, max_val_tokens=p.max_val_tokens,
                            compact_vocab=p.compact_vocab, seed=p.data_seed)


def build_lm(p: SimpleNamespace, mixer: str, vocab_size: int, *, n_components: int | None = None,
             gma_options: dict | None = None, options: dict | None = None) -> DecoderLM:
    """A :class:`~gma_teach.models.DecoderLM` sized by preset ``p``; its mixer built with ``options`` when given
    (an arm's, resolved once: :attr:`gma_teach.study.RunConfig.options`), else with :func:`mixer_options` of
    ``p``, ``n_components`` and ``gma_options``."""
    lm_mixers = tuple(name for name in mixers.registered_names() if mixers.entry(name).causal_lm)
    if mixer not in lm_mixers:
        raise ValueError(f"LM mixer must be one of {lm_mixers}, got {mixer!r}")
    return DecoderLM(vocab_size, p.d_model, p.n_layers, p.n_heads, mixer=mixer, max_seq_len=p.seq_len,
                     d_ff=p.d_ff, dropout=p.dropout, mixer_options=chosen_options(p, mixer, n_components,
                                                                                   gma_options, options))


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


def train_lm(p: SimpleNamespace, mixer: str, data, *, options: dict, seed: int, progress: bool, prepare=None,
             monitor=None):
    """Build ``mixer``'s LM under the resolved sizes ``p`` with ``options`` and train it on ``data`` (the preset's
    ``n_steps``, the best-validation weights kept); ``prepare(model, data)`` runs once before training and
    ``monitor(model)`` at initialization and every evaluation. Returns ``(model, History, monitor's first
    reading)``."""
    seed_everything(check_seed(seed))
    model = build_lm(p, mixer, data.tokenizer.n_vocab, options=options).to(device())
    if prepare is not None:
        prepare(model, data)
    initial = monitor(model) if monitor is not None else None
    label = f"lm {mixer}" + (f" K={options['n_components']}" if mixer == "gma" else "") + f" seed {seed}"
    history = fit(model, data.train, val_data=data.val, steps=p.n_steps, eval_every=p.eval_every, lr=p.lr,
                  weight_decay=p.weight_decay, warmup=int(round(p.warmup_fraction * p.n_steps)),
                  batch_size=p.batch_size, seed=seed, task="lm", progress=progress, label=label,
                  monitor=monitor)
    return model, history, initial


def lm_seed(p: SimpleNamespace, mixer: str, data, *, seed: int = 0, n_components: int | None = None,
            progress: bool = False, return_model: bool = False, gma_options: dict | None = None, prepare=None,
            track_routing: bool = True, options: dict | None = None):
    """One seed of a causal LM under the resolved sizes ``p`` (what the runner of every study calls,
    ``gma_teach.runs.arm.train_seed``): trains it on ``data`` and returns the record
    :func:`gma_teach.experiments.run_lm` describes (and the model if ``return_model``).
    ``options``: the mixer's options resolved once (the study runner's), in place of ``n_components`` and
    ``gma_options``."""
    options = chosen_options(p, mixer, n_components, gma_options, options)
    monitor = routing_monitor(data) if track_routing and mixer == "gma" else None
    model, history, initial = train_lm(p, mixer, data, options=options, seed=seed, progress=progress,
                                        prepare=prepare, monitor=monitor)
    n_targets, n_bytes = data.val[:, 1:].numel(), validation_bytes(data)
    nats_to_bpb = n_targets / n_bytes / math.log(2)
    summary = history_summary(history)
    summary["val_bits_per_byte"] = [loss * nats_to_bpb for loss in history.val_loss]
    val = evaluate(model, data.val, task="lm", batch_size=p.batch_size)
    val["bits_per_byte"] = bits_per_byte(val["loss"] * n_targets, n_bytes)
    record = {"seed": seed, "mixer": mixer, "n_components": options["n_components"] if mixer == "gma" else None,
              "gma_options": recorded_gma_options(mixer, options), "history": summary, "val": val,
              "validation_tokens": n_targets, "validation_bytes": n_bytes,
              "parameters": parameter_counts(model), "tokens_per_second": history.tokens_per_second,
              "train_seconds": history.train_seconds, "data_source": data.source, "tokenizer": data.tokenizer.name}
    if any(isinstance(m, PerformerAttention) for m in model.modules()):
        probe = data.val[:FAVOR_PROBE_ROWS, :-1].to(next(model.parameters()).device)
        record["favor_error"] = diagnostics.model_favor_errors(model, probe)
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
        config: the preset sizes used, with ``mixer``, ``n_components``, ``seed`` and ``scale``, and
            ``gma_options`` for a model trained with options (:func:`gma_teach.experiments.load_or_train_lm`).
    """

    model: DecoderLM
    tokenizer: object
    val_ids: torch.Tensor
    history: History
    path: Path
    config: dict


def lm_checkpoint_path(scale_name: str, mixer: str, n_components: int | None, seed: int, *,
                       gma_options: dict | None = None) -> Path:
    """Where :func:`gma_teach.experiments.load_or_train_lm` keeps a model:
    ``cache_dir()/checkpoints/lm-<scale>-<mixer>[-K<k>]-s<seed>[-<option>=<value>...].pt``, the GMA options (if
    any) in the order of their names."""
    suffix = f"-K{n_components}" if mixer == "gma" else ""
    options = "".join(f"-{key}={value}" for key, value in sorted((gma_options or {}).items()))
    return cache_dir() / "checkpoints" / f"lm-{scale_name}-{mixer}{suffix}-s{seed}{options}.pt"


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
