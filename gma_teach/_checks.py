"""Input validation shared by the public functions, with one rule.

A value of the wrong *type* raises ``TypeError``; a value of the right type but a wrong *value* (shape, range, an
unknown name) raises ``ValueError``. Every message names the caller's argument, says what it got and what it
needs. Callers pass the name their own caller used (``q``, not an internal ``x``).
"""
from __future__ import annotations

import math
import numbers

import torch


def tensor(name: str, value, *, min_rank: int = 1) -> torch.Tensor:
    """Check that ``value`` is a floating-point tensor of rank >= ``min_rank``."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if not value.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {value.dtype}")
    if value.dim() < min_rank:
        raise ValueError(f"{name} must have at least {min_rank} dimensions, got shape {tuple(value.shape)}")
    return value


def _real(name: str, value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be {what}, got {type(value).__name__}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be {what} (finite), got {value}")
    return float(value)


def number(name: str, value) -> float:
    """Check that ``value`` is a finite real number (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value}")
    return float(value)


def positive_number(name: str, value) -> float:
    """Check that ``value`` is a finite real number > 0 (``inf`` and ``nan`` are refused)."""
    value = _real(name, value, "a positive number")
    if not value > 0:
        raise ValueError(f"{name} must be > 0, got {value}")
    return value


def nonnegative_number(name: str, value) -> float:
    """Check that ``value`` is a finite real number >= 0."""
    value = _real(name, value, "a number >= 0")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    return value


def fraction(name: str, value) -> float:
    """Check that ``value`` is a real number in ``[0, 1)`` (a dropout rate, a share)."""
    value = _real(name, value, "a number in [0, 1)")
    if not 0 <= value < 1:
        raise ValueError(f"{name} must be in [0, 1), got {value}")
    return value


def integer(name: str, value, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """Check that ``value`` is an int (not a bool) in ``[minimum, maximum]`` (each bound optional)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if minimum is not None and maximum is not None and not minimum <= value <= maximum:
        raise ValueError(f"{name} must be an int in [{minimum}, {maximum}], got {value}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value}")
    return int(value)


def positive_int(name: str, value) -> int:
    """Check that ``value`` is an integer >= 1."""
    return integer(name, value, minimum=1)


def boolean(name: str, value) -> bool:
    """Check that ``value`` is a bool."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, got {type(value).__name__}")
    return value


def one_of(name: str, value, options) -> str:
    """Check that ``value`` is one of ``options`` (names)."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, one of {tuple(options)}, got {type(value).__name__}")
    if value not in options:
        raise ValueError(f"{name} must be one of {tuple(options)}, got {value!r}")
    return value


def bool_mask(name: str, value, shape: tuple, what: str = "(B, M)") -> torch.Tensor:
    """Check that ``value`` is a bool tensor of ``shape`` (described to the caller as ``what``)."""
    if not isinstance(value, torch.Tensor) or value.dtype != torch.bool:
        raise TypeError(f"{name} must be a bool tensor, got {getattr(value, 'dtype', type(value).__name__)}")
    if tuple(value.shape) != tuple(shape):
        raise ValueError(f"{name} must have shape {what} = {tuple(shape)}, got {tuple(value.shape)}")
    return value


def sequence(name: str, value, d_model: int) -> torch.Tensor:
    """Check that ``value`` is a floating-point ``(B, N, d_model)`` tensor."""
    tensor(name, value)
    if value.dim() != 3 or value.shape[-1] != d_model:
        raise ValueError(f"{name} must be (B, N, d_model={d_model}), got shape {tuple(value.shape)}")
    return value


def token(name: str, value, d_model: int) -> torch.Tensor:
    """Check that ``value`` is a floating-point ``(B, d_model)`` tensor (one decoding step)."""
    tensor(name, value)
    if value.dim() != 2 or value.shape[-1] != d_model:
        raise ValueError(f"{name} must be (B, d_model={d_model}), got shape {tuple(value.shape)}")
    return value


def heads(d_model, n_heads) -> tuple[int, int]:
    """Check ``d_model`` and ``n_heads`` (positive ints) and that the heads split the width evenly."""
    d_model, n_heads = positive_int("d_model", d_model), positive_int("n_heads", n_heads)
    if d_model % n_heads:
        raise ValueError(f"d_model must be divisible by n_heads, got d_model={d_model}, n_heads={n_heads}")
    return d_model, n_heads


def same_device(**tensors: torch.Tensor) -> None:
    """Check that all tensors live on one device."""
    devices = {name: t.device for name, t in tensors.items()}
    if len(set(devices.values())) > 1:
        listed = ", ".join(f"{name} on {device}" for name, device in devices.items())
        raise ValueError(f"tensors must be on one device, got {listed}")


def leading_shape(**tensors: torch.Tensor) -> torch.Size:
    """Broadcast the leading (batch/head) dims of tensors whose last two dims are (sequence, features)."""
    try:
        return torch.broadcast_shapes(*(t.shape[:-2] for t in tensors.values()))
    except RuntimeError:
        listed = ", ".join(f"{name} {tuple(t.shape)}" for name, t in tensors.items())
        raise ValueError(
            f"the leading (batch/head) dims must be equal or broadcastable, got {listed}"
        ) from None


def real_token_mask(name: str, value, shape: tuple, what: str = "(B, N)") -> torch.Tensor:
    """Check a padding mask in the package's convention: a bool tensor of ``shape``, ``True`` for real tokens.

    :class:`torch.nn.MultiheadAttention` uses the opposite convention (``True`` = padding). A batch padded to its
    longest sequence has at least one row without padding, which that convention writes all ``False``; in ours a row
    with no ``True`` entry has no real token at all. So a row without any ``True`` entry is refused: it is either a
    mask in torch's convention or a sequence with nothing to attend to. Rows that are all ``True`` (no padding) and
    padding anywhere in a row (at its start, its end or in between) are accepted. The check reads the mask (one
    reduction, a GPU synchronization); it is skipped while ``torch.compile`` traces.
    """
    bool_mask(name, value, shape, what)
    if value.numel() and not torch.compiler.is_compiling():
        has_real = value.any(dim=-1)
        if not bool(has_real.all()):
            row = int((~has_real).nonzero()[0, 0])
            raise ValueError(f"{name} marks real tokens with True (the opposite of torch.nn.MultiheadAttention); "
                             f"row {row} has no True entry (no real token). Pass ~mask if True marks padding")
    return value


def matching_dtype(name: str, value: torch.Tensor, parameter: torch.Tensor, owner: str = "the layer") -> None:
    """Check that ``value`` has the dtype of ``owner``'s ``parameter`` (outside autocast, where torch would fail with
    an error that does not name the argument). Under :func:`torch.autocast` for ``value``'s device the inputs may
    legitimately differ from the weights (autocast casts them), so nothing is checked there."""
    if value.dtype != parameter.dtype and not torch.is_autocast_enabled(value.device.type):
        raise TypeError(f"{name} has dtype {value.dtype} but {owner}'s parameters are {parameter.dtype}: pass "
                        f"{name}.to({parameter.dtype}), convert {owner} with .to({value.dtype}), or run under "
                        "torch.autocast")


def decoding_dtype(name: str, dtype) -> torch.dtype:
    """Check that a decoding state's ``dtype`` is float32 or float64. A half-precision state accumulates every token
    into running sums rounded to 8 or 11 bits, so it drifts over a long generation; it is refused."""
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"{name} must be a torch.dtype, got {type(dtype).__name__}")
    if dtype not in (torch.float32, torch.float64):
        raise ValueError(f"{name} must be torch.float32 or torch.float64 (the decoding state accumulates every token "
                         f"and drifts in half precision), got {dtype}")
    return dtype


def batch_size(name: str, value) -> int:
    """Check a batch size: an int >= 0 (a batch of 0 is an empty batch, as in the forward passes)."""
    return integer(name, value, minimum=0)
