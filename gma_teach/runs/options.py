"""What every experiment shares: the experiments and their mixers, each mixer's options under a preset, an arm's
options resolved once (:func:`arm_options`), and the small checks and summaries both runners use
(``gma_teach.runs.classification``, ``gma_teach.runs.language_model``).
"""
from __future__ import annotations

from collections.abc import Mapping
from types import SimpleNamespace

from .. import _checks, designs, mixers
from ..designs import Arm, UnsetSize, thawed
from ..presets import PRESETS
from ..train import History

__all__ = ["CLASSIFIER_MIXERS", "EXPERIMENTS", "LM_MIXERS", "arm_options", "check_gma_options", "check_seed",
           "chosen_options", "history_summary", "mixer_options", "recorded_gma_options"]

EXPERIMENTS = tuple(name for name in designs.EXPERIMENTS if name in PRESETS)
"""The experiments a chapter runs live (``lm``, ``listops``, ``text``): the study kinds
(:data:`gma_teach.designs.EXPERIMENTS`) that have a chapter preset (:data:`gma_teach.presets.PRESETS`)."""
CLASSIFIER_MIXERS = mixers.LiveNames(mixers.registered_names)
"""The mixers a classifier can use, every registered mixer (read from the registry when used)."""
LM_MIXERS = mixers.LiveNames(mixers.causal_lm_names)
"""The mixers a causal language model can use (read from the registry when used)."""


def mixer_options(p: SimpleNamespace, mixer: str, n_components: int | None = None,
                  gma_options: dict | None = None) -> dict:
    """The options :func:`gma_teach.make_mixer` gets for ``mixer`` under preset ``p``: its registered
    ``options(p)`` (:class:`gma_teach.mixers.MixerEntry`; GMA's ``n_components`` is the preset's); for GMA, an
    ``n_components`` given here over it, and any ``gma_options`` (keyword options of
    :class:`~gma_teach.GaussianMixtureAttention`, e.g. a routing remedy)."""
    if mixer not in mixers.registered_names():
        raise ValueError(f"mixer must be one of {mixers.registered_names()}, got {mixer!r}")
    check_gma_options(mixer, gma_options)
    options = mixers.entry(mixer).options(p)
    if mixer == "gma" and n_components is not None:
        options["n_components"] = int(n_components)
    return {**options, **(gma_options or {})}


def check_gma_options(mixer: str, gma_options) -> None:
    """Raise unless ``gma_options`` is ``None`` or a dict of :class:`~gma_teach.GaussianMixtureAttention` options
    given with mixer ``gma`` (a TypeError for another type, a ValueError for another mixer)."""
    if gma_options is not None and not isinstance(gma_options, dict):
        raise TypeError(f"gma_options must be a dict of GaussianMixtureAttention options, got "
                        f"{type(gma_options).__name__}")
    if gma_options and mixer != "gma":
        raise ValueError(f"gma_options apply to mixer 'gma' only, got mixer {mixer!r}")


def chosen_options(p: SimpleNamespace, mixer: str, n_components: int | None = None, gma_options: dict | None = None,
                   options: dict | None = None) -> dict:
    """The options a trainer builds ``mixer`` with: ``options`` when given (an arm's, resolved once:
    :func:`arm_options`; then ``n_components`` and ``gma_options`` must not be given), else :func:`mixer_options`
    of ``p``, ``n_components`` and ``gma_options`` (a chapter's live run)."""
    if options is None:
        return mixer_options(p, mixer, n_components, gma_options)
    if n_components is not None or gma_options:
        raise ValueError("give options alone (an arm's resolved options), or n_components and gma_options, "
                         f"not both; got options={options!r}, n_components={n_components!r}, "
                         f"gma_options={gma_options!r}")
    return dict(options)


def recorded_gma_options(mixer: str, options: dict) -> dict:
    """GMA's options other than ``n_components``, as a run record states them (``gma_options``); ``{}`` for
    another mixer."""
    return {key: value for key, value in options.items() if key != "n_components"} if mixer == "gma" else {}


class _Sizes:
    """A study's sizes (a mapping) as the namespace ``options(p)`` reads; a size the study lacks reads as
    :class:`gma_teach.designs.UnsetSize` (an arm may set that option itself: the recall study pins its own sizes,
    and its Performer its features)."""

    def __init__(self, sizes: Mapping):
        self._sizes = sizes

    def __getattr__(self, key):
        if key.startswith("_"):
            raise AttributeError(key)
        try:
            return thawed(self._sizes[key])
        except KeyError:
            return UnsetSize(key)


def arm_options(sizes: Mapping, arm: Arm, arm_name: str | None = None) -> dict:
    """The options the mixer of ``arm`` is built with under a study's resolved ``sizes``: its registry entry's
    defaults (``options(p)`` of :class:`gma_teach.mixers.MixerEntry`, read from the sizes), then the arm's own
    options over them.

    Raises:
        ValueError: naming the arm, when it sets an option its mixer does not take (the names its class's
            ``__init__`` takes, :func:`gma_teach.mixers.accepted_options`), or when a default reads a size the
            study does not have and the arm does not set that option.
    """
    name = arm_name or arm.mixer
    if arm.mixer not in mixers.registered_names():
        raise ValueError(f"arm {name!r}: mixer must be one of {mixers.registered_names()}, got {arm.mixer!r}")
    own = thawed(arm.options)
    accepted = mixers.accepted_options(arm.mixer)
    unknown = sorted(set(own) - set(accepted)) if accepted is not None else []
    if unknown:
        raise ValueError(f"arm {name!r} sets option(s) {unknown}, which mixer {arm.mixer!r} does not take; it takes "
                         f"{list(accepted) or 'no options'}")
    try:
        defaults = mixers.entry(arm.mixer).options(_Sizes(sizes))
    except TypeError as error:
        raise ValueError(f"arm {name!r}: the registry's options of mixer {arm.mixer!r} read a size the study "
                         f"does not have ({error})") from error
    options = {**defaults, **own}
    unset = {key: value.key for key, value in options.items() if isinstance(value, UnsetSize)}
    if unset:
        raise ValueError(f"arm {name!r}: mixer {arm.mixer!r}'s default(s) of {sorted(unset)} read size(s) "
                         f"{sorted(set(unset.values()))} that the study does not have; set them in the arm's "
                         f"options or the study's setting")
    return options


def check_seed(seed) -> int:
    """``seed`` as a non-negative int, or a ValueError naming it."""
    return _checks.integer("seed", seed, minimum=0)


def history_summary(history: History) -> dict:
    """A :class:`History` as a JSON-ready dict, without the per-step learning rates."""
    summary = history.to_dict()
    summary.pop("learning_rate")
    return summary
