"""One place to add a sequence mixer: its registry entry carries everything the package needs to know about it.

A :class:`MixerEntry` holds a mixer's class (built by :func:`gma_teach.make_mixer`), the options the experiments
give it from a chapter's preset (:func:`gma_teach.experiments.mixer_options`), its options under the paper's Table 1
protocol (:func:`gma_teach.profiling.table1_options`; a mixer has a place in that table only when its entry gives
them, so a new mixer joins it by opting in), its entry in the cost model (:class:`BlockCost`, read by
:mod:`gma_teach.cost`, or the mixer it is costed as), the formula of its decoding state's bytes (read by
:func:`gma_teach.baselines.mixer_state_bytes`), its look in every figure (colour, line style and marker, read by
``gma_teach.plots.mixer_color`` and :func:`gma_teach.plots.recall.arm_style`; the figures' legends follow the
registry's order), the arms the recall study compares it with when it changes one of them (read by
:mod:`gma_teach.capacity`, found by what they are: :func:`reference_arms`) and whether its routing can collapse
(GMA's, chapter 11). GMA's K has one default, :data:`gma_teach.layer.DEFAULT_COMPONENTS` (in the core, which the
factory this module imports can read): what the registry gives an arm whose study pins no K, and ``make_mixer`` a
call that gives none.

Adding a mixer is one call::

    register(MixerEntry("window", SlidingWindowAttention, color="#8c510a", options=lambda p: {"window": p.window}))

which also puts the class into :data:`gma_teach.baselines.MIXERS` (``name -> class``, the public map that
:func:`~gma_teach.make_mixer` reads) and its state-bytes formula into :data:`gma_teach.baselines.STATE_BYTES`.
A name of :data:`~gma_teach.baselines.MIXERS` without an entry gets a plain one (:func:`entry`): no options, no
Table 1 options, no cost-model entry, matplotlib's colour cycle.

Every list of mixers is read from the registry when asked: :func:`registered_names`, :func:`causal_lm_names`,
:func:`table1_names`, :func:`forgetting_and_hybrid_names` and :func:`routing_collapse_names`. The table below,
:func:`registry_table`, is rebuilt whenever a mixer is registered or removed, so the API page shows every mixer
registered when the package was imported.
"""
from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import SimpleNamespace

from . import baselines, designs, layer
from .designs import Arm, Study

__all__ = ["CAUSAL_CHUNK", "GMA_TENSORS_AT_PEAK", "GMA_TENSORS_AT_PEAK_BACKWARD", "LOCAL_WINDOW",
           "MAMBA_FLOPS_PER_TOKEN_WIDTH", "REGISTRY", "SOFTMAX_FLOPS_PER_SCORE", "BlockCost", "LiveNames",
           "MixerEntry", "accepted_options", "causal_lm_names", "entry", "forgetting_and_hybrid_names",
           "reference_arms", "register", "registered_names", "registry_table", "routing_collapse_names",
           "table1_names", "unregister"]

SOFTMAX_FLOPS_PER_SCORE = 15  # scale, max, subtract, exp (about 10), sum, divide
GMA_TENSORS_AT_PEAK = 4.0  # (B, H, N, K) float32 tensors alive in the forward (logits, two Gammas, a temporary)
GMA_TENSORS_AT_PEAK_BACKWARD = 3.2  # the operator form with the backward, fitted to a K sweep before the lean CPU path
GMA_LEAN_CPU_PEAK_PER_TOKEN_WIDTH = 5.9  # the lean CPU path (gma_teach._gma_autograd), which recomputes the
GMA_LEAN_CPU_TENSORS_AT_PEAK = 0.25  # responsibilities in the backward: both fitted (least squares) to the nine GMA
# rows of profiling_cpu_small.json (aeec797: K = 64 at N = 512..8192, K = 16..256 at N = 2048), 0.89 to 1.01 of them
LOCAL_WINDOW = 32  # the hybrid's window in the experiments (half of its heads: exact softmax over 32 tokens)
MAMBA_FLOPS_PER_TOKEN_WIDTH = 40_000  # the chunked selective scan in pure PyTorch, fitted to the CPU sweep (its
# exp and products over (B, N, 2D, 16) tensors run far below the matrix-product rate)


def _zero(s: SimpleNamespace) -> float:
    return 0.0


@dataclass(frozen=True)
class BlockCost:
    """A mixer's entry in the cost model (:mod:`gma_teach.cost`), for one mixing block on ``(B, N, D)``.

    The two functions get the sizes as a namespace ``s`` with ``b`` (batch), ``n`` (tokens), ``d`` (width ``D``),
    ``h`` (heads), ``n_components``, ``n_features`` and ``linformer_k``.

    Attributes:
        peak_per_token_width: float32 values per token and width held at the forward + backward peak, fitted to
            the profiling sweep (``profiling_cpu_small.json``).
        ops: kernel launches (operators) of one forward + backward call, the fixed cost per call.
        flops: forward FLOPs of the mixer's core, without its four projections.
        extra_peak_values: values at the peak beyond ``peak_per_token_width`` (an ``N x N`` matrix, a
            ``(B, H, N, K)`` tensor, ...).
        on_cpu: the entry of the path the mixer runs on a CPU when it differs from the one it runs elsewhere
            (GMA's lean path, ``gma_teach._gma_autograd``, which keeps no responsibilities for the backward),
            or ``None`` when one entry serves every device.
        causal_flops: forward FLOPs the causal form adds to ``flops``, or ``None`` for none (the chunked kernel
            mixers' masked products inside each chunk of :data:`CAUSAL_CHUNK` tokens, counted, not fitted), read
            by the cost of a causal run (:func:`gma_teach.cost.mixer_flops` with ``causal=True``).
    """

    peak_per_token_width: float
    ops: int
    flops: Callable[[SimpleNamespace], float]
    extra_peak_values: Callable[[SimpleNamespace], float] = _zero
    on_cpu: BlockCost | None = None
    causal_flops: Callable[[SimpleNamespace], float] | None = None


CAUSAL_CHUNK = inspect.signature(baselines.LinearAttention).parameters["chunk_size"].default
"""The tokens of one chunk of the causal kernel mixers (linear attention and Performer, their ``chunk_size``
default, read from the class): inside a chunk they multiply a masked ``(C, C)`` matrix, across chunks they carry a
running state."""


def _chunk_products(features: Callable[[SimpleNamespace], float]) -> Callable[[SimpleNamespace], float]:
    """The causal chunked form's FLOPs: per head, scores ``(N, C)`` over ``features(s)`` numbers and their
    product with the values, ``2 B H N C f + 2 B N C D``."""
    return lambda s: 2 * s.b * s.n * min(CAUSAL_CHUNK, s.n) * (s.h * features(s) + s.d)


def _gma_flops(s: SimpleNamespace) -> float:
    return 12 * s.b * s.n * s.n_components * s.d + 20 * s.b * s.h * s.n * s.n_components


def _no_options(p: SimpleNamespace) -> dict:
    return {}


def _table1_plain(*, seq_len: int, n_components: int, n_features: int, linformer_k: int) -> dict:
    """A place in Table 1 at the mixer's own defaults (no options), for the entries that opt in with it."""
    return {}


@dataclass(frozen=True)
class MixerEntry:
    """Everything the package knows about one sequence mixer.

    Attributes:
        name: the mixer's name (``make_mixer(name, ...)``).
        cls: its class, built as ``cls(d_model, n_heads, causal=..., **options)``.
        color: its colour in every figure, or ``None`` for matplotlib's cycle (and, in the recall figures, black
            crosses).
        options: ``options(p)``: the options the experiments give it under preset ``p``, its defaults in every
            study (an arm's own options go over them, :func:`gma_teach.study.resolve`); GMA's K (``n_components``,
            also ``local_gma``'s and ``decay_gma``'s): the setting's, else :data:`gma_teach.layer.DEFAULT_COMPONENTS`.
        table1_options: ``table1_options(seq_len=, n_components=, n_features=, linformer_k=)``: its options under
            the Table 1 protocol of chapter 8 (a ``dict``, ``{}`` for the mixer's defaults), or ``None`` (the
            default) if it has no place in that table. Membership is opt-in: a mixer joins Table 1
            (:func:`table1_names`, the profiling sweep's default mixers) only when its entry gives this function.
        cost: its :class:`BlockCost`, or ``None`` when the cost model does not know it.
        costed_as: for a mixer without a ``cost`` of its own, the registered mixer whose :class:`BlockCost` the cost
            model's prediction of a recall study's runs uses for it (:func:`gma_teach.cost.study_seconds`), or
            ``None``. Chapter 12's mixers are costed as the mixer each changes (``window`` as ``sdpa``, ``local_gma``
            and ``decay_gma`` as ``gma``, ``decay_linear`` as ``linear``): a window's attention as full attention
            (an upper bound), the decays' extra elementwise work not counted (a slight underestimate).
        causal_lm: whether a causal language model can use it (Linformer's projection of the sequence cannot).
        state_bytes: ``state_bytes(mixer, seq_len)``: the bytes of one batch row's decoding state of a built causal
            mixer after ``seq_len`` tokens (:func:`gma_teach.baselines.mixer_state_bytes` reads it; its docstring's
            first line, in symbols, is its column of :func:`registry_table`), or ``None`` for a mixer that does
            not decode. The book's mixers' formulas live beside their classes
            (:data:`gma_teach.baselines.STATE_BYTES`).
        causal_by_construction: whether it reads left to right whatever its ``causal`` option, so that it decodes
            even when built with ``causal=False`` (``mamba``, ``conv``).
        reference: ``reference(arm)``: what an arm (:class:`gma_teach.designs.Arm`) of this mixer changes and is
            compared with in the recall study, each an arm's name (``window`` -> ``("sdpa",)``) or spec (an ``Arm``:
            ``decay_gma`` -> plain GMA of its K and heads, found by :func:`reference_arms`), or ``None``
            when the mixer is not one of the study's forgetting or hybrid arms.
        linestyle: its line style in the recall figures (matplotlib's ``ls``).
        marker: its marker in the recall figures.
        routing_can_collapse: whether it routes with GMA's responsibilities, whose default routing collapses onto
            one component in causal models (chapter 11): ``gma``, ``local_gma``'s GMA heads, ``decay_gma``.
    """

    name: str
    cls: type
    color: str | None = None
    options: Callable[[SimpleNamespace], dict] = _no_options
    table1_options: Callable[..., dict] | None = None
    cost: BlockCost | None = None
    costed_as: str | None = None
    causal_lm: bool = True
    state_bytes: Callable[..., int] | None = None
    causal_by_construction: bool = False
    reference: Callable[[Arm], tuple[str | Arm, ...]] | None = None
    linestyle: str = "-"
    marker: str = "o"
    routing_can_collapse: bool = False


REGISTRY: dict[str, MixerEntry] = {}
"""``name -> MixerEntry`` of every registered mixer, in the book's order (:func:`registry_table` shows it).

:meta hide-value:
"""


def register(new: MixerEntry) -> MixerEntry:
    """Add ``new`` to :data:`REGISTRY`, its class to :data:`gma_teach.baselines.MIXERS` and its state-bytes
    formula to :data:`gma_teach.baselines.STATE_BYTES`; returns it.

    A name already registered, or already in ``MIXERS`` with another class, is refused (``ValueError``), and so is
    a ``costed_as`` that names no registered mixer with a cost-model entry, or that is given beside a ``cost``."""
    if not isinstance(new, MixerEntry):
        raise TypeError(f"register takes a MixerEntry, got {type(new).__name__}")
    if new.name in REGISTRY:
        raise ValueError(f"mixer {new.name!r} is already registered")
    if new.costed_as is not None:
        if new.cost is not None:
            raise ValueError(f"mixer {new.name!r} has a cost-model entry of its own and costed_as={new.costed_as!r}: "
                             "give one")
        if new.costed_as not in REGISTRY or REGISTRY[new.costed_as].cost is None:
            raise ValueError(f"mixer {new.name!r} is costed as {new.costed_as!r}, which is not a registered mixer "
                             "with a cost-model entry")
    known = baselines.MIXERS.get(new.name)
    if known is not None and known is not new.cls:
        raise ValueError(f"mixer {new.name!r} is already in baselines.MIXERS as {known.__name__}, not "
                         f"{new.cls.__name__}")
    REGISTRY[new.name] = new
    baselines.MIXERS[new.name] = new.cls
    _put(baselines.STATE_BYTES, new.name, new.state_bytes)
    if new.causal_by_construction:
        baselines.CAUSAL_BY_CONSTRUCTION.add(new.name)
    else:
        baselines.CAUSAL_BY_CONSTRUCTION.discard(new.name)
    _refresh_docstring()
    return new


def _put(mapping: dict, name: str, value) -> None:
    if value is None:
        mapping.pop(name, None)
    else:
        mapping[name] = value


def unregister(name: str) -> None:
    """Remove mixer ``name`` from :data:`REGISTRY` and from the maps of :mod:`gma_teach.baselines` (a test's
    clean-up)."""
    if name not in REGISTRY:
        raise ValueError(f"mixer {name!r} is not registered")
    del REGISTRY[name]
    baselines.MIXERS.pop(name, None)
    baselines.STATE_BYTES.pop(name, None)
    baselines.CAUSAL_BY_CONSTRUCTION.discard(name)
    _refresh_docstring()


def entry(name: str) -> MixerEntry:
    """The entry of mixer ``name``: its registered one, or a plain one for a class of ``baselines.MIXERS`` that
    has none (no options, no Table 1 place, no cost-model entry, no colour of its own)."""
    if name in REGISTRY:
        return REGISTRY[name]
    if name in baselines.MIXERS:
        return MixerEntry(name, baselines.MIXERS[name])
    raise ValueError(f"unknown mixer name {name!r}; known names: {', '.join(registered_names())}")


_NOT_OPTIONS = ("self", "d_model", "n_heads", "causal")


def accepted_options(name: str) -> tuple[str, ...] | None:
    """The option names mixer ``name`` takes: the keyword parameters of its class's ``__init__``
    (:data:`gma_teach.baselines.MIXERS`), read with ``inspect.signature``, besides ``d_model``, ``n_heads`` and
    ``causal``, in the signature's order; ``None`` for a class that takes any keyword (``**options``)."""
    cls = entry(name).cls
    parameters = inspect.signature(cls.__init__).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return None
    keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return tuple(p.name for p in parameters if p.kind in keyword and p.name not in _NOT_OPTIONS)


class LiveNames(Sequence):
    """A sequence of mixer names read from the registry each time it is used (iterated, indexed, measured, searched
    with ``in``), so that a name list held by another module, or imported with ``from ... import``, always holds
    every mixer registered so far. It equals any sequence of the same names in the same order.

    Args:
        names: the function that computes the names (``registered_names``, ``causal_lm_names``, ...).
    """

    def __init__(self, names: Callable[[], tuple[str, ...]]):
        if not callable(names):
            raise TypeError(f"names must be a function returning the names, got {type(names).__name__}")
        self._names = names

    def __getitem__(self, index):
        return self._names()[index]

    def __len__(self) -> int:
        return len(self._names())

    def __eq__(self, other) -> bool:
        return isinstance(other, Sequence) and not isinstance(other, str) and tuple(self) == tuple(other)

    __hash__ = None

    def __repr__(self) -> str:
        return repr(self._names())


def registered_names() -> tuple[str, ...]:
    """Every mixer name (``baselines.MIXERS``, which every registered entry is in), in the book's order."""
    return tuple(baselines.MIXERS)


def causal_lm_names() -> tuple[str, ...]:
    """The mixers a causal language model can use (``causal_lm``), in the book's order."""
    return tuple(name for name in registered_names() if entry(name).causal_lm)


def table1_names() -> tuple[str, ...]:
    """The mixers with a place in the paper's Table 1 (``table1_options`` given: opt-in, ``None`` by default), in
    the book's order."""
    return tuple(name for name in registered_names() if entry(name).table1_options is not None)


def forgetting_and_hybrid_names() -> tuple[str, ...]:
    """The mixers the recall study compares with the arms they change (``reference`` not ``None``: the forgetting
    and hybrid mixers ``window``, ``local_gma``, ``decay_linear``, ``decay_gma``), in the book's order."""
    return tuple(name for name in registered_names() if entry(name).reference is not None)


def routing_collapse_names() -> tuple[str, ...]:
    """The mixers whose routing can collapse (``routing_can_collapse``: ``gma``, ``local_gma``, ``decay_gma``)."""
    return tuple(name for name in registered_names() if entry(name).routing_can_collapse)


def reference_arms(name: str, options: dict | None = None, *, n_heads: int | None = None,
                   study: Study | dict | None = None) -> tuple[str, ...]:
    """The arms of ``study`` (a :class:`~gma_teach.designs.Study` or dict design; default
    :data:`gma_teach.designs.RECALL_STUDY`) that an arm of mixer ``name`` with ``options`` and ``n_heads`` heads
    (``None``: not known, as in a run of the recall table, and then not compared) is compared with: its entry's
    ``reference``, a name kept, a spec matched to every arm of the same mixer, options and heads (an arm's own, else
    the setting's), in the study's order; ``()`` for a mixer without one or an unknown name. Options are compared as
    built: K filled in as the study resolves it, ``impl`` and ``chunk_size`` (how, not what) left out."""
    reference = entry(name).reference if name in registered_names() else None
    study = designs.RECALL_STUDY if study is None else designs.as_study(study)
    found: list[str] = []
    for wanted in () if reference is None else reference(Arm(name, dict(options or {}), n_heads=n_heads)):
        found += [wanted] if isinstance(wanted, str) else [
            arm for arm, spec in study.arms.items() if (spec.mixer, spec.prepare) == (wanted.mixer, None)
            and _built_options(spec, study) == _built_options(wanted, study)
            and wanted.n_heads in (None, spec.n_heads or study.setting.get("n_heads"))]
    return tuple(found)


def _built_options(arm: Arm, study: Study) -> dict:
    """``arm``'s options as :func:`reference_arms` compares them."""
    options = {key: value for key, value in designs.thawed(arm.options).items() if key not in ("impl", "chunk_size")}
    if "n_components" in (accepted_options(arm.mixer) or ()):
        options.setdefault("n_components", _setting_components(study.setting)["n_components"])
    return options


# ------------------------------------------------------------------------------------------------ the page's table
_TABLE_COLUMNS = ("name", "class", "decoding state per batch row", "colour", "line, marker",
                  "compared with (recall study)", "routing can collapse")


def _class_path(cls: type) -> str:
    """``module.Class`` at the public path the class is exported from (its module's first private part cut)."""
    parts = cls.__module__.split(".")
    public = next((i for i, part in enumerate(parts) if part.startswith("_")), len(parts))
    module = ".".join(parts[:public])
    if public < len(parts) and getattr(sys.modules.get(module), cls.__name__, None) is not cls:
        module = cls.__module__
    return f"{module}.{cls.__qualname__}"


def _first_line(function) -> str | None:
    doc = (getattr(function, "__doc__", None) or "").strip()
    return doc.splitlines()[0].strip() if doc else None


def _row(found: MixerEntry) -> list[str]:
    state = "none (no decoding)" if found.state_bytes is None else (_first_line(found.state_bytes) or "a formula")
    if found.reference is None:
        compared = ""
    else:
        compared = _first_line(found.reference) or ", ".join(f"``{arm}``" for arm in reference_arms(found.name))
    return [f"``{found.name}``", f"``{_class_path(found.cls)}``", state,
            f"``{found.color}``" if found.color else "matplotlib's cycle", f"``{found.linestyle}`` ``{found.marker}``",
            compared, "yes" if found.routing_can_collapse else ""]


def registry_table(fmt: str = "markdown") -> str:
    """Every registered mixer in one table, read from :data:`REGISTRY`: its name, class, the formula of its
    decoding state's bytes per batch row, colour, line style and marker, the arms the recall study compares it
    with, and whether its routing can collapse.

    Args:
        fmt: ``"markdown"`` (a pipe table, for a notebook's ``Markdown``) or ``"rst"`` (a ``list-table``, as this
            module's docstring shows it on the API page).

    Returns:
        the table as text.
    """
    if fmt not in ("markdown", "rst"):
        raise ValueError(f"fmt must be 'markdown' or 'rst', got {fmt!r}")
    rows = [_row(found) for found in REGISTRY.values()]
    if fmt == "markdown":
        lines = ["| " + " | ".join(_TABLE_COLUMNS) + " |", "|" + "---|" * len(_TABLE_COLUMNS)]
        lines += ["| " + " | ".join(cell.replace("``", "`").replace("|", "\\|") for cell in row) + " |"
                  for row in rows]
        return "\n".join(lines)
    lines = [".. list-table:: The registered mixers", "   :header-rows: 1", ""]
    for row in [list(_TABLE_COLUMNS), *rows]:
        lines += [f"   * - {row[0]}", *(f"     - {cell}" if cell else "     -" for cell in row[1:])]
    return "\n".join(lines)


_DOCSTRING = __doc__


def _refresh_docstring() -> None:
    """This module's docstring: the text above and :func:`registry_table`, as the registry stands now."""
    globals()["__doc__"] = f"{_DOCSTRING}\n{registry_table('rst')}\n"


# ------------------------------------------------------------------------------------------------ the entries
def _softmax_flops(s):
    return 4 * s.b * s.n * s.n * s.d + SOFTMAX_FLOPS_PER_SCORE * s.b * s.h * s.n * s.n


def _setting_components(setting) -> dict:
    """``{"n_components": K}``: ``setting``'s (a namespace or mapping), else :data:`gma_teach.layer.DEFAULT_COMPONENTS`
    (where it lacks K: absent, or :class:`gma_teach.designs.UnsetSize` as the runner reads a study's sizes)."""
    k = setting.get("n_components") if isinstance(setting, Mapping) else getattr(setting, "n_components", None)
    return {"n_components": layer.DEFAULT_COMPONENTS if k is None or isinstance(k, designs.UnsetSize) else k}


def _against_sdpa(arm: Arm) -> tuple[str, ...]:
    """``sdpa`` (the window's exact attention over every key)"""
    return ("sdpa",)


def _against_linear(arm: Arm) -> tuple[str, ...]:
    """``linear`` (the same memory without decay)"""
    return ("linear",)


def _plain_gma(arm: Arm, n_heads: int | None) -> Arm:
    """Plain GMA (its default routing, no other option) of ``arm``'s K (if it sets one), at ``n_heads`` heads."""
    options = {"n_components": arm.options["n_components"]} if "n_components" in arm.options else {}
    return Arm("gma", options, n_heads=n_heads)


def _against_gma(arm: Arm) -> tuple[Arm, ...]:
    """the plain GMA arm (default routing) of the same K and heads (the same memory without decay)"""
    return (_plain_gma(arm, arm.n_heads),)


def _against_window_and_gma(arm: Arm) -> tuple[str | Arm, ...]:
    """``window`` and the plain GMA arm (default routing) of the same K at the hybrid's GMA heads (its two halves)"""
    heads = arm.n_heads
    gma_heads = None if heads is None else heads - arm.options.get("local_heads", heads // 2)
    return ("window", _plain_gma(arm, gma_heads))


_BOOK = baselines.STATE_FORMULAS  # the book's state-bytes formulas, written beside their classes

for _entry in (
    MixerEntry("gma", baselines.GaussianMixtureAttention, color="#1b7837",
               options=_setting_components,  # K: the setting's, else the one default
               table1_options=lambda *, seq_len, n_components, n_features, linformer_k: {"n_components": n_components},
               cost=BlockCost(11.8, 110, _gma_flops,
                              lambda s: GMA_TENSORS_AT_PEAK_BACKWARD * s.b * s.h * s.n * s.n_components,
                              on_cpu=BlockCost(GMA_LEAN_CPU_PEAK_PER_TOKEN_WIDTH, 110, _gma_flops,
                                               lambda s: GMA_LEAN_CPU_TENSORS_AT_PEAK * s.b * s.h * s.n
                                               * s.n_components)),
               state_bytes=_BOOK["gma_memory"], routing_can_collapse=True),
    MixerEntry("softmax", baselines.SoftmaxAttention, color="#762a83", table1_options=_table1_plain,
               cost=BlockCost(4.0, 40, _softmax_flops, lambda s: 2 * s.b * s.h * s.n * s.n),
               state_bytes=_BOOK["key_value_cache"]),
    MixerEntry("sdpa", baselines.SDPAttention, color="#9970ab", table1_options=_table1_plain,
               cost=BlockCost(6.0, 30, _softmax_flops), state_bytes=_BOOK["key_value_cache"]),
    MixerEntry("linear", baselines.LinearAttention, color="#2166ac", table1_options=_table1_plain,
               cost=BlockCost(10.0, 60, lambda s: 4 * s.b * s.n * s.d * (s.d // s.h),
                              causal_flops=_chunk_products(lambda s: s.d // s.h)), state_bytes=_BOOK["linear_memory"]),
    MixerEntry("performer", baselines.PerformerAttention, color="#d6604d",
               options=lambda p: {"n_features": p.n_features},
               table1_options=lambda *, seq_len, n_components, n_features, linformer_k: {"n_features": n_features},
               cost=BlockCost(10.0, 80, lambda s: 8 * s.b * s.n * s.n_features * s.d,
                              lambda s: 6 * s.b * s.h * s.n * s.n_features,
                              causal_flops=_chunk_products(lambda s: s.n_features)),
               state_bytes=_BOOK["performer_memory"]),
    MixerEntry("linformer", baselines.LinformerAttention, color="#b2182b", causal_lm=False,
               options=lambda p: {"k": p.linformer_k},
               table1_options=lambda *, seq_len, n_components, n_features, linformer_k: {
                   "max_seq_len": seq_len, "k": min(linformer_k, seq_len)},
               cost=BlockCost(12.0, 45, lambda s: 6 * s.b * s.n * s.linformer_k * s.d,
                              lambda s: 2 * s.b * s.h * s.n * s.linformer_k)),
    MixerEntry("mamba", baselines.MambaMixer, color="#4d4d4d", table1_options=_table1_plain,
               cost=BlockCost(182.0, 400, lambda s: MAMBA_FLOPS_PER_TOKEN_WIDTH * s.b * s.n * s.d),
               state_bytes=_BOOK["mamba_state"], causal_by_construction=True),
    # the controls: no place in Table 1 (no table1_options)
    MixerEntry("uniform", baselines.UniformAverage, state_bytes=_BOOK["uniform_sum"]),
    MixerEntry("none", baselines.NoMixing, state_bytes=_BOOK["nothing"]),
    # Chapter 12's mixers: not in the paper's Table 1, and not yet fitted by the cost model (the forgetting and
    # hybrid ones are costed as the mixer each changes); those are drawn dash-dotted (local) or dashed (decayed),
    # with triangles, in the recall figures.
    MixerEntry("window", baselines.SlidingWindowAttention, color="#8c510a", costed_as="sdpa",
               state_bytes=_BOOK["window_cache"], reference=_against_sdpa, linestyle="-.", marker="^"),
    MixerEntry("local_gma", baselines.LocalGMA, color="#c51b7d", costed_as="gma",
               options=lambda p: {**_setting_components(p), "window": LOCAL_WINDOW},
               state_bytes=_BOOK["local_gma_state"], reference=_against_window_and_gma, linestyle="-.", marker="^",
               routing_can_collapse=True),
    MixerEntry("decay_linear", baselines.DecayedLinearAttention, color="#4393c3", costed_as="linear",
               state_bytes=_BOOK["decayed_linear_memory"], reference=_against_linear, linestyle="--", marker="^"),
    MixerEntry("decay_gma", baselines.DecayedGaussianMixtureAttention, color="#e6ab02", costed_as="gma",
               options=_setting_components, state_bytes=_BOOK["gma_memory"], reference=_against_gma, linestyle="--",
               marker="^", routing_can_collapse=True),
    MixerEntry("conv", baselines.ShortConvolution, color="#878787",
               state_bytes=_BOOK["convolution_window"], causal_by_construction=True),
):
    register(_entry)
