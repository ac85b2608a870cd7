"""The paper's comparators as sequence mixers with GMA's interface (chapter 8).

Every mixer maps ``x (B, N, d_model) -> (B, N, d_model)`` and is built by one factory::

    mixer = gma_teach.make_mixer("performer", d_model=256, n_heads=4, causal=True, n_features=128)

================  ==========================================================================  ====================
name              what it computes                                                            memory in N
================  ==========================================================================  ====================
``gma``           :class:`gma_teach.GaussianMixtureAttention` (options passed through)        linear (fixed K)
``softmax``       eager softmax attention: the ``(B, H, N, N)`` matrix is materialized        quadratic
``sdpa``          ``torch.nn.functional.scaled_dot_product_attention`` (fused kernels)        linear on GPU
``linear``        Linear Transformer, feature map ``elu(x) + 1``                              linear
``performer``     FAVOR+ with positive orthogonal random features                             linear
``linformer``     keys and values projected along the sequence to length ``k``                linear (params too)
``mamba``         selective state-space block (Mamba-1), pure PyTorch chunked scan            linear
``uniform``       control: the mean of the values of all (causal: past) tokens                linear
``none``          control: no mixing at all, the mixer returns zeros                          none
``window``        :class:`gma_teach.local.SlidingWindowAttention`: softmax over ``w`` keys    linear (fixed w)
``local_gma``     :class:`gma_teach.local.LocalGMA`: window heads + GMA heads (split)         linear
``decay_linear``  :class:`gma_teach.forgetting.DecayedLinearAttention` (RetNet decay)         linear (causal only)
``decay_gma``     :class:`gma_teach.forgetting.DecayedGaussianMixtureAttention`               linear (causal only)
``conv``          gated short causal convolution (after Zoology's BaseConv; chapter 12)             none (fixed k)
================  ==========================================================================  ====================

The table holds the book's mixers; :func:`gma_teach.mixers.registry_table` lists every registered one.

The two controls bracket what a mixer buys: ``none`` is a model with no context (each position sees only itself),
``uniform`` the simplest context (a bag of the past). A mixer is worth what it recovers of SDPA's gain over them.

Bidirectional mixers accept ``key_padding_mask (B, N)`` (``True`` = real token, the opposite of
``torch.nn.MultiheadAttention``'s ``True`` = padding) so that padding cannot leak into real tokens; a row with no
``True`` entry (no real token, or a mask in torch's convention) is refused.
Causal mixers other than GMA also decode one token at a time with ``state = mixer.init_state(B)``
and ``y_t, state = mixer.step(x_t (B, d_model), state)``: a growing key/value cache for ``softmax``/``sdpa``,
a constant-size state for ``linear``, ``performer``, ``mamba`` and ``uniform`` (``none`` keeps an empty one), and
for ``window`` (the last ``w`` keys and values), ``local_gma``, ``decay_linear`` and ``decay_gma``.
Every state's ``nbytes()`` counts its bytes; :func:`mixer_state_bytes` gives the same count from the formula.

:data:`MIXERS` maps every name to its class (:func:`gma_teach.mixers.register` adds one); :func:`make_mixer` builds
from it. ``MIXER_NAMES`` is read when asked, so it holds every mixer registered so far.

The package's modules (``_functional``, ``_attention``, ``_controls``, ``_factory``, ``_state_bytes``) are private:
every name is imported from ``gma_teach.baselines``.
"""
from ..convolution import ShortConvolution
from ..forgetting import DecayedGaussianMixtureAttention, DecayedLinearAttention
from ..layer import GaussianMixtureAttention
from ..local import LocalGMA, SlidingWindowAttention
from ..mamba import MambaMixer
from ..mixing import DecodingState, GMAState, normalized_kernel_attention, read_memory, recurrent_step
from . import _attention, _factory, _functional, _state_bytes
from ._functional import (
    elu_feature_map,
    favor_attention,
    favor_features,
    favor_logits,
    linear_attention,
    orthogonal_random_features,
    softmax_attention,
)
from ._attention import (
    KVCache,
    LinearAttention,
    LinformerAttention,
    MultiHeadMixer,
    PerformerAttention,
    PerformerState,
    SDPAttention,
    SoftmaxAttention,
)
from ._controls import EmptyState, NoMixing, UniformAverage, UniformAverageState
from ._factory import make_mixer, mixer_types
from ._state_bytes import mixer_state_bytes

# The documented names, in the book's order; the mixers' classes defined in other modules (GaussianMixtureAttention,
# MambaMixer, SlidingWindowAttention, ...) stay importable from here, as before the package was split.
__all__ = [
    "softmax_attention", "elu_feature_map", "linear_attention", "orthogonal_random_features", "favor_logits",
    "favor_features", "favor_attention", "FAVOR_MAX_EXPONENT",
    "KVCache", "LinearAttentionState", "MultiHeadMixer", "SoftmaxAttention", "SDPAttention", "LinearAttention",
    "PerformerState", "PerformerAttention", "LinformerAttention",
    "EmptyState", "UniformAverageState", "NoMixing", "UniformAverage",
    "MIXERS", "MIXER_NAMES", "mixer_types", "make_mixer",
    "mixer_state_bytes", "STATE_BYTES", "STATE_FORMULAS", "CAUSAL_BY_CONSTRUCTION",
]

# The package's data, documented here (the page documents a name with the docstring its package gives it).
FAVOR_MAX_EXPONENT = _functional.FAVOR_MAX_EXPONENT
"""The largest exponent of a query's stored features in :func:`favor_attention` (``exp(80)`` is about ``5e34``,
below float32's ``3e38``)."""

LinearAttentionState = _attention.LinearAttentionState
"""Decoding state of kernel attention: GMA's state, ``memory (B, H, m, d_head)`` and ``normalizer (B, H, m)`` with
features in place of responsibilities (the same recurrence, :func:`gma_teach.mixing.recurrent_step`)."""

MIXERS = _factory.MIXERS
"""Every sequence mixer by name, ``name -> class``, each built as ``cls(d_model, n_heads, causal=..., **options)``;
filled by :func:`gma_teach.mixers.register`, the book's mixers' included (the registry is their one list; importing
``gma_teach`` registers them), and ``MIXER_NAMES``, read when asked, follows it.

:meta hide-value:
"""

STATE_FORMULAS = _state_bytes.STATE_FORMULAS
"""The book's state-bytes formulas, written beside their classes, by what they count (``"key_value_cache"``,
``"gma_memory"``, ...), each ``formula(mixer, seq_len) -> bytes``; a mixer's registry entry names its own
(:class:`gma_teach.mixers.MixerEntry` ``state_bytes``).

:meta hide-value:
"""

STATE_BYTES = _state_bytes.STATE_BYTES
"""Every decoding mixer's state-bytes formula by name, ``name -> formula(mixer, seq_len)``, read by
:func:`mixer_state_bytes`.

Each formula gives the bytes of one batch row's decoding state of a built causal mixer after ``seq_len`` tokens; its
docstring says it in symbols. The book's mixers' are written beside their classes; a registered mixer's come from its
entry (:class:`gma_teach.mixers.MixerEntry`). A mixer of :data:`MIXERS` without one (``linformer``) has no decoding
state.

:meta hide-value:
"""

CAUSAL_BY_CONSTRUCTION = _state_bytes.CAUSAL_BY_CONSTRUCTION
"""The mixers that read left to right whatever their ``causal`` option, so that they decode even when built with
``causal=False`` (``mamba``, ``conv``; ``MixerEntry.causal_by_construction``).

:meta hide-value:
"""


def __getattr__(name: str):
    """``MIXER_NAMES``: the names of :data:`MIXERS` in the book's order, computed when asked, so that a mixer
    registered after this package was imported is in it."""
    if name == "MIXER_NAMES":
        return tuple(MIXERS)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), "MIXER_NAMES"})
