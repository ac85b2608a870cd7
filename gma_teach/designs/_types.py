"""The types of the design room: :class:`Arm`, :class:`Study`, :class:`MetricFacts` and the metric table."""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = ["ALPHA", "Arm", "CAPACITY_PRIMARY_PAIRS", "EXPERIMENTS", "KMEANS_BLOCKS", "METRICS", "MetricFacts",
           "PREPARATIONS", "RoutingScan", "SLOT_ROUTING_PAIRS", "Study", "UnsetSize", "as_study", "metric_facts",
           "thawed"]

ALPHA = 0.05
"""The level of every declared family, after Holm's correction (5%); a study with a declared second look tests
each look at half of it."""

EXPERIMENTS = ("lm", "listops", "text", "recall", "capacity")
"""What a study trains, by name (``lm``, ``listops``, ``text``, ``recall``, ``capacity``): a causal language model,
an encoder classifier on ListOps or the Text stand-in, the recall models of chapter 12 (MQAR, one record per arm and
width), or chapter 12's fast-weight capacity test (one layer, one model per number of stored pairs)."""

CAPACITY_PRIMARY_PAIRS = (80, 120, 160, 200)
"""The numbers of stored pairs ``S`` at which the capacity study's primary family compares arms (each a metric
``retrieval_accuracy_s<S>``)."""

SLOT_ROUTING_PAIRS = (40, 64, 80, 120)
"""The numbers of stored pairs ``S`` at which the slot-routing study trains and its primary family compares arms:
below, at and above GMA's K = 64 slots and linear attention's 64 features."""

PREPARATIONS = ("kmeans",)
"""What an arm may do to its model before training (``kmeans`` sets the GMA means from k-means of routing vectors)."""

KMEANS_BLOCKS = 16
"""Training blocks whose routing vectors the ``kmeans`` preparation clusters (16 x 128 tokens at ``small``)."""


def _frozen(mapping) -> MappingProxyType:
    """A read-only copy of ``mapping``, its nested dicts read-only too."""
    return MappingProxyType({key: _frozen(value) if isinstance(value, Mapping) else value
                             for key, value in dict(mapping or {}).items()})


def thawed(value):
    """``value`` with every read-only mapping turned back into a dict (for JSON and for comparing with records)."""
    if isinstance(value, Mapping):
        return {key: thawed(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [thawed(item) for item in value]
    return value


class UnsetSize:
    """A size a study's setting does not have, as the mixer registry's ``options(p)`` reads it while an arm is
    resolved (``gma_teach.study.resolve``): an entry may default it (GMA's K) or leave it, and the runner then
    names it in its error. ``key``: the size's name."""

    def __init__(self, key: str):
        self.key = key


class _ReadsAsMapping(Mapping):
    """Read access by key to a frozen dataclass's fields that are set (``None`` reads as absent)."""

    def _present(self) -> dict:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if getattr(self, f.name) is not None and not f.metadata.get("hidden")}

    def __getitem__(self, key):
        present = self._present()
        if key not in present:
            raise KeyError(key)
        return present[key]

    def __iter__(self):
        return iter(self._present())

    def __len__(self) -> int:
        return len(self._present())

    __hash__ = object.__hash__


@dataclass(frozen=True, eq=False)
class Arm(_ReadsAsMapping):
    """One arm of a study: a registered mixer and its options.

    Attributes:
        mixer: a name of :func:`gma_teach.mixers.registered_names`.
        options: the mixer's keyword options (for GMA: ``n_components`` and routing options such as
            :data:`REMEDY`); the study's setting gives what an arm leaves out (its ``n_components``, the options a
            mixer's registry entry derives from the setting).
        prepare: what is done to the model before training, one of :data:`PREPARATIONS`, or ``None``.
        n_heads: the arm's own head count where it differs from the study's (the recall hybrid), or ``None``.
    """

    mixer: str
    options: Mapping = field(default_factory=dict)
    prepare: str | None = None
    n_heads: int | None = None

    def __post_init__(self):
        if not isinstance(self.mixer, str) or not self.mixer:
            raise TypeError(f"mixer must be a mixer name (str), got {self.mixer!r}")
        if not isinstance(self.options, Mapping):
            raise TypeError(f"options must be a mapping of the mixer's keyword options, got "
                            f"{type(self.options).__name__}")
        if self.prepare is not None and self.prepare not in PREPARATIONS:
            raise ValueError(f"prepare must be one of {PREPARATIONS} or None, got {self.prepare!r}")
        if self.n_heads is not None and (not isinstance(self.n_heads, int) or self.n_heads < 1):
            raise ValueError(f"n_heads must be a positive int or None, got {self.n_heads!r}")
        object.__setattr__(self, "options", _frozen(self.options))

    def __getitem__(self, key):
        try:
            return super().__getitem__(key)
        except KeyError:  # the earlier dict form of an arm: its K and GMA's other options under their own keys
            if key == "n_components" and self.n_components is not None:
                return self.n_components
            if key == "gma_options" and self.mixer == "gma" and self.gma_options:
                return self.gma_options
            raise

    def __eq__(self, other) -> bool:
        if not isinstance(other, Arm):
            return NotImplemented
        return self.as_dict() == other.as_dict()

    def as_dict(self) -> dict:
        """The arm as JSON-ready data: ``{"mixer", "options", "prepare"?, "n_heads"?}`` (what a record stores)."""
        spec = {"mixer": self.mixer, "options": thawed(self.options)}
        if self.prepare is not None:
            spec["prepare"] = self.prepare
        if self.n_heads is not None:
            spec["n_heads"] = self.n_heads
        return spec

    @classmethod
    def from_spec(cls, spec: Mapping) -> Arm:
        """The arm a record's ``spec`` describes, in either form records hold: today's :meth:`as_dict`, or the
        earlier ``{"mixer", "n_components"?, "gma_options"?, "prepare"?}`` of the LM and classification studies."""
        if isinstance(spec, Arm):
            return spec
        if not isinstance(spec, Mapping) or "mixer" not in spec:
            raise TypeError(f"spec must be a mapping with a 'mixer', got {spec!r}")
        known = {"mixer", "options", "prepare", "n_heads", "n_components", "gma_options"}
        if set(spec) - known:
            raise ValueError(f"spec has keys {sorted(set(spec) - known)} that no arm has")
        options = dict(spec.get("options") or {})
        if spec.get("n_components") is not None:
            options["n_components"] = spec["n_components"]
        options.update(spec.get("gma_options") or {})
        return cls(spec["mixer"], options, prepare=spec.get("prepare"), n_heads=spec.get("n_heads"))

    @property
    def n_components(self) -> int | None:
        """The arm's own ``K`` (``options["n_components"]``), or ``None`` when the setting gives it."""
        return self.options.get("n_components")

    @property
    def gma_options(self) -> dict:
        """GMA's options other than ``n_components`` (routing options such as :data:`REMEDY`)."""
        return {key: thawed(value) for key, value in self.options.items() if key != "n_components"}


def _arms(arms) -> MappingProxyType:
    if not isinstance(arms, Mapping) or not arms:
        raise TypeError(f"arms must be a non-empty mapping of name -> Arm, got {arms!r}")
    for name, arm in arms.items():
        if not isinstance(arm, Arm):
            raise TypeError(f"arm {name!r} must be an Arm, got {type(arm).__name__}")
    return MappingProxyType(dict(arms))


# ------------------------------------------------------------------------------------------------ metrics
@dataclass(frozen=True)
class MetricFacts:
    """Everything the package knows about one metric a study can declare.

    Attributes:
        name: its name in the designs (``Study.metric``).
        part, key: where a run's record holds it: ``run[part][key]``; part ``"history"`` is the last value of
            ``run["history"][key]``, part ``"health"`` the routing health at the last evaluation, part ``"run"``
            ``run[key]`` itself (a recall run's ``test_mean``).
        lower_is_better: whether a lower value is better (bits per byte, losses).
        factor, digits, unit: how a difference is printed: ``factor * value`` with ``digits`` decimals, then
            ``unit`` (``" points"`` for accuracies, which print in percentage points).
        label: its short name in sentences; axis: its axis label in figures.
        per_token: whether it is per token of a tokenizer (so never compared across tokenizers).
    """

    name: str
    part: str
    key: str
    lower_is_better: bool
    factor: float
    digits: int
    unit: str
    label: str
    axis: str
    per_token: bool = False


METRICS = MappingProxyType({m.name: m for m in (
    MetricFacts("val_bits_per_byte", "val", "bits_per_byte", True, 1.0, 4, "", "bits/byte",
                "validation bits per byte"),
    MetricFacts("val_loss", "val", "loss", True, 1.0, 4, "", "val loss", "validation loss (nats per token)",
                per_token=True),
    MetricFacts("val_perplexity", "val", "perplexity", True, 1.0, 2, "", "perplexity",
                "validation perplexity (per token)", per_token=True),
    MetricFacts("test_accuracy", "test", "accuracy", False, 100.0, 2, " points", "test accuracy",
                "test accuracy (%)"),
    MetricFacts("last_epoch_test_accuracy", "history", "val_metric", False, 100.0, 2, " points",
                "last-epoch accuracy", "last-epoch test accuracy (%)"),
    MetricFacts("active_share", "health", "active_share", False, 1.0, 3, "", "argmax share",
                "argmax share (not a measure of use)"),
    MetricFacts("usage_entropy", "health", "usage_entropy", False, 1.0, 3, "", "usage entropy", "usage entropy"),
    MetricFacts("routing_information", "health", "information", False, 1.0, 3, " bits", "information",
                "routing information (bits)"),
    MetricFacts("test_mean", "run", "test_mean", False, 100.0, 1, " points", "recall accuracy",
                "test accuracy, mean over the kv-pair counts (%)"),
    *(MetricFacts(f"retrieval_accuracy_s{n}", "retrieval_accuracy", str(n), False, 100.0, 1, " points",
                  f"retrieval accuracy at S={n}", f"retrieval accuracy at S = {n} (%)")
      for n in sorted({*CAPACITY_PRIMARY_PAIRS, *SLOT_ROUTING_PAIRS})),
)})
"""The one table of metric facts, ``name -> MetricFacts``, saying where each metric sits in a run's record, which
way is better, how a difference is printed and how a figure labels it. ``test_accuracy`` is what a classifier's record
calls its test accuracy: that of the best epoch on the validation split. ``last_epoch_test_accuracy`` is the
accuracy on the validation split after the last epoch, which is the test accuracy of the last epoch's weights only
for a study whose validation split is its test split (the Text stand-in). ``test_mean`` is a recall run's query
accuracy on the test split, averaged over the kv-pair counts. ``retrieval_accuracy_s<S>`` is a capacity run's share
of test queries whose nearest value embedding is the stored one, at ``S`` stored pairs."""


def metric_facts(name: str) -> MetricFacts:
    """The :class:`MetricFacts` of ``name``, or a ValueError naming the known metrics."""
    if name not in METRICS:
        raise ValueError(f"metric must be one of {sorted(METRICS)}, got {name!r}")
    return METRICS[name]


# ------------------------------------------------------------------------------------------------ studies
@dataclass(frozen=True, eq=False)
class Study(_ReadsAsMapping):
    """One declared study.

    Attributes:
        name: the study's name (its records are ``<name>_<arm>.json``, or for recall ``<name>_study_<arm>_d<width>``).
        experiment: one of :data:`EXPERIMENTS`.
        scale: the chapters' preset scale the setting starts from (``None`` for ``recall``, which pins all).
        setting: the sizes the study pins over its experiment's preset (for ``recall``: all of them).
        seeds: the declared seeds.
        arms: ``name -> Arm``, in the tables' order.
        metric: the metric its comparisons pair (a key of :data:`METRICS`), or ``None`` with ``metrics``.
        metrics: the metrics of a study whose claims concern several.
        primary: the primary comparisons, ``(arm, against)`` pairs.
        test: the declared test, in words.
        widths: the model widths every arm trains at (``None``: the setting's ``d_model``).
        learning_rates: learning rates swept on the first seed, the one with the best validation mean kept
            (``None``: the setting's ``lr``).
        second_look: a declared second look at more seeds, or ``None``.
        reruns: declared re-runs of arms (``arm -> declaration``).
        exploratory: what was added after seeing data.
        shared_with: a study whose records this one reuses for the arms they share, or ``None``.
        selection: a rule declared with the study that picks one arm from its primary comparisons (``{"rule":
            words, ...}``, computed by ``gma_teach.study.selected_arm``), or ``None``.
        chapter: the chapter whose findings the study's declared comparisons back, where Part IV's synthesis
            counts them (``gma_teach.study.part_iv_synthesis``, in the chapters' order), or ``None`` for a study it
            does not count (a check, a pilot, a study still to be reported).
        what: the study in a few words, as the synthesis names it (``"language modelling"``); given with
            ``chapter``.
    """

    name: str
    experiment: str
    scale: str | None
    setting: Mapping
    seeds: tuple
    arms: Mapping
    metric: str | None = None
    metrics: tuple | None = None
    primary: tuple = ()
    test: str | None = None
    widths: tuple | None = None
    learning_rates: tuple | None = None
    second_look: Mapping | None = None
    reruns: Mapping | None = None
    exploratory: Mapping | None = None
    shared_with: Study | None = field(default=None, metadata={"hidden": False})
    selection: Mapping | None = None
    chapter: int | None = None
    what: str | None = None

    def __post_init__(self):
        if self.experiment not in EXPERIMENTS:
            raise ValueError(f"experiment must be one of {EXPERIMENTS}, got {self.experiment!r}")
        if self.chapter is not None and (isinstance(self.chapter, bool) or not isinstance(self.chapter, int)
                                         or self.chapter < 1):
            raise ValueError(f"chapter must be a positive int or None, got {self.chapter!r}")
        if self.what is not None and (not isinstance(self.what, str) or not self.what.strip()):
            raise ValueError(f"what must be a few words (a non-empty str) or None, got {self.what!r}")
        if self.chapter is not None and self.what is None:
            raise ValueError(f"study {self.name!r} is placed in chapter {self.chapter} but does not say what it is "
                             "(what=...)")
        object.__setattr__(self, "arms", _arms(self.arms))
        object.__setattr__(self, "setting", _frozen(self.setting))
        object.__setattr__(self, "seeds", tuple(self.seeds))
        object.__setattr__(self, "primary", tuple(tuple(pair) for pair in self.primary))
        for name in ("second_look", "reruns", "exploratory", "selection"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, _frozen(getattr(self, name)))
        for metric in self.declared_metrics():
            metric_facts(metric)
        for arm, against in self.primary:
            if arm not in self.arms or against not in self.arms:
                raise ValueError(f"primary comparison ({arm!r}, {against!r}) names an arm {self.name!r} lacks")
        if self.widths is not None:
            object.__setattr__(self, "widths", tuple(self.widths))
        if self.learning_rates is not None:
            object.__setattr__(self, "learning_rates", tuple(self.learning_rates))

    def __getitem__(self, key):
        if key == "overrides":
            return self.setting
        try:
            return super().__getitem__(key)
        except KeyError:
            if key in self.setting:
                return self.setting[key]
            raise

    def declared_metrics(self) -> tuple[str, ...]:
        """The metrics the study declares (``metrics``, else ``metric``); without a declaration, bits per byte
        for a language-model study, the mean test accuracy for recall and test accuracy for a classifier."""
        if self.metrics:
            return tuple(self.metrics)
        if self.metric:
            return (self.metric,)
        return {"lm": ("val_bits_per_byte",), "recall": ("test_mean",)}.get(self.experiment, ("test_accuracy",))

    def arm(self, name: str) -> Arm:
        """The arm called ``name``, or a ValueError naming the study's arms."""
        if name not in self.arms:
            raise ValueError(f"arm must be one of {sorted(self.arms)}, got {name!r}")
        return self.arms[name]

    @classmethod
    def from_mapping(cls, design: Mapping) -> Study:
        """The :class:`Study` a dict design describes, in the form designs were written before they were typed:
        ``{"name", "experiment"?, "scale", "overrides" (or "setting"), "seeds", "arms": {name: spec}, ...}``,
        each arm's spec in either form :meth:`Arm.from_spec` reads, the recall study's sizes at the top level
        beside its ``arms``."""
        if isinstance(design, Study):
            return design
        if not isinstance(design, Mapping):
            raise TypeError(f"design must be a Study or a mapping, got {type(design).__name__}")
        fields = {f.name for f in dataclasses.fields(cls)}
        given = dict(design)
        setting = dict(given.pop("overrides", None) or given.pop("setting", None) or {})
        for key in [key for key in given if key not in fields]:
            setting[key] = given.pop(key)
        given["arms"] = {name: Arm.from_spec(spec) for name, spec in dict(given.get("arms") or {}).items()}
        if given.get("shared_with") is not None:
            given["shared_with"] = cls.from_mapping(given["shared_with"])
        given.setdefault("experiment", "lm")
        given.setdefault("scale", None)
        return cls(setting=setting, **given)

    def with_changes(self, **changes) -> Study:
        """A copy with some fields changed, and ``setting`` keys given as ``setting={...}`` merged in (a test's
        tiny copy of a study: ``study.with_changes(seeds=(0,), setting={"steps": 3})``)."""
        if "setting" in changes:
            changes["setting"] = {**self.setting, **changes["setting"]}
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True, eq=False)
class RoutingScan(_ReadsAsMapping):
    """A scan of the untrained language model's routing (not a study of arms: nothing is trained or compared).

    Attributes:
        name: the scan's name (its record is ``<name>.json``).
        scale: the LM preset's scale whose untrained model is read.
        seeds: the initialisations read under each setting.
        n_blocks: the validation blocks the routing is read on.
        settings: ``label -> GMA options`` (extra options of :class:`gma_teach.GaussianMixtureAttention`).
    """

    name: str
    scale: str
    seeds: tuple
    n_blocks: int
    settings: Mapping

    def __post_init__(self):
        object.__setattr__(self, "seeds", tuple(self.seeds))
        object.__setattr__(self, "settings", _frozen(self.settings))


def as_study(design) -> Study:
    """``design`` as a :class:`Study`: itself, or the study a dict design describes (:meth:`Study.from_mapping`)."""
    return Study.from_mapping(design)
