"""What every experiment shares: the experiments and their mixers, each mixer's options under a preset, and the
small checks and summaries both runners use (``gma_teach.runs.classification``, ``gma_teach.runs.language_model``).
"""
from __future__ import annotations

from types import SimpleNamespace

from .. import _checks, mixers
from ..train import History

__all__ = ["CLASSIFIER_MIXERS", "EXPERIMENTS", "LM_MIXERS", "check_seed", "history_summary", "mixer_options"]

EXPERIMENTS = ("listops", "text", "lm")
CLASSIFIER_MIXERS = mixers.LiveNames(mixers.registered_names)
"""The mixers a classifier can use, every registered mixer (read from the registry when used)."""
LM_MIXERS = mixers.LiveNames(mixers.causal_lm_names)
"""The mixers a causal language model can use (read from the registry when used)."""


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


def check_seed(seed) -> int:
    """``seed`` as a non-negative int, or a ValueError naming it."""
    return _checks.integer("seed", seed, minimum=0)


def history_summary(history: History) -> dict:
    """A :class:`History` as a JSON-ready dict, without the per-step learning rates."""
    summary = history.to_dict()
    summary.pop("learning_rate")
    return summary
