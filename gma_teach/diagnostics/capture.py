"""Collecting query responsibilities from a model with GMA layers, without changing the model."""
from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from .. import _checks
from ..layer import GaussianMixtureAttention
from .categories import token_categories


def _is_gma_layer(module: nn.Module) -> bool:

    return isinstance(module, GaussianMixtureAttention)


def gma_layers(model: nn.Module) -> list[nn.Module]:
    """The :class:`~gma_teach.GaussianMixtureAttention` layers inside ``model``, in ``model.modules()`` order.

    Their positions in this list are the layer indices used by :func:`capture_responsibilities`.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    return [module for module in model.modules() if _is_gma_layer(module)]


def capture_responsibilities(
    model: nn.Module, input_ids: torch.Tensor, *, layers: Sequence[int] | None = None, side: str = "query"
) -> dict[int, torch.Tensor]:
    """Query (or key) responsibilities of the model's GMA layers on one forward pass, with the model left as it
    was.

    The model runs once in evaluation mode under ``torch.no_grad()``. Each chosen layer's
    ``store_responsibilities`` flag is switched on for that pass and a forward hook copies
    ``layer.last_responsibilities[side]``; afterwards the flags, the stored responsibilities, the train/eval
    mode of every submodule and the hooks are all restored, even if the forward raises.

    Args:
        model: any ``nn.Module`` containing :class:`~gma_teach.GaussianMixtureAttention` layers, called as
            ``model(input_ids)``.
        input_ids: the model's input, e.g. token ids ``(B, N)``.
        layers: indices into :func:`gma_layers` (negative counts from the end, ``-1`` is the last layer);
            ``None`` means every GMA layer.
        side: ``"query"`` (how each token reads the slots) or ``"key"`` (how each token writes them).

    Returns:
        ``{layer_index: gamma}`` with ``gamma`` of shape ``(B, H, N, K)`` (float32 on the CPU, rows sum
        to 1), keyed by the non-negative layer index.
    """
    if side not in ("query", "key"):
        raise ValueError(f"side must be 'query' or 'key', got {side!r}")
    found = gma_layers(model)
    if not found:
        raise ValueError(f"model contains no GaussianMixtureAttention layer ({type(model).__name__})")
    if layers is None:
        chosen = list(range(len(found)))
    else:
        if isinstance(layers, int) or not all(isinstance(index, int) for index in layers):
            raise TypeError(f"layers must be a sequence of ints or None, got {layers!r}")
        chosen = []
        for index in layers:
            if not -len(found) <= index < len(found):
                raise ValueError(f"layers: index {index} out of range for a model with {len(found)} GMA layers")
            chosen.append(index % len(found))
        chosen = sorted(set(chosen))

    captured: dict[int, list[torch.Tensor]] = {index: [] for index in chosen}

    def hook_for(index: int):
        def hook(module, inputs, output):
            captured[index].append(module.last_responsibilities[side].detach().float().cpu())

        return hook

    saved_modes = {module: module.training for module in model.modules()}
    saved_layer_state = []
    handles = []
    try:
        for index in chosen:
            layer = found[index]
            saved_layer_state.append(
                (layer, getattr(layer, "store_responsibilities", False), getattr(layer, "last_responsibilities", None))
            )
            layer.store_responsibilities = True
            handles.append(layer.register_forward_hook(hook_for(index)))
        model.eval()
        with torch.no_grad():
            model(input_ids)
    finally:
        for handle in handles:
            handle.remove()
        for layer, flag, last in saved_layer_state:
            layer.store_responsibilities = flag
            layer.last_responsibilities = last
        for module, mode in saved_modes.items():
            module.training = mode

    result = {}
    for index, calls in captured.items():
        if len(calls) != 1:
            raise RuntimeError(
                f"GMA layer {index} ran {len(calls)} times in one forward pass; capture needs exactly one call"
            )
        result[index] = calls[0]
    return result


def head_averaged_tokens(gamma_q: torch.Tensor) -> torch.Tensor:
    """Average over heads and flatten batch and position: ``(B, H, N, K)`` -> ``(B * N, K)``.

    Row ``b * N + n`` belongs to token ``input_ids[b, n]``, i.e. the order of ``input_ids.reshape(-1)``.
    This is the paper's :math:`\\bar\\gamma^Q_{t,k} = \\frac1H \\sum_h \\gamma^Q_{t,h,k}`.
    """
    if not isinstance(gamma_q, torch.Tensor):
        raise TypeError(f"gamma_q must be a torch.Tensor, got {type(gamma_q).__name__}")
    if gamma_q.dim() != 4:
        raise ValueError(f"gamma_q must have shape (B, H, N, K), got {tuple(gamma_q.shape)}")
    return gamma_q.mean(dim=1).reshape(-1, gamma_q.shape[-1])


def lm_routing(model: nn.Module, val_ids: torch.Tensor, tokenizer, *, n_tokens: int, layer: int = -1,
               batch_size: int = 8) -> dict:
    """Read one GMA layer of a language model on the start of a validation stream.

    The stream is cut into rows of the model's context (``model.max_seq_len``) and the first
    ``ceil(n_tokens / context)`` rows are captured, ``batch_size`` rows per forward pass (the logits of a large
    vocabulary are the biggest tensor of the pass).

    Args:
        model: a language model with GMA layers and ``max_seq_len`` (e.g. :class:`~gma_teach.models.DecoderLM`).
        val_ids: the validation token stream ``(T_total,)`` int64.
        tokenizer: has ``token_strings(ids) -> list[str]``.
        n_tokens: how many tokens to analyse (rounded up to whole rows; at most the whole stream).
        layer: which GMA layer (index into :func:`gma_layers`; ``-1`` the last, as in the paper).
        batch_size: rows per forward pass.

    Returns:
        ``{"ids": (B, N), "gamma_q": (B, H, N, K), "resp": (B * N, K) head-averaged, "tokens": list[str],
        "categories": list[str], "layer": non-negative layer index}``.
    """
    if not isinstance(val_ids, torch.Tensor) or val_ids.dim() != 1:
        raise ValueError(f"val_ids must be a 1-D token stream, got {type(val_ids).__name__} "
                         f"{tuple(getattr(val_ids, 'shape', ()))}")
    _checks.positive_int("n_tokens", n_tokens)
    _checks.positive_int("batch_size", batch_size)
    context = int(model.max_seq_len)
    n_rows = val_ids.numel() // context
    if n_rows < 1:
        raise ValueError(f"val_ids has {val_ids.numel()} tokens, fewer than one context of {context}")
    rows = min(n_rows, math.ceil(n_tokens / context))
    parameter = next(model.parameters())
    ids = val_ids[: rows * context].view(rows, context).to(parameter.device)
    chunks = [capture_responsibilities(model, ids[start:start + batch_size], layers=[layer])
              for start in range(0, rows, batch_size)]
    index = next(iter(chunks[0]))
    gamma_q = torch.cat([chunk[index] for chunk in chunks], dim=0)
    tokens = tokenizer.token_strings(ids.flatten().cpu())
    return {"ids": ids, "gamma_q": gamma_q, "resp": head_averaged_tokens(gamma_q), "tokens": tokens,
            "categories": token_categories(tokens), "layer": index}
