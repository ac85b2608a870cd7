"""One place to add a sequence mixer: its registry entry carries everything the package needs to know about it.

A :class:`MixerEntry` holds a mixer's class (built by :func:`gma_teach.make_mixer`), the options the experiments
give it from a chapter's preset (:func:`gma_teach.experiments.mixer_options`), its options under the paper's Table 1
protocol (:func:`gma_teach.profiling.table1_options`), its entry in the cost model (:class:`BlockCost`, read by
:mod:`gma_teach.cost`) and its colour in every figure (``gma_teach.plots.mixer_color``).

Adding a mixer is one call::

    register(MixerEntry("window", WindowAttention, color="#8c510a", options=lambda p: {"window": p.window}))

which also puts the class into :data:`gma_teach.baselines.MIXERS` (``name -> class``, the public map that
:func:`~gma_teach.make_mixer` reads). A name of :data:`~gma_teach.baselines.MIXERS` without an entry gets a plain one
(:func:`entry`): no options, no Table 1 options, no cost-model entry, matplotlib's colour cycle.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace

from . import baselines

__all__ = ["GMA_TENSORS_AT_PEAK", "GMA_TENSORS_AT_PEAK_BACKWARD", "LOCAL_WINDOW", "MAMBA_FLOPS_PER_TOKEN_WIDTH",
           "REGISTRY",
           "SOFTMAX_FLOPS_PER_SCORE", "BlockCost", "MixerEntry", "entry", "register", "registered_names",
           "unregister"]

SOFTMAX_FLOPS_PER_SCORE = 15  # scale, max, subtract, exp (about 10), sum, divide
GMA_TENSORS_AT_PEAK = 4.0  # (B, H, N, K) float32 tensors alive in the forward (logits, two Gammas, a temporary)
GMA_TENSORS_AT_PEAK_BACKWARD = 3.2  # measured with the backward (profiling_cpu_small.json, K sweep)
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
    """

    peak_per_token_width: float
    ops: int
    flops: Callable[[SimpleNamespace], float]
    extra_peak_values: Callable[[SimpleNamespace], float] = _zero


def _no_options(p: SimpleNamespace) -> dict:
    return {}


def _table1_plain(*, seq_len: int, n_components: int, n_features: int, linformer_k: int) -> dict:
    return {}


@dataclass(frozen=True)
class MixerEntry:
    """Everything the package knows about one sequence mixer.

    Attributes:
        name: the mixer's name (``make_mixer(name, ...)``).
        cls: its class, built as ``cls(d_model, n_heads, causal=..., **options)``.
        color: its colour in every figure, or ``None`` for matplotlib's cycle.
        options: ``options(p)``: the options the experiments give it under preset ``p`` (GMA's ``n_components``
            and routing options are added by :func:`gma_teach.experiments.mixer_options`).
        table1_options: ``table1_options(seq_len=, n_components=, n_features=, linformer_k=)``: its options under
            the Table 1 protocol of chapter 8, or ``None`` if it has no place in that table.
        cost: its :class:`BlockCost`, or ``None`` when the cost model does not know it.
        causal_lm: whether a causal language model can use it (Linformer's projection of the sequence cannot).
    """

    name: str
    cls: type
    color: str | None = None
    options: Callable[[SimpleNamespace], dict] = _no_options
    table1_options: Callable[..., dict] | None = _table1_plain
    cost: BlockCost | None = None
    causal_lm: bool = True


REGISTRY: dict[str, MixerEntry] = {}
"""``name -> MixerEntry`` of every registered mixer, in the book's order."""


def register(new: MixerEntry) -> MixerEntry:
    """Add ``new`` to :data:`REGISTRY` and its class to :data:`gma_teach.baselines.MIXERS`; returns it.

    A name already registered, or already in ``MIXERS`` with another class, is refused (``ValueError``)."""
    if not isinstance(new, MixerEntry):
        raise TypeError(f"register takes a MixerEntry, got {type(new).__name__}")
    if new.name in REGISTRY:
        raise ValueError(f"mixer {new.name!r} is already registered")
    known = baselines.MIXERS.get(new.name)
    if known is not None and known is not new.cls:
        raise ValueError(f"mixer {new.name!r} is already in baselines.MIXERS as {known.__name__}, not "
                         f"{new.cls.__name__}")
    REGISTRY[new.name] = new
    baselines.MIXERS[new.name] = new.cls
    return new


def unregister(name: str) -> None:
    """Remove mixer ``name`` from :data:`REGISTRY` and :data:`gma_teach.baselines.MIXERS` (a test's clean-up)."""
    if name not in REGISTRY:
        raise ValueError(f"mixer {name!r} is not registered")
    del REGISTRY[name]
    baselines.MIXERS.pop(name, None)


def entry(name: str) -> MixerEntry:
    """The entry of mixer ``name``: its registered one, or a plain one for a class of ``baselines.MIXERS`` that
    has none (no options, no Table 1 place, no cost-model entry, no colour of its own)."""
    if name in REGISTRY:
        return REGISTRY[name]
    if name in baselines.MIXERS:
        return MixerEntry(name, baselines.MIXERS[name], table1_options=None)
    raise ValueError(f"unknown mixer name {name!r}; known names: {', '.join(registered_names())}")


def registered_names() -> tuple[str, ...]:
    """Every mixer name (``baselines.MIXERS``, which every registered entry is in), in the book's order."""
    return tuple(baselines.MIXERS)


# ------------------------------------------------------------------------------------------------ the entries
def _softmax_flops(s):
    return 4 * s.b * s.n * s.n * s.d + SOFTMAX_FLOPS_PER_SCORE * s.b * s.h * s.n * s.n


for _entry in (
    MixerEntry("gma", baselines.GaussianMixtureAttention, color="#1b7837",
               options=_no_options,  # K and the routing options: gma_teach.experiments.mixer_options
               table1_options=lambda *, seq_len, n_components, n_features, linformer_k: {"n_components": n_components},
               cost=BlockCost(11.8, 110, lambda s: 12 * s.b * s.n * s.n_components * s.d
                              + 20 * s.b * s.h * s.n * s.n_components,
                              lambda s: GMA_TENSORS_AT_PEAK_BACKWARD * s.b * s.h * s.n * s.n_components)),
    MixerEntry("softmax", baselines.SoftmaxAttention, color="#762a83",
               cost=BlockCost(4.0, 40, _softmax_flops, lambda s: 2 * s.b * s.h * s.n * s.n)),
    MixerEntry("sdpa", baselines.SDPAttention, color="#9970ab", cost=BlockCost(6.0, 30, _softmax_flops)),
    MixerEntry("linear", baselines.LinearAttention, color="#2166ac",
               cost=BlockCost(10.0, 60, lambda s: 4 * s.b * s.n * s.d * (s.d // s.h))),
    MixerEntry("performer", baselines.PerformerAttention, color="#d6604d",
               options=lambda p: {"n_features": p.n_features},
               table1_options=lambda *, seq_len, n_components, n_features, linformer_k: {"n_features": n_features},
               cost=BlockCost(10.0, 80, lambda s: 8 * s.b * s.n * s.n_features * s.d,
                              lambda s: 6 * s.b * s.h * s.n * s.n_features)),
    MixerEntry("linformer", baselines.LinformerAttention, color="#b2182b", causal_lm=False,
               options=lambda p: {"k": p.linformer_k},
               table1_options=lambda *, seq_len, n_components, n_features, linformer_k: {
                   "max_seq_len": seq_len, "k": min(linformer_k, seq_len)},
               cost=BlockCost(12.0, 45, lambda s: 6 * s.b * s.n * s.linformer_k * s.d,
                              lambda s: 2 * s.b * s.h * s.n * s.linformer_k)),
    MixerEntry("mamba", baselines.MambaMixer, color="#4d4d4d",
               cost=BlockCost(182.0, 400, lambda s: MAMBA_FLOPS_PER_TOKEN_WIDTH * s.b * s.n * s.d)),
    MixerEntry("uniform", baselines.UniformAverage, table1_options=None),
    MixerEntry("none", baselines.NoMixing, table1_options=None),
    # Chapter 12's mixers: not in the paper's Table 1, and not yet fitted by the cost model.
    MixerEntry("window", baselines.SlidingWindowAttention, color="#8c510a", table1_options=None),
    MixerEntry("local_gma", baselines.LocalGMA, color="#c51b7d", table1_options=None,
               options=lambda p: {"n_components": p.n_components, "window": LOCAL_WINDOW}),
    MixerEntry("decay_linear", baselines.DecayedLinearAttention, color="#4393c3", table1_options=None),
    MixerEntry("decay_gma", baselines.DecayedGaussianMixtureAttention, color="#e6ab02", table1_options=None),
    MixerEntry("conv", baselines.ShortConvolution, color="#878787", table1_options=None),
):
    register(_entry)
