"""The work model: what one call costs (:class:`Work`), the pieces of a chapter (:class:`Point`), their time on a
device profile (:func:`point_seconds`), and the work of the book's operations, float32, one call each: an attention
form, a mixing block forward + backward, a training run.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import SimpleNamespace

from .. import mixers
from ..layer import DEFAULT_COMPONENTS
from ..mixers import GMA_TENSORS_AT_PEAK, SOFTMAX_FLOPS_PER_SCORE  # kept with the mixers' cost entries
from ._devices import FLOAT32, HOST, PROFILES, DeviceProfile, GiB


@dataclass
class Work:
    """The cost of one call: ``flops``, ``bytes`` moved, eager ``ops``, the ``peak`` bytes held (beyond its inputs)
    and ``seconds`` of pure-Python work measured directly (a data generator). ``work * n`` is ``n`` calls (same
    peak); ``a + b`` runs both (the larger peak)."""

    flops: float = 0.0
    bytes: float = 0.0
    ops: float = 0.0
    peak: float = 0.0
    seconds: float = 0.0

    def __add__(self, other: Work) -> Work:
        return Work(self.flops + other.flops, self.bytes + other.bytes, self.ops + other.ops,
                    max(self.peak, other.peak), self.seconds + other.seconds)

    def __mul__(self, calls: float) -> Work:
        return Work(self.flops * calls, self.bytes * calls, self.ops * calls, self.peak, self.seconds * calls)


@dataclass
class Point:
    """One piece of a chapter: a sweep point, a training run, a data generation.

    ``on``: ``"device"`` or ``"host"`` (CPU-side work, run by :data:`HOST` beside a GPU); ``single_thread``: the
    chapter pins one CPU thread for it; ``amp``: mixed precision on a GPU; ``cached``: reused from an earlier chapter
    when present (listed, not counted in the chapter's time).
    """

    label: str
    work: Work
    on: str = "device"
    single_thread: bool = False
    amp: bool = False
    cached: bool = False


@dataclass
class PointPrediction:
    """A point on a profile: its ``seconds`` and ``peak_bytes``, and whether that peak ``fits`` the budget."""

    label: str
    seconds: float
    peak_bytes: float
    fits: bool
    on: str
    cached: bool = False


@dataclass
class Prediction:
    """A chapter (or an experiment run) at a scale on a device profile.

    Attributes:
        chapter, scale, profile: what was predicted, on which :class:`DeviceProfile` name.
        peak_bytes: the largest peak of any point on the device (the GPU's memory on a GPU).
        host_peak_bytes: the largest peak of the points on the host CPU beside a GPU (0 on a CPU).
        seconds: the chapter's fixed cost (a page's, :data:`PAGE_FIXED_SECONDS`) plus every point not ``cached``.
        points: one :class:`PointPrediction` each.
    """

    chapter: str
    scale: str
    profile: str
    peak_bytes: float
    host_peak_bytes: float
    seconds: float
    points: list = field(default_factory=list)

    def summary(self) -> str:
        """One line: time in minutes and peak memory in GiB."""
        return (f"{self.chapter} at {self.scale} on {self.profile}: {self.seconds / 60:.1f} min, "
                f"peak {self.peak_bytes / GiB:.2f} GiB")


def point_seconds(point: Point, device: DeviceProfile) -> float:
    """The time of ``point`` on ``device`` (its host CPU for host points): FLOPs at the matrix-product rate, plus
    bytes at the bandwidth, plus a fixed cost per eager op, plus the point's directly measured seconds."""
    target = PROFILES[HOST] if point.on == "host" and device.is_cuda else device
    flops_rate = target.amp_flops_per_second if point.amp else target.flops_per_second
    bandwidth = target.bytes_per_second
    if point.single_thread and not target.is_cuda:
        flops_rate, bandwidth = flops_rate / target.cores, bandwidth / target.cores
    work = point.work
    return work.flops / flops_rate + work.bytes / bandwidth + work.ops * target.op_seconds + work.seconds


ELEMENTWISE_PASSES_SOFTMAX = 6  # write scores, scale (read + write), softmax (read + write), read for A V


def attention_work(form: str, batch_size: int, n_heads: int, seq_len: int, d_route: int, d_value: int,
                   n_components: int = 0, *, chunk_size: int = 64, backward: bool = False) -> Work:
    """One call of an attention form on ``(B, H, N, d)`` inputs, float32.

    ``form``: ``"softmax"`` (eager, two ``N x N`` matrices), ``"sdpa"`` (fused: no ``N x N`` matrix), ``"gma_naive"``
    (the ``N x N`` affinity), ``"gma_naive_causal"`` (plus the mask: three), ``"gma_linear"`` (K slots),
    ``"gma_cumsum"`` (the ``(B, H, N, K, d_v)`` prefix sums), ``"gma_chunked"`` (chunk states only).
    ``backward``: forward + backward (three times the FLOPs and the bytes; the peak of the measured sweeps).
    """
    b_h, n, k = batch_size * n_heads, seq_len, n_components
    square = b_h * n * n
    io_bytes = FLOAT32 * b_h * n * (2 * d_route + 2 * d_value)
    responsibilities = 2 * (2 * b_h * n * k * 2 * d_route + 10 * b_h * n * k)  # GEMM-form logits + softmax, q and k
    if form == "softmax":
        work = Work(2 * square * (d_route + d_value) + SOFTMAX_FLOPS_PER_SCORE * square,
                    ELEMENTWISE_PASSES_SOFTMAX * FLOAT32 * square + io_bytes, 6, 2 * FLOAT32 * square)
    elif form == "sdpa":
        work = Work(2 * square * (d_route + d_value) + SOFTMAX_FLOPS_PER_SCORE * square, 2 * io_bytes, 3,
                    2 * FLOAT32 * b_h * n * (d_route + d_value))
    elif form in ("gma_naive", "gma_naive_causal"):
        matrices = 3 if form == "gma_naive_causal" else 2
        work = Work(responsibilities + 2 * square * (k + d_value) + 3 * square,
                    (2 + 2 * matrices) * FLOAT32 * square + io_bytes, 20, matrices * FLOAT32 * square)
    elif form == "gma_linear":
        work = Work(responsibilities + 4 * b_h * n * k * d_value + 2 * b_h * n * k,
                    10 * FLOAT32 * b_h * n * k + io_bytes, 25, GMA_TENSORS_AT_PEAK * FLOAT32 * b_h * n * k)
    elif form == "gma_cumsum":
        prefix = b_h * n * k * d_value
        work = Work(responsibilities + 6 * prefix, 5 * FLOAT32 * prefix + io_bytes, 25, 2 * FLOAT32 * prefix)
    elif form == "gma_chunked":
        n_chunks = math.ceil(n / chunk_size)
        states = FLOAT32 * b_h * n_chunks * k * (d_value + 1)
        work = Work(responsibilities + 4 * b_h * n * k * d_value + 2 * b_h * n * chunk_size * (k + d_value),
                    12 * FLOAT32 * b_h * n * k + 3 * states + io_bytes, 40,
                    GMA_TENSORS_AT_PEAK * FLOAT32 * b_h * n * k + 2 * states)
    else:
        raise ValueError(f"unknown attention form {form!r}")
    if backward:
        work = Work(3 * work.flops, 3 * work.bytes, 3 * work.ops, work.peak * 1.5)
    return work


def block_cost(mixer: str, *, on_cuda: bool = True):
    """The cost-model entry of ``mixer`` (:class:`gma_teach.mixers.BlockCost`, registered with the mixer); with
    ``on_cuda=False``, the entry of the path it runs on a CPU where it has one of its own (``BlockCost.on_cpu``)."""
    found = mixers.entry(mixer).cost
    if found is None:
        raise ValueError(f"the cost model has no entry for mixer {mixer!r}; it knows "
                         f"{[name for name in mixers.registered_names() if mixers.entry(name).cost is not None]}")
    return found if on_cuda or found.on_cpu is None else found.on_cpu


def block_sizes(batch_size, seq_len, d_model, n_heads, n_components, n_features, linformer_k) -> SimpleNamespace:
    """The sizes a :class:`gma_teach.mixers.BlockCost` reads (``sizes.b``, ``sizes.n``, ``sizes.d``, ...)."""
    return SimpleNamespace(b=batch_size, n=seq_len, d=d_model, h=n_heads, n_components=n_components,
                           n_features=n_features, linformer_k=linformer_k)


def mixer_flops(mixer: str, batch_size: int, seq_len: int, d_model: int, n_heads: int, *,
                n_components: int = DEFAULT_COMPONENTS,
                n_features: int = 256, linformer_k: int = 256, causal: bool = False) -> float:
    """Forward FLOPs of a mixer's core (without its four projections) on ``(B, N, D)``: its registered
    :class:`~gma_teach.mixers.BlockCost`, with what its causal form adds (``causal_flops``) when ``causal``."""
    entry = block_cost(mixer)
    sizes = block_sizes(batch_size, seq_len, d_model, n_heads, n_components, n_features, linformer_k)
    return entry.flops(sizes) + (entry.causal_flops(sizes) if causal and entry.causal_flops is not None else 0.0)


def mixer_peak_values(mixer: str, batch_size: int, seq_len: int, d_model: int, n_heads: int, *, n_components: int,
                      n_features: int, linformer_k: int, on_cuda: bool = True) -> float:
    """Float32 values a mixing block holds at its forward + backward peak (on a CPU with ``on_cuda=False``: the
    path the mixer runs there, GMA's lean one)."""
    entry = block_cost(mixer, on_cuda=on_cuda)
    sizes = block_sizes(batch_size, seq_len, d_model, n_heads, n_components, n_features, linformer_k)
    return entry.peak_per_token_width * batch_size * seq_len * d_model + entry.extra_peak_values(sizes)


def block_work(mixer: str, *, d_model: int, n_heads: int, seq_len: int, batch_size: int = 1,
               n_components: int = DEFAULT_COMPONENTS,
               n_features: int = 256, linformer_k: int = 256, on_cuda: bool = True) -> Work:
    """One forward + backward call of a mixing block (chapter 8's protocol, :func:`gma_teach.profiling.profile_mixer`):
    four ``D x D`` projections (24 B N D^2 FLOPs with the backward) and three times the mixer's forward; its peak
    that of the path the mixer runs on a CUDA device, or on a CPU with ``on_cuda=False`` (GMA's lean path keeps
    less: :class:`gma_teach.mixers.BlockCost`)."""
    sizes = dict(n_components=n_components, n_features=n_features, linformer_k=linformer_k)
    core = mixer_flops(mixer, batch_size, seq_len, d_model, n_heads, **sizes)
    tokens = batch_size * seq_len
    peak = FLOAT32 * mixer_peak_values(mixer, batch_size, seq_len, d_model, n_heads, **sizes, on_cuda=on_cuda)
    streamed = 3 * peak  # every saved value is written, read back and its gradient written
    if mixer == "softmax":  # and eight more passes over the N x N matrices (scale, softmax, their backward)
        streamed += 8 * FLOAT32 * batch_size * n_heads * seq_len**2
    return Work(24 * tokens * d_model**2 + 3 * core, streamed, block_cost(mixer, on_cuda=on_cuda).ops, peak)


def training_work(*, n_steps: int, batch_size: int, seq_len: int, d_model: int, n_layers: int, d_ff: int,
                  n_heads: int, mixer: str, vocab_size: int = 0, output_size: int = 0, n_eval_tokens: int = 0,
                  n_components: int = DEFAULT_COMPONENTS, n_features: int = 64, linformer_k: int = 64) -> Work:
    """A training run: ``6 x parameters x tokens`` FLOPs (the output layer of ``vocab_size`` or ``output_size``
    columns included) plus three times the mixers' forward FLOPs, forward-only evaluation of ``n_eval_tokens``;
    peak: weights, gradients and AdamW moments (16 bytes a parameter) plus the activations of a batch."""
    params = n_layers * (4 * d_model**2 + 2 * d_model * d_ff) + d_model * (vocab_size + output_size)
    sizes = dict(n_components=n_components, n_features=n_features, linformer_k=linformer_k)
    tokens = n_steps * batch_size * seq_len
    mixer_per_sequence = mixer_flops(mixer, 1, seq_len, d_model, n_heads, **sizes)
    flops_per_token = 6 * params + 3 * n_layers * mixer_per_sequence / seq_len
    flops = tokens * flops_per_token + n_eval_tokens * flops_per_token / 3
    activations = n_layers * (FLOAT32 * (mixer_peak_values(mixer, batch_size, seq_len, d_model, n_heads, **sizes)
                                         + batch_size * seq_len * (8 * d_model + 2 * d_ff)))
    logits = 3 * FLOAT32 * batch_size * seq_len * vocab_size
    peak = 16 * params + activations + logits
    steps = n_steps + n_eval_tokens / max(batch_size * seq_len, 1) / 3
    ops_per_step = 3 * n_layers * (30 + block_cost(mixer).ops) + 60
    return Work(flops, 3 * activations * steps, ops_per_step * steps, peak)
