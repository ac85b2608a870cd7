"""A chapter's live run: a one-arm study at the chapter's preset, trained by the runner of every study.

Chapters 9-12 train small models while the reader waits. Each such run is a study (:func:`chapter_study`): the
experiment's preset at the chapter's scale, the reader's overrides as its setting, and one arm, the mixer with the
options given. It is resolved (:func:`gma_teach.study.resolve`) and trained (:func:`gma_teach.study.train_seed`)
exactly as an arm of a recorded study, so a chapter's model and a study's are the same model, and their runs are
recorded alike. ``python -m gma_teach.experiments`` and the GPU record run the same studies through
:func:`gma_teach.study.run_arm`.
"""
from __future__ import annotations

from collections.abc import Mapping

import torch

from ..designs import Arm, Study, as_study
from ..environment import device, preset, scale
from ..train import History, save_atomically
from .arm import resolve, study_data, train_seed
from .language_model import LMRun, build_lm, lm_checkpoint_path, train_lm
from .options import EXPERIMENTS, check_gma_options, check_seed

__all__ = ["chapter_study", "load_or_train_lm", "run_classification", "run_lm", "train_run"]

CHAPTER_STUDY = "chapter_{experiment}"
"""The name of a chapter's study of ``experiment`` (its records, when written, are ``chapter_<experiment>_<mixer>``
files of :func:`gma_teach.study.run_arm`)."""


def chapter_study(experiment: str, mixer: str, *, scale_name: str | None = None, seeds=(0,),
                  n_components: int | None = None, gma_options: dict | None = None, prepare: str | None = None,
                  source: str | None = None, **overrides) -> Study:
    """The one-arm study a chapter's live run is: ``experiment``'s preset at ``scale_name`` (default: the scale in
    force) with ``overrides`` (and ``source``) as its setting, and one arm named ``mixer``.

    The arm's options are ``n_components`` (K, for a mixer that takes it; default: its registry entry's, read from
    the preset) and ``gma_options`` (other options of a GMA mixer, e.g. ``gma_teach.LM_ROUTING_REMEDY``);
    ``prepare`` is one of :data:`gma_teach.designs.PREPARATIONS` (``"kmeans"``) or ``None``.

    Raises:
        ValueError: for an override the preset does not have, ``gma_options`` with a mixer other than GMA, or
            (when the study is resolved) an option the mixer does not take.
        TypeError: when ``gma_options`` is not a dict.
    """
    if experiment not in EXPERIMENTS:
        raise ValueError(f"experiment must be one of {EXPERIMENTS}, got {experiment!r}")
    chosen = scale_name or scale()
    known = vars(preset(experiment, chosen))
    for key in overrides:
        if key not in known:
            raise ValueError(f"unknown override {key!r} for preset {experiment!r}; known: {sorted(known)}")
    check_gma_options(mixer, gma_options)
    options = {**({} if n_components is None else {"n_components": int(n_components)}), **(gma_options or {})}
    setting = {**overrides, **({} if source is None else {"source": source})}
    return Study(CHAPTER_STUDY.format(experiment=experiment), experiment, chosen, setting, tuple(seeds),
                 {mixer: Arm(mixer, options, prepare=prepare)})


def _call(function: str, *args, **kwargs) -> str:
    """How a chapter's call reads in a run's provenance: ``gma_teach.experiments.run_lm('gma', seed=0,
    n_steps=40)`` (``function`` with its module)."""
    words = [repr(a) for a in args] + [f"{key}={value!r}" for key, value in kwargs.items() if value is not None]
    return f"gma_teach.{function}({', '.join(words)})"


def run_lm(mixer: str, *, scale_name: str | None = None, seed: int = 0, n_components: int | None = None,
           source: str | None = None, data=None, progress: bool = False, return_model: bool = False,
           gma_options: dict | None = None, prepare: str | None = None, **overrides):
    """Train one causal LM of chapter 10 (the preset's ``n_steps`` steps), as the one arm of
    :func:`gma_teach.experiments.chapter_study`; returns the run's record (and the model if ``return_model``).

    Args:
        mixer, n_components: the token mixer (GMA's K).
        gma_options: other :class:`~gma_teach.GaussianMixtureAttention` options (a routing remedy).
        prepare: ``"kmeans"`` (GMA's means from k-means of the first training blocks' routing vectors) or ``None``.
        data: the preset's data, if already loaded (:func:`gma_teach.experiments.lm_data`).
        **overrides: replace preset entries (``n_steps=2400``, ...).

    The record (the LM trainer's of one seed, stamped by :func:`gma_teach.study.train_seed`)
    holds ``history`` (validation loss and perplexity every ``p.eval_every`` steps, and ``val_bits_per_byte``),
    ``val`` (loss, perplexity and ``bits_per_byte`` of the best-validation weights), ``routing`` (GMA's routing
    health at initialization and every evaluation), ``favor_error`` (Performer only), ``tokens_per_second``,
    ``parameters``, ``data_source``, ``tokenizer``, ``wall_seconds``, ``cpu_seconds`` and ``provenance``.
    """
    study = chapter_study("lm", mixer, scale_name=scale_name, n_components=n_components, gma_options=gma_options,
                          prepare=prepare, source=source, **overrides)
    command = _call("experiments.run_lm", mixer, scale_name=study.scale, seed=seed, n_components=n_components,
                    gma_options=gma_options, prepare=prepare, source=source, **overrides)
    return train_seed(resolve(study, mixer), check_seed(seed), data=data, command=command, progress=progress,
                      return_model=return_model)


def run_classification(experiment: str, mixer: str, *, scale_name: str | None = None, seed: int = 0,
                       n_components: int | None = None, source: str | None = None, data: dict | None = None,
                       progress: bool = False, gma_options: dict | None = None, prepare: str | None = None,
                       return_model: bool = False, **overrides):
    """Train and test one classifier of chapter 9, as the one arm of :func:`gma_teach.experiments.chapter_study`;
    returns the run's record (and the model if ``return_model``).

    Args:
        experiment: ``"listops"`` or ``"text"``.
        mixer: a registered mixer (:func:`gma_teach.mixers.registered_names`).
        scale_name: preset scale (default: the scale in force).
        seed: model initialization, dropout and batch order.
        n_components, gma_options, prepare: the arm's options, as in :func:`run_lm`.
        source: data source (see :func:`gma_teach.experiments.listops_data`, :func:`~gma_teach.experiments.text_data`).
        data: already-loaded data (to share it between runs).
        **overrides: replace preset entries (``epochs=1``, ...).

    Returns:
        The classifier trainer's record of one seed, stamped by
        :func:`gma_teach.study.train_seed`: ``test`` holds ``loss`` and ``accuracy`` of the weights kept
        (``checkpoint``): the best validation epoch's, or the last epoch's where the validation split is the test
        split (the Text stand-in, as in LRA), so that no checkpoint is chosen on the test set.
    """
    if experiment not in ("listops", "text"):
        raise ValueError(f"experiment must be 'listops' or 'text', got {experiment!r}")
    study = chapter_study(experiment, mixer, scale_name=scale_name, n_components=n_components,
                          gma_options=gma_options, prepare=prepare, source=source, **overrides)
    command = _call("experiments.run_classification", experiment, mixer, scale_name=study.scale, seed=seed,
                    n_components=n_components, gma_options=gma_options, prepare=prepare, source=source,
                    **overrides)
    return train_seed(resolve(study, mixer), check_seed(seed), data=data, command=command, progress=progress,
                      return_model=return_model)


def load_or_train_lm(scale_name: str | None = None, *, mixer: str = "gma", n_components: int | None = None,
                     seed: int = 0, progress: bool = False, data=None, gma_options: dict | None = None,
                     **overrides) -> LMRun:
    """Chapter 10's language model: loaded from ``gma_teach.cache_dir()`` if saved, else trained as the one arm of
    :func:`chapter_study` (``overrides`` such as ``n_steps=150``) and saved as soon as it is trained.

    A saved model is reused only if its preset (overrides included), options and tokenizer match the current ones;
    otherwise it is retrained. ``data``: the preset's data, if already loaded (:func:`lm_data`). ``gma_options``:
    extra :class:`~gma_teach.GaussianMixtureAttention` options, such as the routing remedy
    ``gma_teach.LM_ROUTING_REMEDY`` (chapter 11 reads a model trained with it); such a model is kept in a file
    of its own (:func:`gma_teach.experiments.lm_checkpoint_path`).
    """
    gma_options = dict(gma_options or {})
    config = resolve(chapter_study("lm", mixer, scale_name=scale_name, n_components=n_components,
                                   gma_options=gma_options, **overrides), mixer)
    p, options = config.namespace(), dict(config.options)
    n_components = options["n_components"] if mixer == "gma" else None
    path = lm_checkpoint_path(config.study.scale, mixer, n_components, check_seed(seed), gma_options=gma_options)
    data = data if data is not None else study_data(config.study)
    saved_config = {**vars(p), "mixer": mixer, "n_components": n_components, "seed": seed,
                    "tokenizer": data.tokenizer.name, "vocab_size": data.tokenizer.n_vocab}
    if gma_options:  # absent for the default, so that the default's saved models stay valid
        saved_config["gma_options"] = gma_options
    model = build_lm(p, mixer, data.tokenizer.n_vocab, options=options).to(device())
    saved = torch.load(path, map_location=device(), weights_only=False) if path.exists() else None
    if saved is not None and saved.get("config") == saved_config:
        model.load_state_dict(saved["model"])
        history = History(**saved["history"])
    else:
        model, history, _ = train_lm(p, mixer, data, options=options, seed=seed, progress=progress)
        path.parent.mkdir(parents=True, exist_ok=True)
        save_atomically(path, {"model": model.state_dict(), "history": history.to_dict(), "config": saved_config})
    model.eval()
    return LMRun(model, data.tokenizer, data.val_ids, history, path, saved_config)


def train_run(study: Mapping, arm: str, width: int, lr: float, seed: int, data: dict, *, progress=False,
              return_model=False):
    """One seed of arm ``arm`` of a recall study (a design, or a copy with smaller sizes,
    :func:`gma_teach.capacity.shrink_study`) at ``width`` and learning rate ``lr``: what the study runner trains
    for one seed, for chapter 12's live run. Returns the run's record (and the model with ``return_model``)."""
    study = as_study(study)
    if width not in (study.widths or ()):  # a chapter's smaller copy trains at a width of its own
        study = study.with_changes(widths=(width,))
    return train_seed(resolve(study, arm, width), check_seed(seed), lr=lr, data=data, progress=progress,
                      return_model=return_model,
                      command=_call("study.train_run", study.name, arm, width=width, lr=lr, seed=seed))

