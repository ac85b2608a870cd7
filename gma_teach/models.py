"""Chapters 9 and 10: a pre-LayerNorm encoder classifier and a causal language model, the mixer chosen by name.

Every block is ``x + mixer(LN(x))`` then ``x + FFN(LN(x))``; the mixer comes from :func:`gma_teach.make_mixer`, so
swapping GMA for a baseline changes nothing else. Token ids are ``(B, N)`` int64 tensors.
"""
from __future__ import annotations

import inspect

import torch
import torch.nn.functional as F
from torch import nn

from . import _checks
from .baselines import make_mixer, mixer_types
from .layer import GaussianMixtureAttention


def auxiliary_loss(model: nn.Module) -> torch.Tensor:
    """The sum of the auxiliary losses of every GMA layer in ``model`` from its last forward (the routing balance
    loss, see :meth:`gma_teach.GaussianMixtureAttention.auxiliary_loss`); a 0-dim zero when there is none.
    Add it to the training loss: ``loss = loss + auxiliary_loss(model)``."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    losses = [m.auxiliary_loss() for m in model.modules() if isinstance(m, GaussianMixtureAttention)]
    if not losses:
        parameter = next(model.parameters(), None)
        return torch.zeros(()) if parameter is None else parameter.new_zeros(())
    return torch.stack([loss.to(losses[0].dtype) for loss in losses]).sum()


@torch.no_grad()
def init_routing_means(model: nn.Module, *inputs, n_iter: int = 10, seed: int = 0, fit_variances: bool = False,
                       **forward_options) -> int:
    """Initialize the means of every GMA layer in ``model`` from data, layer after layer, once before training.

    Runs ``model(*inputs, **forward_options)`` once; as each GMA layer is reached, its means are first set by
    :meth:`~gma_teach.GaussianMixtureAttention.init_means_from` on the input it receives (with the key padding
    mask it receives), so later layers see the outputs of the already initialized earlier ones.

    Returns:
        the number of GMA layers initialized.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    layers = [m for m in model.modules() if isinstance(m, GaussianMixtureAttention)]
    seen = set()

    def initialize(layer, args, kwargs):
        if id(layer) in seen:
            return
        seen.add(id(layer))
        context = args[1] if len(args) > 1 else kwargs.get("context")
        mask = args[2] if len(args) > 2 else kwargs.get("key_padding_mask")
        layer.init_means_from(args[0], context, key_padding_mask=mask, n_iter=n_iter, seed=seed + len(seen),
                              fit_variances=fit_variances)

    hooks = [layer.register_forward_pre_hook(initialize, with_kwargs=True) for layer in layers]
    was_training = model.training
    model.eval()
    try:
        model(*inputs, **forward_options)
    finally:
        for hook in hooks:
            hook.remove()
        model.train(was_training)
    return len(seen)


class _RoutingRemedies:
    """The routing remedies as methods of a model (see :func:`auxiliary_loss` and :func:`init_routing_means`)."""

    def auxiliary_loss(self) -> torch.Tensor:
        """The GMA layers' auxiliary (routing balance) losses of the last forward, summed; add it to the loss."""
        return auxiliary_loss(self)

    def init_routing_means(self, tokens, **options) -> int:
        """k-means initialization of every GMA layer's means from ``tokens`` (see :func:`init_routing_means`)."""
        return init_routing_means(self, tokens, **options)


class Block(nn.Module):
    """One pre-LayerNorm block: ``x + drop(mixer(LN(x)))``, then ``x + drop(FFN(LN(x)))`` (FFN: GELU, width d_ff;
    ``d_ff=0``: no FFN, the block is its mixer alone, as in Zoology's recall models)."""

    def __init__(self, d_model, n_heads, *, mixer, causal, d_ff, dropout, mixer_options):
        super().__init__()
        self.mixer_norm = nn.LayerNorm(d_model)
        self.mixer = make_mixer(mixer, d_model, n_heads, causal=causal, **dict(mixer_options or {}))
        self.ffn_norm = nn.LayerNorm(d_model) if d_ff else None
        self.ffn = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model)) if d_ff else None
        self.dropout = nn.Dropout(dropout)
        self._mixer_takes_mask = "key_padding_mask" in inspect.signature(self.mixer.forward).parameters

    def forward(self, x, key_padding_mask=None):
        """``x (B, N, d_model)``; ``key_padding_mask (B, N)`` bool (``True`` = real token, the opposite of
        ``torch.nn.MultiheadAttention``), passed to mixers that accept one (they refuse a row with no ``True``)."""
        h = self.mixer_norm(x)
        if key_padding_mask is not None and self._mixer_takes_mask:
            h = self.mixer(h, key_padding_mask=key_padding_mask)
        else:
            h = self.mixer(h)
        x = x + self.dropout(h)
        return x if self.ffn is None else x + self.dropout(self.ffn(self.ffn_norm(x)))

    def step(self, x_t, state):
        """Decoding form: ``x_t (B, d_model)`` -> ``(y_t, state)`` through the mixer's ``step``."""
        h, state = self.mixer.step(self.mixer_norm(x_t), state)
        x_t = x_t + h
        return (x_t if self.ffn is None else x_t + self.ffn(self.ffn_norm(x_t))), state


def _check_common(vocab_size, d_model, n_layers, n_heads, max_seq_len, dropout, d_ff):
    for name, value in (("vocab_size", vocab_size), ("d_model", d_model), ("n_layers", n_layers),
                        ("n_heads", n_heads), ("max_seq_len", max_seq_len)):
        _checks.positive_int(name, value)
    if d_ff is not None:
        _checks.integer("d_ff", d_ff, minimum=0)
    _checks.fraction("dropout", dropout)
    return 4 * d_model if d_ff is None else d_ff


def _check_tokens(tokens, vocab_size, max_len):
    if not isinstance(tokens, torch.Tensor) or tokens.dtype not in (torch.int64, torch.int32):
        got = tokens.dtype if isinstance(tokens, torch.Tensor) else type(tokens).__name__
        raise TypeError(f"tokens must be an int64 tensor (B, N), got {got}")
    if tokens.dim() != 2:
        raise ValueError(f"tokens must have shape (B, N), got {tuple(tokens.shape)}")
    if tokens.shape[1] > max_len:
        raise ValueError(f"sequence length {tokens.shape[1]} exceeds max_seq_len={max_len}")
    if tokens.numel() and (tokens.min() < 0 or tokens.max() >= vocab_size):
        raise ValueError(f"token ids must be in [0, {vocab_size}), got range "
                         f"[{int(tokens.min())}, {int(tokens.max())}]")


class EncoderClassifier(_RoutingRemedies, nn.Module):
    """Bidirectional encoder + classification head.

    Args:
        vocab_size, n_classes, d_model, n_layers, n_heads: sizes.
        mixer: a name of :data:`gma_teach.baselines.MIXER_NAMES`; ``mixer_options`` go to :func:`gma_teach.make_mixer`
            (``linformer`` gets ``max_seq_len`` automatically).
        max_seq_len: longest input ``N`` (learned positions).
        pooling: ``"cls"`` (a learned token prepended, its final state classifies) or ``"mean"`` (mean over real
            tokens). Padding (``tokens == pad_id``) is excluded from pooling and from the mixers' keys where the mixer
            takes a ``key_padding_mask`` (built here, ``True`` = real token), so appending padding does not change
            the logits. With ``"mean"`` a row of ``tokens`` that is all padding has nothing to classify and is
            refused. ``mamba`` reads left to
            right: use ``pooling="mean"`` with it and pad on the right.
        d_ff: FFN width (default ``4 * d_model``); dropout; pad_id.

    ``forward(tokens (B, N)) -> logits (B, n_classes)``.
    """

    def __init__(self, vocab_size, n_classes, d_model, n_layers, n_heads, *, mixer="gma", max_seq_len,
                 pooling="cls", d_ff=None, dropout=0.0, pad_id=0, mixer_options=None):
        super().__init__()
        d_ff = _check_common(vocab_size, d_model, n_layers, n_heads, max_seq_len, dropout, d_ff)
        _checks.positive_int("n_classes", n_classes)
        _checks.one_of("pooling", pooling, ("cls", "mean"))
        _checks.integer("pad_id", pad_id, minimum=0, maximum=vocab_size - 1)
        self.vocab_size, self.max_seq_len, self.pooling, self.pad_id = vocab_size, max_seq_len, pooling, pad_id
        positions = max_seq_len + (pooling == "cls")
        options = dict(mixer_options or {})
        if mixer == "linformer":
            options.setdefault("max_seq_len", positions)
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.positions = nn.Embedding(positions, d_model)
        self.cls = nn.Parameter(torch.randn(d_model) * 0.02) if pooling == "cls" else None
        self.blocks = nn.ModuleList(
            Block(d_model, n_heads, mixer=mixer, causal=False, d_ff=d_ff, dropout=dropout, mixer_options=options)
            for _ in range(n_layers))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, n_classes)

    def forward(self, tokens):
        """``tokens (B, N)`` int64 -> logits ``(B, n_classes)``."""
        _check_tokens(tokens, self.vocab_size, self.max_seq_len)
        real = tokens != self.pad_id  # (B, N)
        if self.cls is None and real.numel() and not torch.compiler.is_compiling():
            has_real = real.any(dim=1)
            if not bool(has_real.all()):
                row = int((~has_real).nonzero()[0, 0])
                raise ValueError(f"tokens row {row} is all padding (pad_id={self.pad_id}): with pooling='mean' "
                                 "every row needs a real token (pooling='cls' prepends one)")
        x = self.embedding(tokens)
        if self.cls is not None:
            x = torch.cat([self.cls.expand(x.shape[0], 1, -1).to(x.dtype), x], dim=1)
            real = torch.cat([torch.ones_like(real[:, :1]), real], dim=1)
        x = x + self.positions.weight[: x.shape[1]]
        for block in self.blocks:
            x = block(x, key_padding_mask=real)
        x = self.norm(x)
        if self.pooling == "cls":
            return self.head(x[:, 0])
        weights = real.to(x.dtype).unsqueeze(-1)
        return self.head((x * weights).sum(1) / weights.sum(1).clamp_min(1.0))


def _per_layer(name, value, n_layers) -> list:
    """One entry per layer: ``value`` repeated, or a list/tuple of exactly ``n_layers`` entries as given."""
    if isinstance(value, (list, tuple)):
        if len(value) != n_layers:
            raise ValueError(f"{name} as a sequence needs one entry per layer ({n_layers}), got {len(value)}")
        return list(value)
    return [value] * n_layers


class DecoderLM(_RoutingRemedies, nn.Module):
    """Causal language model: token + learned position embeddings, causal blocks, tied output embedding.

    ``forward(tokens (B, N)) -> logits (B, N, vocab_size)``; :meth:`generate` samples continuations.
    ``mixer`` names every layer's mixer, or is a list of one name per layer (chapter 12's recall models put a
    short convolution under the mixer they study); ``mixer_options`` is likewise a dict or a list of dicts.
    """

    def __init__(self, vocab_size, d_model, n_layers, n_heads, *, mixer="gma", max_seq_len, d_ff=None,
                 dropout=0.0, mixer_options=None):
        super().__init__()
        d_ff = _check_common(vocab_size, d_model, n_layers, n_heads, max_seq_len, dropout, d_ff)
        mixers, options = _per_layer("mixer", mixer, n_layers), _per_layer("mixer_options", mixer_options, n_layers)
        if "linformer" in mixers:
            raise ValueError("DecoderLM needs a causal mixer; linformer is bidirectional only")
        self.vocab_size, self.max_seq_len = vocab_size, max_seq_len
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.positions = nn.Embedding(max_seq_len, d_model)
        self.blocks = nn.ModuleList(
            Block(d_model, n_heads, mixer=name, causal=True, d_ff=d_ff, dropout=dropout, mixer_options=layer_options)
            for name, layer_options in zip(mixers, options))
        self.norm = nn.LayerNorm(d_model)
        nn.init.normal_(self.embedding.weight, std=0.02)

    def forward(self, tokens):
        """``tokens (B, N)`` int64 -> next-token logits ``(B, N, vocab_size)``."""
        return self.hidden_states(tokens) @ self.embedding.weight.T

    def hidden_states(self, tokens):
        """``tokens (B, N)`` int64 -> the final normalized hidden states ``(B, N, d_model)`` (before the output
        embedding)."""
        _check_tokens(tokens, self.vocab_size, self.max_seq_len)
        x = self.embedding(tokens) + self.positions.weight[: tokens.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.norm(x)

    def logits_at(self, tokens, where):
        """Next-token logits at the selected positions only: ``tokens (B, N)``, ``where (B, N)`` bool ->
        ``(M, vocab_size)`` for the ``M = where.sum()`` positions, in row-major order. A task scored at a few
        positions (associative recall) pays for ``M`` rows of the output layer instead of ``B N``."""
        if not isinstance(where, torch.Tensor) or where.dtype != torch.bool or where.shape != tokens.shape:
            got = (f"{where.dtype} {tuple(where.shape)}" if isinstance(where, torch.Tensor)
                   else type(where).__name__)
            raise ValueError(f"where must be a bool tensor of the tokens' shape {tuple(tokens.shape)}, got {got}")
        return self.hidden_states(tokens)[where] @ self.embedding.weight.T

    def _step_logits(self, token, position, states):
        x = self.embedding(token) + self.positions.weight[position]
        new_states = []
        for block, state in zip(self.blocks, states):
            x, state = block.step(x, state)
            new_states.append(state)
        return self.norm(x) @ self.embedding.weight.T, new_states

    def can_decode_recurrently(self):
        """Whether every mixer has ``init_state``/``step`` (GMA: constant state; softmax/sdpa: a KV cache)."""
        return all(hasattr(block.mixer, "step") for block in self.blocks)

    @torch.no_grad()
    def generate(self, prompt_ids, n_new, *, temperature=1.0, top_k=None, use_recurrent=True, generator=None):
        """Continue ``prompt_ids (B, P)`` by ``n_new`` tokens; returns ``(B, P + n_new)``.

        Args:
            temperature: ``0`` is greedy (argmax); otherwise logits are divided by it before sampling.
            top_k: sample among the ``top_k`` most likely tokens only (``None``: all).
            use_recurrent: decode token by token through each mixer's ``step`` (GMA: a state of constant size
                ``(B, H, K, d_v)``; softmax/SDPA: a growing key/value cache). ``False`` recomputes the whole prefix
                with :meth:`forward` for every new token.
            generator: a ``torch.Generator`` for reproducible sampling.
        """
        _check_tokens(prompt_ids, self.vocab_size, self.max_seq_len)
        _checks.positive_int("n_new", n_new)
        if prompt_ids.shape[1] < 1:
            raise ValueError("prompt_ids must hold at least one token per row")
        if prompt_ids.shape[1] + n_new > self.max_seq_len:
            raise ValueError(f"prompt length {prompt_ids.shape[1]} + n_new {n_new} exceeds max_seq_len="
                             f"{self.max_seq_len}")
        _checks.nonnegative_number("temperature", temperature)
        if top_k is not None:
            _checks.positive_int("top_k", top_k)
        if use_recurrent and not self.can_decode_recurrently():
            raise ValueError("use_recurrent=True needs mixers with init_state/step; use use_recurrent=False")
        was_training = self.training
        self.eval()
        try:
            tokens = prompt_ids
            if use_recurrent:
                states = [block.mixer.init_state(tokens.shape[0]) for block in self.blocks]
                for position in range(tokens.shape[1]):
                    logits, states = self._step_logits(tokens[:, position], position, states)
            for i in range(n_new):
                if not use_recurrent:
                    logits = self(tokens)[:, -1]
                new = _sample(logits, temperature, top_k, generator)
                tokens = torch.cat([tokens, new[:, None]], dim=1)
                if use_recurrent and i + 1 < n_new:
                    logits, states = self._step_logits(new, tokens.shape[1] - 1, states)
            return tokens
        finally:
            self.train(was_training)


def _sample(logits, temperature, top_k, generator):
    """``logits (B, V)`` -> token ids ``(B,)``."""
    if temperature == 0:
        return logits.argmax(-1)
    logits = logits.float() / temperature
    if top_k is not None and top_k < logits.shape[-1]:
        threshold = logits.topk(top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < threshold, float("-inf"))
    return torch.multinomial(F.softmax(logits, dim=-1), 1, generator=generator)[:, 0]


def parameter_counts(model: nn.Module) -> dict:
    """``{"mixer": ..., "rest": ..., "total": ...}``: parameters inside sequence mixers and everywhere else
    (tied weights counted once). A bare mixer counts entirely as ``"mixer"``."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    mixer_ids = {id(p) for m in model.modules() if isinstance(m, mixer_types()) for p in m.parameters()}
    unique = {id(p): p.numel() for p in model.parameters()}
    mixer = sum(n for key, n in unique.items() if key in mixer_ids)
    total = sum(unique.values())
    return {"mixer": mixer, "rest": total - mixer, "total": total}
