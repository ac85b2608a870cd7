"""The factory of :mod:`gma_teach.baselines`: :data:`MIXERS` (``name -> class``, which
:func:`gma_teach.mixers.register` fills) and :func:`make_mixer`. A private module of that package, which exports its
names."""
from __future__ import annotations

import inspect

from .. import layer

MIXERS: dict[str, type] = {}
# MIXERS is documented in gma_teach.baselines, which exports it.


def mixer_types() -> tuple:
    """The distinct mixer classes (for ``isinstance`` checks)."""
    return tuple(dict.fromkeys(MIXERS.values()))


def make_mixer(name, d_model, n_heads, *, causal=False, **options):
    """Build a sequence mixer ``(B, N, d_model) -> (B, N, d_model)`` by name.

    Args:
        name: one of :data:`gma_teach.baselines.MIXER_NAMES` (every mixer registered so far).
        d_model, n_heads: width and heads (``d_model % n_heads == 0``; ``mamba`` ignores ``n_heads``).
        causal: whether position ``i`` may only read positions ``<= i``.
        **options: the keyword-only options of the mixer's class (a registered mixer's own are its class's). A
            mixer whose class takes ``n_components`` (GMA's K: ``gma``, ``local_gma``, ``decay_gma``) not given
            one gets :data:`gma_teach.layer.DEFAULT_COMPONENTS`, GMA's one default K, read at each call. For the
            book's mixers --
            ``gma``: ``n_components`` and any other keyword of
            :class:`gma_teach.GaussianMixtureAttention` (``d_route``, ``impl``, ``chunk_size``, and the routing
            remedies ``init_variance``, ``init_mean_std``, ``balance_weight``, ``balance_form``);
            ``linear``: ``eps``, ``chunk_size``; ``performer``: ``n_features`` (256), ``eps``, ``chunk_size``;
            ``linformer``: ``max_seq_len`` (required), ``k`` (256); ``mamba``: ``d_state`` (16), ``d_conv`` (4),
            ``expand`` (2), ``dt_rank``, ``chunk_size``; ``softmax``, ``sdpa``, ``uniform``, ``none``: none;
            ``window``: ``window`` (64), ``head_dim``; ``local_gma``: ``window`` (64), ``local_heads``
            (``n_heads // 2``), ``n_components`` and the other keywords of GMA, routing remedies included;
            ``decay_linear`` (causal only): ``decay`` (``None``: RetNet's ``1 - 2^(-5-h)``; a number or a list of
            ``n_heads`` numbers in ``(0, 1]``), ``eps``, ``impl`` (``"chunked"``, ``"recurrent"``, ``"naive"``),
            ``chunk_size``; ``decay_gma`` (causal only): ``decay``, ``impl`` as ``decay_linear``,
            ``n_components`` and the other keywords of GMA.

    Returns:
        an ``nn.Module``.
    """
    if name not in MIXERS:
        raise ValueError(f"unknown mixer name {name!r}; known names: {', '.join(MIXERS)}")
    cls = MIXERS[name]
    if "n_components" in inspect.signature(cls.__init__).parameters:
        options.setdefault("n_components", layer.DEFAULT_COMPONENTS)
    if name == "gma":
        return cls(d_model, n_heads, options.pop("n_components"), causal=causal, **options)
    allowed = _keyword_options(cls)
    unknown = set(options) - allowed
    if unknown:
        raise ValueError(f"mixer {name!r} got unknown options {sorted(unknown)}; "
                         f"it accepts {sorted(allowed) or 'none'}")
    return cls(d_model, n_heads, causal=causal, **options)


def _keyword_options(cls) -> set:
    """The keyword-only options of a mixer class's constructor, besides ``causal``."""
    parameters = inspect.signature(cls.__init__).parameters.values()
    return {p.name for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY and p.name != "causal"}

