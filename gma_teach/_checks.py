"""Input validation shared by the public functions: every error names the argument, what it got and what it needs."""
from __future__ import annotations

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


def positive_number(name: str, value) -> float:
    """Check that ``value`` is a real number > 0."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a positive number, got {type(value).__name__}")
    if not value > 0:
        raise ValueError(f"{name} must be > 0, got {value}")
    return float(value)


def positive_int(name: str, value) -> int:
    """Check that ``value`` is an integer >= 1."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return int(value)


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
