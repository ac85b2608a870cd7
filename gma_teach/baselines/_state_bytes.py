"""Decoding-state bytes from the formulas: :data:`STATE_BYTES` holds one formula per decoding mixer, by name, and
:func:`mixer_state_bytes` reads it. A private module of :mod:`gma_teach.baselines`, which exports its names.

The formulas of the book's mixers are written here, beside their classes (:data:`STATE_FORMULAS`, by what they
count); each mixer's registry entry names its own (``MixerEntry.state_bytes``), and :func:`gma_teach.mixers.register`
puts it into :data:`STATE_BYTES`, so ``mixer_state_bytes`` reads every mixer's formula from one place, whatever
registered it.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

import torch

from .. import _checks
from ._factory import MIXERS, mixer_types


def _element_size(dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def _float32_at_least(dtype) -> int:
    return _element_size(torch.promote_types(dtype, torch.float32))


def _key_value_cache(mixer, seq_len) -> int:
    """``2 H N d_head e``: every key and value so far (grows with ``N``)"""
    return 2 * mixer.n_heads * seq_len * mixer.head_dim * _element_size(mixer.k_proj.weight.dtype)


def _linear_memory(mixer, seq_len) -> int:
    """``H (m d_head + m) e``, ``m = d_head`` features"""
    return mixer.n_heads * mixer.head_dim * (mixer.head_dim + 1) * _element_size(mixer.k_proj.weight.dtype)


def _decayed_linear_memory(mixer, seq_len) -> int:
    """``H (m d_head + m) e``, ``m = d_head`` features, float32 at least"""
    return mixer.n_heads * (mixer.head_dim + 1) * mixer.head_dim * _float32_at_least(mixer.k_proj.weight.dtype)


def _performer_memory(mixer, seq_len) -> int:
    """``H (m d_head + m + 1) e``: ``m`` features and each head's running stabilizer, float32 at least"""
    return mixer.n_heads * (mixer.n_features * (mixer.head_dim + 1) + 1) * _float32_at_least(mixer.k_proj.weight.dtype)


def _gma_memory(mixer, seq_len) -> int:
    """``H K (d_value + 1) e``: K slots a head, in float32 (float64 for a float64 layer)"""
    dtype = torch.float64 if mixer.v_proj.weight.dtype == torch.float64 else torch.float32
    return mixer.n_heads * mixer.n_components * (mixer.d_value + 1) * _element_size(dtype)


def _window_cache(mixer, seq_len) -> int:
    """``2 H w d_head e``: the last ``w`` keys and values (allocated whole from the first token)"""
    return 2 * mixer.n_heads * mixer.window * mixer.head_dim * _element_size(mixer.k_proj.weight.dtype)


def _local_gma_state(mixer, seq_len) -> int:
    """its window heads' cache plus its GMA heads' slots"""
    return mixer_state_bytes(mixer.local, seq_len) + mixer_state_bytes(mixer.gma, seq_len)


def _mamba_state(mixer, seq_len) -> int:
    """``d_inner (d_conv - 1 + d_state) e``: the convolution's window and the scan's state"""
    return mixer.d_inner * (mixer.d_conv - 1 + mixer.d_state) * _element_size(mixer.in_proj.weight.dtype)


def _convolution_window(mixer, seq_len) -> int:
    """``(k - 1) d_model e``: the last ``k - 1`` inputs"""
    return (mixer.kernel_size - 1) * mixer.d_model * _element_size(mixer.in_proj.weight.dtype)


def _uniform_sum(mixer, seq_len) -> int:
    """``d_model e``: the running sum of the values, float32 at least"""
    return mixer.d_model * _float32_at_least(mixer.v_proj.weight.dtype)


def _nothing(mixer, seq_len) -> int:
    """0: no state"""
    return 0


# STATE_FORMULAS, STATE_BYTES and CAUSAL_BY_CONSTRUCTION are documented in gma_teach.baselines, which exports them.
STATE_FORMULAS: Mapping[str, Callable] = MappingProxyType({
    "key_value_cache": _key_value_cache, "linear_memory": _linear_memory,
    "decayed_linear_memory": _decayed_linear_memory, "performer_memory": _performer_memory,
    "gma_memory": _gma_memory, "window_cache": _window_cache, "local_gma_state": _local_gma_state,
    "mamba_state": _mamba_state, "convolution_window": _convolution_window, "uniform_sum": _uniform_sum,
    "nothing": _nothing,
})
STATE_BYTES: dict[str, Callable] = {}
CAUSAL_BY_CONSTRUCTION: set[str] = set()


def decoding_name(mixer) -> str | None:
    """The name whose formula of :data:`STATE_BYTES` counts ``mixer``'s state: that of its own class if it has one,
    else that of the nearest base class that has one (``None``: no decoding state)."""
    for cls in type(mixer).__mro__:
        for name, registered in MIXERS.items():
            if registered is cls and name in STATE_BYTES:
                return name
    return None


def mixer_state_bytes(mixer, seq_len, *, batch_size=1) -> int:
    """Bytes of a causal mixer's decoding state after ``seq_len`` tokens, from its sizes (nothing is run).

    It equals ``state.nbytes()`` of the state that ``mixer.init_state(batch_size)`` and ``seq_len`` calls of
    ``mixer.step`` produce: ``batch_size`` times the mixer's formula in :data:`STATE_BYTES` (per batch row, with
    ``e`` the bytes of the state's dtype):

    * ``softmax``, ``sdpa`` (KV cache): ``2 H N d_head e``, growing with ``N``;
    * ``linear``: ``H (m d_head + m) e`` with ``m = d_head`` features; ``performer``: ``H (m d_head + m + 1) e``
      (``m`` features and the running stabilizer of each head, in float32 at least);
      ``decay_linear``: the same with ``m = d_head``;
    * ``gma``, ``decay_gma``: ``H K (d_value + 1) e``;
    * ``window``: ``2 H w d_head e`` (the window is allocated whole from the first token);
    * ``local_gma``: its window's plus its GMA heads';
    * ``mamba``: ``d_inner (d_conv - 1 + d_state) e``; ``conv``: ``(k - 1) d_model e``; ``uniform``: ``d_model e``;
      ``none``: 0;
    * a registered mixer: its entry's formula (``gma_teach.mixers.MixerEntry.state_bytes``).

    Args:
        mixer: a causal mixer from :func:`make_mixer` (``mamba`` and ``conv`` decode whatever their ``causal``).
        seq_len: tokens decoded, ``N >= 0``.
        batch_size: ``B >= 1``.

    Returns:
        an int.
    """
    seq_len = _checks.integer("seq_len", seq_len, minimum=0)
    batch_size = _checks.positive_int("batch_size", batch_size)
    if not isinstance(mixer, mixer_types()):
        raise TypeError(f"mixer must be a mixer of gma_teach.baselines.MIXERS, got {type(mixer).__name__}")
    name = decoding_name(mixer)
    if name not in CAUSAL_BY_CONSTRUCTION and not getattr(mixer, "causal", False):
        raise ValueError(f"{type(mixer).__name__} was built with causal=False and has no decoding state")
    if name is None:
        raise ValueError(f"{type(mixer).__name__} has no decoding state")
    return batch_size * int(STATE_BYTES[name](mixer, seq_len))
