"""A Mamba-1 selective state-space block (Gu and Dao, 2023) in pure PyTorch: the recurrent comparator of chapter 8.

Built like every other mixer, by name: ``gma_teach.make_mixer("mamba", d_model, n_heads)``. The selective scan
has a sequential spec (:func:`selective_scan_sequential`) and a chunked parallel form
(:func:`selective_scan_chunked`); on CUDA with ``mamba_ssm`` installed, the fused kernel runs instead.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from . import _checks
from .mixing import DecodingState


@dataclass
class MambaState(DecodingState):
    """Decoding state of :class:`MambaMixer`: the last ``d_conv - 1`` conv inputs ``(B, d_inner, d_conv - 1)`` and
    the SSM state ``(B, d_inner, d_state)``: constant size."""

    conv: torch.Tensor
    ssm: torch.Tensor


def selective_scan_sequential(x, dt, a, b, c, d):
    """The selective scan as a loop (the spec): ``h_t = exp(dt_t A) h_{t-1} + dt_t B_t x_t``,
    ``y_t = C_t . h_t + D x_t``.

    Args:
        x, dt: ``(B, L, D)``; a: ``(D, S)`` (negative); b, c: ``(B, L, S)``; d: ``(D,)``.

    Returns:
        ``y (B, L, D)``.
    """
    h = x.new_zeros(x.shape[0], x.shape[2], a.shape[1])
    ys = []
    for t in range(x.shape[1]):
        h = torch.exp(dt[:, t, :, None] * a) * h + (dt[:, t] * x[:, t])[..., None] * b[:, t, None, :]
        ys.append((h * c[:, t, None, :]).sum(-1))
    return torch.stack(ys, dim=1) + x * d


def selective_scan_chunked(x, dt, a, b, c, d, *, chunk_size=32, max_log_decay=60.0):
    """The same scan, parallel inside chunks of ``chunk_size`` tokens, sequential across chunks.

    Inside a chunk, with ``L_t = sum_{s<=t} dt_s A`` (log decay from the chunk start),
    ``h_t = exp(L_t) (h_0 + sum_{s<=t} exp(-L_s) dt_s B_s x_s)``: one cumsum. Each rounding error stays relative
    to ``|dt B x|``; ``exp(-L_s)`` must not overflow, so a chunk whose total log decay exceeds ``max_log_decay``
    is split in halves (recursively; a chunk of one token is the exact recurrence). Memory holds the states
    ``(B, L, D, S)``, which is what a fused kernel (``mamba_ssm``) avoids.
    """
    _checks.positive_int("chunk_size", chunk_size)
    h = x.new_zeros(x.shape[0], x.shape[2], a.shape[1])
    ys = []
    for start in range(0, x.shape[1], chunk_size):
        part = slice(start, start + chunk_size)
        y, h = _scan_chunk(dt[:, part], dt[:, part] * x[:, part], a, b[:, part], c[:, part], h, max_log_decay)
        ys.append(y)
    return torch.cat(ys, dim=1) + x * d


def _scan_chunk(dt, dt_x, a, b, c, h0, max_log_decay):
    """One chunk of :func:`selective_scan_chunked`: returns ``(y (B, C, D), h_last (B, D, S))``."""
    log_decay = torch.cumsum(dt[..., None] * a, dim=1)  # (B, C, D, S), non-increasing in t
    length = dt.shape[1]
    if length > 1 and float(-log_decay[:, -1].detach().min()) > max_log_decay:
        half = length // 2
        y1, h = _scan_chunk(dt[:, :half], dt_x[:, :half], a, b[:, :half], c[:, :half], h0, max_log_decay)
        y2, h = _scan_chunk(dt[:, half:], dt_x[:, half:], a, b[:, half:], c[:, half:], h, max_log_decay)
        return torch.cat([y1, y2], dim=1), h
    inputs = dt_x[..., None] * b[:, :, None, :]  # (B, C, D, S)
    states = torch.exp(log_decay) * (h0[:, None] + torch.cumsum(torch.exp(-log_decay) * inputs, dim=1))
    y = (states * c[:, :, None, :]).sum(-1)
    return y, states[:, -1]


class MambaMixer(nn.Module):
    """A Mamba-1 block (Gu and Dao): in-projection to ``x, z`` of width ``d_inner = expand * d_model``, causal
    depthwise conv, input-dependent ``dt, B, C``, selective scan, gate ``silu(z)``, out-projection.

    Causal by construction (``causal=False`` gives the same mixer: it reads left to right); ``n_heads`` is
    accepted for the common interface and unused. On CUDA with ``mamba_ssm`` installed the scan runs in its fused
    kernel; otherwise :func:`selective_scan_chunked`.
    """

    def __init__(self, d_model, n_heads=1, *, causal=True, d_state=16, d_conv=4, expand=2, dt_rank=None,
                 chunk_size=32):
        super().__init__()
        _checks.heads(d_model, n_heads)
        for name, value in (("d_state", d_state), ("d_conv", d_conv), ("expand", expand), ("chunk_size", chunk_size)):
            _checks.positive_int(name, value)
        if dt_rank is not None:
            _checks.positive_int("dt_rank", dt_rank)
        _checks.boolean("causal", causal)
        self.d_model, self.n_heads, self.causal = d_model, n_heads, bool(causal)
        self.d_inner, self.d_state, self.d_conv, self.chunk_size = expand * d_model, d_state, d_conv, chunk_size
        self.dt_rank = dt_rank if dt_rank is not None else math.ceil(d_model / 16)
        self.in_proj = nn.Linear(d_model, 2 * self.d_inner)
        self.conv = nn.Conv1d(self.d_inner, self.d_inner, d_conv, groups=self.d_inner, padding=d_conv - 1)
        self.x_proj = nn.Linear(self.d_inner, self.dt_rank + 2 * d_state, bias=False)
        self.dt_proj = nn.Linear(self.dt_rank, self.d_inner)
        self.a_log = nn.Parameter(torch.log(torch.arange(1, d_state + 1, dtype=torch.float32)).repeat(self.d_inner, 1))
        self.skip = nn.Parameter(torch.ones(self.d_inner))
        self.out_proj = nn.Linear(self.d_inner, d_model)
        with torch.no_grad():  # dt initialized log-uniformly in [1e-3, 1e-1], as in the reference implementation
            dt = torch.exp(torch.rand(self.d_inner) * (math.log(0.1) - math.log(1e-3)) + math.log(1e-3))
            self.dt_proj.bias.copy_(dt + torch.log(-torch.expm1(-dt)))

    def _ssm_inputs(self, u):
        """``u (B, L, d_inner)`` after conv and silu -> ``dt (B, L, D), a (D, S), b, c (B, L, S)``."""
        dt_low, b, c = self.x_proj(u).split([self.dt_rank, self.d_state, self.d_state], dim=-1)
        return F.softplus(self.dt_proj(dt_low)), -torch.exp(self.a_log.float()), b, c

    def forward(self, x, *, sequential=False):
        """``x (B, L, d_model) -> (B, L, d_model)``; ``sequential=True`` uses the loop spec."""
        _checks.sequence("x", x, self.d_model)
        length = x.shape[1]
        u, z = self.in_proj(x).chunk(2, dim=-1)
        u = F.silu(self.conv(u.transpose(1, 2))[..., :length].transpose(1, 2))
        dt, a, b, c = self._ssm_inputs(u)
        if _mamba_kernel_available(x) and not sequential:
            # optional dependency: mamba_ssm's CUDA scan
            from mamba_ssm.ops.selective_scan_interface import selective_scan_fn

            y = selective_scan_fn(u.transpose(1, 2).contiguous(), dt.transpose(1, 2).contiguous(), a,
                                  b.transpose(1, 2).contiguous(), c.transpose(1, 2).contiguous(),
                                  self.skip.float()).transpose(1, 2)
        else:
            scan = selective_scan_sequential if sequential else selective_scan_chunked
            options = {} if sequential else {"chunk_size": self.chunk_size}
            with torch.autocast(device_type=x.device.type, enabled=False):
                dtype = torch.promote_types(u.dtype, torch.float32)
                y = scan(u.to(dtype), dt.to(dtype), a.to(dtype), b.to(dtype), c.to(dtype), self.skip.to(dtype),
                         **options)
        return self.out_proj(y.to(z.dtype) * F.silu(z))

    def init_state(self, batch_size):
        """Zero conv buffer and SSM state."""
        weight = self.in_proj.weight
        return MambaState(weight.new_zeros(batch_size, self.d_inner, self.d_conv - 1),
                          weight.new_zeros(batch_size, self.d_inner, self.d_state))

    def step(self, x_t, state):
        """One decoding step: ``x_t (B, d_model)`` -> ``(y_t (B, d_model), state)``."""
        _checks.token("x_t", x_t, self.d_model)
        u, z = self.in_proj(x_t).chunk(2, dim=-1)
        window = torch.cat([state.conv, u[..., None]], dim=-1)  # (B, D, d_conv)
        u = F.silu((window * self.conv.weight[:, 0]).sum(-1) + self.conv.bias)
        dt, a, b, c = self._ssm_inputs(u[:, None])
        dt, b, c = dt[:, 0], b[:, 0], c[:, 0]
        h = torch.exp(dt[..., None] * a) * state.ssm + (dt * u)[..., None] * b[:, None, :]
        y = (h * c[:, None, :]).sum(-1) + u * self.skip
        return self.out_proj(y * F.silu(z)), MambaState(window[..., 1:], h)


def _mamba_kernel_available(x):
    if not x.is_cuda:
        return False
    try:
        import mamba_ssm.ops.selective_scan_interface  # noqa: F401  (optional dependency: is it installed?)
    except ImportError:
        return False
    return True
