"""A cost model behind every preset: each chapter's predicted time and peak memory on a named device.

Every chapter is a list of *points* -- one timed sweep point, one training run, one data generation -- each with a
count of floating-point operations, bytes moved through memory, eager PyTorch operations (each costs a fixed
dispatch/launch time) and the peak bytes it holds. A device profile turns a point into seconds::

    seconds = flops / flop_rate + bytes / bandwidth + ops * op_seconds

(a sum, not a max: the FLOPs are the matrix products' and the bytes the elementwise passes', separate operations that
do not overlap), and a chapter's time is the sum over its points plus its fixed cost (kernel start, imports,
figures).
The formulas are deliberately simple and each is written next to the work it describes:

* eager softmax attention holds two ``(B, H, N, N)`` float32 matrices (scores and weights) at its peak, forward or
  forward + backward (measured: 2.03 matrices in ``profiling_cpu_small.json``);
* GMA holds a few ``(B, H, N, K)`` tensors (measured: 3.2 with the backward) and never an ``N x N`` one;
* training costs ``6 x parameters x tokens`` FLOPs plus three times the mixer's forward FLOPs, and holds the
  weights, gradients and AdamW moments (16 bytes a parameter) plus the activations of every layer;
* the recall model of chapter 12 and the recall study is small enough that its activations stay in the CPU's caches:
  its FLOPs and ops alone predict the recorded one-core runs at 0.66-1.07 of their time;
* Triton's interpreter (chapters 7 and 7b on a CPU) costs a fixed time per launch and per block step of a program,
  whatever the FLOPs.

The CPU profile ``"cpu-2core"`` is calibrated on recorded measurements (the profiling sweep and the LM runs in
:func:`gma_teach.measure.results_folder`); :func:`compare_with_record` sets the model beside any record. It predicts
the recorded GMA ListOps runs at 0.6 of their time, but eager softmax's ListOps runs at 0.3: their ``N x N``
products over 16-wide heads, with a padding mask, run far below the matrix-product rate the model assumes. A
record's load matters as much as its hardware: two OpenMP threads on an oversubscribed machine stall at every
parallel region, so a run that shares the machine uses one thread. The GPU profiles are spec-sheet rates times fixed
efficiencies until a GPU record exists.

API: :func:`predict` (a chapter of :data:`CHAPTERS` -- ``"ch01"`` ... ``"ch12"``, ``"ch07b"`` --, another page the
book executes, :data:`PAGES` -- ``"answers01"`` ... ``"answers12"``, ``"statistics_primer"``, ``"part_iv_findings"``
--, or one run of an experiment, ``"listops"``, ``"text"``, ``"lm"``, ``"recall"``, at a scale on a device
profile), :func:`fits` (within the profile's memory and a time budget), :func:`point_fits` (would one sweep point
fit: for skipping it before it runs out of memory), :func:`current_profile` (the profile closest to this machine).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, replace
from types import SimpleNamespace

import torch

from . import mixers
from .environment import SCALES, preset
from .mixers import GMA_TENSORS_AT_PEAK, SOFTMAX_FLOPS_PER_SCORE  # kept with the mixers' cost entries

FLOAT32 = 4
GiB = 2**30


# ----------------------------------------------------------------------------------------------------------------
# Device profiles
# ----------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DeviceProfile:
    """What a device can do, in the model's four numbers (sustained, not peak) plus its memory budget.

    Attributes:
        name: the profile's key in ``PROFILES``.
        description: the hardware in words, with the spec-sheet numbers the rates come from.
        memory_budget_bytes: the peak memory a chapter may use (GPU memory on a GPU, RAM on a CPU).
        flops_per_second: sustained float32 rate of large matrix products, all cores together.
        amp_flops_per_second: sustained rate under mixed precision (training on a GPU); ``flops_per_second`` where
            there is none.
        bytes_per_second: sustained memory bandwidth.
        op_seconds: fixed cost of one eager PyTorch operation (Python dispatch, and the kernel launch on a GPU).
        cores: CPU cores (a point marked single-threaded gets ``1 / cores`` of the CPU rates).
        is_cuda: a CUDA GPU; host-side work (data generation, figures) then runs on :data:`HOST`.
        capability: CUDA compute capability ``(major, minor)``, ``None`` on a CPU.
    """

    name: str
    description: str
    memory_budget_bytes: float
    flops_per_second: float
    amp_flops_per_second: float
    bytes_per_second: float
    op_seconds: float
    cores: int = 1
    is_cuda: bool = False
    capability: tuple | None = None


# Efficiencies of the GPU profiles: the sustained fraction of the spec-sheet numbers an eager PyTorch program gets on
# large operations (conservative; to be replaced by a GPU record's calibration).
GPU_FLOP_EFFICIENCY = 0.5
GPU_AMP_EFFICIENCY = 0.3
GPU_BANDWIDTH_EFFICIENCY = 0.7
GPU_OP_SECONDS = 15e-6


def _gpu(name, description, budget_gib, fp32_tflops, amp_tflops, bandwidth_gbs, capability):
    return DeviceProfile(name, description, budget_gib * GiB, GPU_FLOP_EFFICIENCY * fp32_tflops * 1e12,
                         GPU_AMP_EFFICIENCY * amp_tflops * 1e12, GPU_BANDWIDTH_EFFICIENCY * bandwidth_gbs * 1e9,
                         GPU_OP_SECONDS, cores=1, is_cuda=True, capability=capability)


PROFILES: dict[str, DeviceProfile] = {
    # Fitted (least squares on log time) to the recorded CPU runs: the chapter 8 sweep (one thread, every mixer but
    # Mamba, whose constant is its own) and the three LM runs (two threads): 40 GFLOP/s a core on float32 matrix
    # products, 2 GB/s a core for elementwise passes over fresh tensors, 5 us an eager op. Every one of those 38
    # measurements is within a factor 1.9 of the model (tests/test_cost.py). A laptop's 8 GiB for a chapter.
    "cpu-2core": DeviceProfile("cpu-2core", "a 2-core laptop or CI CPU (AVX2), 8 GiB for a chapter",
                               8 * GiB, 80e9, 80e9, 4e9, 5e-6, cores=2),
    "t4": _gpu("t4", "NVIDIA T4: 16 GB (12 GiB budget), sm_75, 8.1 TFLOP/s fp32, 65 TFLOP/s fp16, 320 GB/s",
               12, 8.1, 65, 320, (7, 5)),
    "a100": _gpu("a100", "NVIDIA A100 80 GB: sm_80, 19.5 TFLOP/s fp32, 312 TFLOP/s bf16, 2.0 TB/s",
                 72, 19.5, 312, 2039, (8, 0)),
    "h100": _gpu("h100", "NVIDIA H100 SXM 80 GB: sm_90, 67 TFLOP/s fp32, 990 TFLOP/s bf16 dense, 3.35 TB/s",
                 72, 67, 990, 3350, (9, 0)),
    "h200": _gpu("h200", "NVIDIA H200 141 GB: sm_90, 67 TFLOP/s fp32, 990 TFLOP/s bf16 dense, 4.8 TB/s",
                 128, 67, 990, 4800, (9, 0)),
}
HOST = "cpu-2core"
"""The profile of the CPU beside a GPU (a Colab VM has two vCPUs); it runs data generation, float64 demos, figures."""

BUDGET_SECONDS = {"tiny": 120.0, "small": 600.0, "medium": 600.0}
"""Time a chapter may take at each scale on its target profile (:data:`TARGET_PROFILE`); ``full`` has none."""
TARGET_PROFILE = {"tiny": "cpu-2core", "small": "cpu-2core", "medium": "t4", "full": "h200"}
"""The device each scale is sized for."""


def profile(name_or_profile) -> DeviceProfile:
    """The :class:`DeviceProfile` named ``name_or_profile`` (a key of ``PROFILES``), or the profile itself."""
    if isinstance(name_or_profile, DeviceProfile):
        return name_or_profile
    if not isinstance(name_or_profile, str):
        raise TypeError(f"device_profile must be a profile name or a DeviceProfile, got "
                        f"{type(name_or_profile).__name__}")
    if name_or_profile not in PROFILES:
        raise ValueError(f"device_profile must be one of {sorted(PROFILES)}, got {name_or_profile!r}")
    return PROFILES[name_or_profile]


def current_profile() -> DeviceProfile:
    """A profile for this machine: on a CUDA GPU the listed GPU of the nearest memory size with this GPU's memory
    (budget: 85% of it, 12 GiB on a 16 GB card); on a CPU ``"cpu-2core"`` with this machine's core count."""
    if not torch.cuda.is_available():
        cores = os.cpu_count() or 2
        base = PROFILES["cpu-2core"]
        per_core = base.flops_per_second / base.cores
        return replace(base, name="cpu", description=f"this CPU ({cores} logical cores)", cores=cores,
                       flops_per_second=per_core * cores, amp_flops_per_second=per_core * cores,
                       bytes_per_second=base.bytes_per_second / base.cores * cores)
    total = torch.cuda.get_device_properties(torch.device("cuda")).total_memory
    capability = tuple(torch.cuda.get_device_capability())
    gpus = [p for p in PROFILES.values() if p.is_cuda]
    nearest = min(gpus, key=lambda p: (p.capability != capability, abs(math.log(p.memory_budget_bytes / 0.85 / total))))
    budget = 12 * GiB if total < 17e9 else 0.85 * total
    return replace(nearest, name=f"cuda ({nearest.name}-like)", memory_budget_bytes=budget)


# ----------------------------------------------------------------------------------------------------------------
# Points
# ----------------------------------------------------------------------------------------------------------------
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


# ----------------------------------------------------------------------------------------------------------------
# The work of the book's operations (float32, one call)
# ----------------------------------------------------------------------------------------------------------------
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


def _block_cost(mixer: str):
    """The cost-model entry of ``mixer`` (:class:`gma_teach.mixers.BlockCost`, registered with the mixer)."""
    found = mixers.entry(mixer).cost
    if found is None:
        raise ValueError(f"the cost model has no entry for mixer {mixer!r}; it knows "
                         f"{[name for name in mixers.registered_names() if mixers.entry(name).cost is not None]}")
    return found


def _sizes(batch_size, seq_len, d_model, n_heads, n_components, n_features, linformer_k) -> SimpleNamespace:
    return SimpleNamespace(b=batch_size, n=seq_len, d=d_model, h=n_heads, n_components=n_components,
                           n_features=n_features, linformer_k=linformer_k)


def mixer_flops(mixer: str, batch_size: int, seq_len: int, d_model: int, n_heads: int, *, n_components: int = 64,
                n_features: int = 256, linformer_k: int = 256) -> float:
    """Forward FLOPs of a mixer's core (without its four projections) on ``(B, N, D)``: its registered
    :class:`~gma_teach.mixers.BlockCost`."""
    return _block_cost(mixer).flops(_sizes(batch_size, seq_len, d_model, n_heads, n_components, n_features,
                                           linformer_k))


def _mixer_peak_values(mixer: str, batch_size: int, seq_len: int, d_model: int, n_heads: int, *, n_components: int,
                       n_features: int, linformer_k: int) -> float:
    """Float32 values a mixing block holds at its forward + backward peak."""
    entry = _block_cost(mixer)
    sizes = _sizes(batch_size, seq_len, d_model, n_heads, n_components, n_features, linformer_k)
    return entry.peak_per_token_width * batch_size * seq_len * d_model + entry.extra_peak_values(sizes)


def block_work(mixer: str, *, d_model: int, n_heads: int, seq_len: int, batch_size: int = 1, n_components: int = 64,
               n_features: int = 256, linformer_k: int = 256) -> Work:
    """One forward + backward call of a mixing block (chapter 8's protocol, :func:`gma_teach.profiling.profile_mixer`):
    four ``D x D`` projections (24 B N D^2 FLOPs with the backward) and three times the mixer's forward."""
    sizes = dict(n_components=n_components, n_features=n_features, linformer_k=linformer_k)
    core = mixer_flops(mixer, batch_size, seq_len, d_model, n_heads, **sizes)
    tokens = batch_size * seq_len
    peak = FLOAT32 * _mixer_peak_values(mixer, batch_size, seq_len, d_model, n_heads, **sizes)
    streamed = 3 * peak  # every saved value is written, read back and its gradient written
    if mixer == "softmax":  # and eight more passes over the N x N matrices (scale, softmax, their backward)
        streamed += 8 * FLOAT32 * batch_size * n_heads * seq_len**2
    return Work(24 * tokens * d_model**2 + 3 * core, streamed, _block_cost(mixer).ops, peak)


def training_work(*, n_steps: int, batch_size: int, seq_len: int, d_model: int, n_layers: int, d_ff: int,
                  n_heads: int, mixer: str, vocab_size: int = 0, output_size: int = 0, n_eval_tokens: int = 0,
                  n_components: int = 64, n_features: int = 64, linformer_k: int = 64) -> Work:
    """A training run: ``6 x parameters x tokens`` FLOPs (the output layer of ``vocab_size`` or ``output_size``
    columns included) plus three times the mixers' forward FLOPs, forward-only evaluation of ``n_eval_tokens``;
    peak: weights, gradients and AdamW moments (16 bytes a parameter) plus the activations of a batch."""
    params = n_layers * (4 * d_model**2 + 2 * d_model * d_ff) + d_model * (vocab_size + output_size)
    sizes = dict(n_components=n_components, n_features=n_features, linformer_k=linformer_k)
    tokens = n_steps * batch_size * seq_len
    mixer_per_sequence = mixer_flops(mixer, 1, seq_len, d_model, n_heads, **sizes)
    flops_per_token = 6 * params + 3 * n_layers * mixer_per_sequence / seq_len
    flops = tokens * flops_per_token + n_eval_tokens * flops_per_token / 3
    activations = n_layers * (FLOAT32 * (_mixer_peak_values(mixer, batch_size, seq_len, d_model, n_heads, **sizes)
                                         + batch_size * seq_len * (8 * d_model + 2 * d_ff)))
    logits = 3 * FLOAT32 * batch_size * seq_len * vocab_size
    peak = 16 * params + activations + logits
    steps = n_steps + n_eval_tokens / max(batch_size * seq_len, 1) / 3
    ops_per_step = 3 * n_layers * (30 + _block_cost(mixer).ops) + 60
    return Work(flops, 3 * activations * steps, ops_per_step * steps, peak)


# ----------------------------------------------------------------------------------------------------------------
# The chapters
# ----------------------------------------------------------------------------------------------------------------
LISTOPS_SECONDS_PER_TOKEN = 22e-6  # the generator on one core: 2.8 ms a tree of 126 tokens, 17.5 ms of 1089
CHAPTER_FIXED_SECONDS = 5.0  # a kernel start, the imports and the figures of a chapter, on the host
"""Fixed cost of any chapter, on the host, for a kernel start, the imports and the figures; most of a light
chapter's time at tiny, where chapter_seconds_cpu_tiny.json times the lightest chapters at 4-7 s."""


def _sweep_point(label, work, calls, *, single_thread=True):
    return Point(label, work * calls, single_thread=single_thread)


class PresetSizes:
    """A preset's sizes as the cost model reads them (``sizes.seq_lens``, ...): the one accessor through which every
    chapter's model reads :data:`gma_teach.presets.PRESETS`, so that a key the model needs and the preset lacks (a
    renamed key) fails here, naming the preset, the scale and the key."""

    def __init__(self, name: str, scale_name: str, **overrides):
        self.name, self.sizes = name, preset(name, scale_name)
        for key, value in overrides.items():  # a chapter's live runs replace some entries (e.g. fewer steps)
            if not hasattr(self.sizes, key):
                raise AttributeError(f"override {key!r} names no key of preset {name!r}; its keys: "
                                     f"{sorted(vars(self.sizes))}")
            setattr(self.sizes, key, value)

    def __getattr__(self, key):  # called only for a key that is not an attribute of this object
        try:
            return getattr(self.sizes, key)
        except AttributeError:
            raise AttributeError(f"the cost model reads key {key!r} of preset {self.name!r} at scale "
                                 f"{self.sizes.scale!r}, which has no such key; its keys: "
                                 f"{sorted(vars(self.sizes))}") from None


def preset_sizes(name: str, scale_name: str, **overrides) -> PresetSizes:
    """The sizes of preset ``name`` at ``scale_name`` with ``overrides`` replacing entries, read through
    :class:`PresetSizes`."""
    return PresetSizes(name, scale_name, **overrides)


def _ch01(p, on_cuda):
    points = []
    for n in p.seq_lens:
        calls = 2 + p.repeat + 1  # warm-up, timed repeats, the peak-memory call
        for form in ("softmax", "sdpa", "gma_linear"):
            work = attention_work(form, p.batch_size, p.n_heads, n, p.d_head, p.d_head, p.n_components)
            points.append(_sweep_point(f"{form} N={n}", work, calls, single_thread=False))
    return points


SKLEARN_SECONDS = 3.0
"""Importing scikit-learn (2 s) and its first diagonal mixture fit (0.8 s), chapter 2's agreement check, on a CPU."""
ADAM_STEP_OPS = 250
"""The eager ops of one of chapter 2's Adam steps on the mixture's log-likelihood, its forward and backward, the
optimizer's loop over three tensors and a ``.item()`` (1.3 ms a step measured at small, 2.0 s for 1,500 steps)."""


def _ch02(p, on_cuda):
    em = Work(20 * p.n_samples * p.n_components * p.d_route, 0, 30) * p.n_em_iter
    adam = Work(30 * p.n_samples * p.n_components * p.d_route, 0, ADAM_STEP_OPS) * p.n_adam_steps
    trap = Work(4 * p.trap_points * 128 * 32, 3 * FLOAT32 * p.trap_points * 128 * 32, 20,
                FLOAT32 * p.trap_points * 128 * 32 * 2)
    shifts = Work(3 * 4 * p.trap_points * 4 * 2 * p.trap_d_route, 0, 15) * (3 * len(p.trap_shifts))
    return [Point("EM", em, on="host"), Point("Adam", adam, on="host"), Point("direct form memory", trap, on="host"),
            Point("cancellation table", shifts, on="host"), Point("scikit-learn", Work(seconds=SKLEARN_SECONDS),
                                                                  on="host")]


def _ch03(p, on_cuda):
    ranks = Work(sum(2 * 10 * p.rank_tokens**3 for _ in p.rank_components), 0, 10 * len(p.rank_components))
    return [Point("ranks", ranks, on="host")]


def _ch04(p, on_cuda):
    points = []
    for n in p.seq_lens:
        if n <= p.naive_max_len:  # the FLOP counter runs both orders on the host
            count = attention_work("gma_naive", 1, 1, n, 1, p.d_value, p.n_components)
            points.append(Point(f"flop count N={n}", count, on="host"))
        calls = 1 + p.repeat + 1
        for form in ("gma_naive", "gma_linear", "sdpa"):
            if form == "gma_naive" and n > p.naive_max_len:
                continue
            work = attention_work(form, p.batch_size, p.n_heads, n, p.d_route, p.d_value, p.n_components)
            points.append(_sweep_point(f"{form} N={n}", work, calls))
    return points


def _task_run(p, label, mixer, seq_len, n_components, n_evals, on_cuda):
    """One run of chapter 5's one-block ``TaskModel`` on one thread, evaluated ``n_evals`` times on the test split. A
    run whose largest activation fits :data:`CPU_CACHE_BYTES` (the chapter's at small: a (B, H, N, K) or (B, H, N, N)
    tensor of 1-4 MiB) reads it back from the caches, as the recall model does: no streamed bytes."""
    work = training_work(n_steps=p.n_steps, batch_size=p.batch_size, seq_len=seq_len, d_model=p.d_model, n_layers=1,
                         d_ff=0, n_heads=p.n_heads, mixer=mixer, output_size=max(p.n_values, 2),
                         n_eval_tokens=n_evals * p.n_test * seq_len, n_components=n_components)
    widest = max(p.d_model, p.n_heads * (n_components if mixer == "gma" else seq_len))
    if FLOAT32 * p.batch_size * seq_len * widest <= CPU_CACHE_BYTES:
        work = Work(work.flops, 0.0, work.ops, work.peak)
    return Point(label, work, single_thread=True, amp=on_cuda)


def _ch05(p, on_cuda):
    points = [Point("Lipschitz sweep", Work(60 * p.n_probe * p.n_components * p.d_probe, 0, 400)
                    * len(p.min_variances), on="host", single_thread=True)]
    tasks = {"majority": p.seq_len, "recall": 2 * p.n_pairs + 1}
    for task, seq_len in tasks.items():
        for mixer in ("gma", "softmax"):  # evaluated every sixth of the run
            points.append(_task_run(p, f"train {mixer} ({task})", mixer, seq_len, p.n_components, 6, on_cuda))
    return points


def _ch06(p, on_cuda):
    points = []
    limits = {"gma_naive_causal": p.naive_max_len, "gma_cumsum": p.cumsum_max_len, "gma_chunked": math.inf}
    for n in p.seq_lens:
        for form, limit in limits.items():
            if n <= limit:
                work = attention_work(form, p.batch_size, p.n_heads, n, p.d_route, p.d_value, p.n_components,
                                      chunk_size=p.chunk_size)
                points.append(_sweep_point(f"{form} N={n}", work, 1 + p.repeat + 1))
    for c in p.chunk_sizes:
        work = attention_work("gma_chunked", p.batch_size, p.n_heads, p.seq_lens[-1], p.d_route, p.d_value,
                              p.n_components, chunk_size=c)
        points.append(Point(f"chunk size {c}", work, single_thread=False))
    decode = Work(2 * 12 * p.d_model**2, 0, 60) * (2 * p.decode_len)  # GMA steps and softmax KV-cache steps
    points.append(Point("decoding", decode, on="host"))
    return points


# Triton's interpreter (a CPU without a GPU) runs every program of a launch in Python on numpy tiles, so its time is
# set by how many (row block x K tile) steps the programs take and how many launches there are, not by the FLOPs
# (on these sizes a FLOP count times a constant factor misses by 20 to 200 times). Fitted (least squares on the ratio)
# to 14 calls of gma_teach.kernels.gma_triton timed on one core (B=1, H=1-2, N=17-1024, d=5-64, K=3-128, causal or
# not, forward or forward + backward; six of them chapter 7b's timing cell at small): every one within a factor 1.5
# of the model (forward-only calls run faster than it says).
INTERPRETED_SECONDS_PER_BLOCK = 0.0125
"""Seconds one interpreted program takes for one ``(rows x K tile)`` block step of the GMA kernels, one core."""
INTERPRETED_SECONDS_PER_LAUNCH = 0.003
"""Seconds of one interpreted kernel launch beyond its block steps (the interpreter copies every argument)."""
INTERPRETED_CAUSAL_FACTOR = 1.5
"""A causal block step's time against a bidirectional one's, since it also builds its chunk's ``(rows x rows)``
affinity."""
INTERPRETED_ROWS = 64
"""Rows per block and longest causal chunk of the interpreted kernels (``gma_teach.kernels.tile_sizes(...,
arch=None)``: 64 rows and K tiles of at most 64 components; tests/test_cost.py checks it against the kernels)."""
TRITON_COMPILE_SECONDS = 1.0
"""Compiling one kernel specialization on a GPU (a launch with new tiles or flags compiles once; an estimate until
a GPU record measures it)."""
TRITON_KERNELS_PER_DIRECTION = 11
"""Kernels a forward + backward compiles in one direction (``gma_teach.kernels``' launch list: 10 bidirectional,
11 causal)."""


def _tile(size: int) -> int:
    return max(16, 1 << max(0, size - 1).bit_length())  # the kernels' padded tile: a power of two, at least 16


def triton_gma_launches(batch_size: int, n_heads: int, n_q: int, n_k: int, n_components: int, *, causal: bool,
                        backward: bool, chunk_size: int | None = None) -> tuple[int, int]:
    """``(launches, block steps)`` of one :func:`gma_teach.kernels.gma_triton` call as interpreted on a CPU.

    A block step is one program's pass over one block of rows (``INTERPRETED_ROWS``, or the causal chunk) and one K
    tile: the forward computes the queries' and keys' log-normalizers, the keys' states and the output (four
    passes over the tokens), the backward recomputes the states of both sides and runs the query, key and two
    mixture-gradient kernels (six more, and a seventh for the causal in-chunk term of the queries).
    """
    rows = min(chunk_size or INTERPRETED_ROWS, INTERPRETED_ROWS) if causal else INTERPRETED_ROWS
    k_tiles = math.ceil(n_components / min(INTERPRETED_ROWS, _tile(n_components)))
    q_blocks, k_blocks = math.ceil(n_q / rows), math.ceil(n_k / rows)
    b_h = batch_size * n_heads
    launches, passes = 5, 2 * q_blocks + 2 * k_blocks  # log-normalizers (2), state, carry, output
    if backward:
        launches += 8 + int(causal)  # states (2), carries (2), query (+ in chunk), key, mixture (2)
        passes += 3 * q_blocks + 3 * k_blocks + int(causal) * q_blocks
    return launches, b_h * k_tiles * passes


def triton_gma_work(batch_size: int, n_heads: int, n_q: int, n_k: int, d_route: int, d_value: int,
                    n_components: int, *, causal: bool, backward: bool, on_cuda: bool,
                    chunk_size: int | None = None) -> Work:
    """One :func:`gma_teach.kernels.gma_triton` call: on a GPU the compiled kernels do the linear form's work
    (:func:`attention_work`) reading each input once; on a CPU the interpreter's time is counted per launch and
    per block step (:func:`triton_gma_launches`), as directly timed work."""
    linear = attention_work("gma_linear", batch_size, n_heads, max(n_q, n_k), d_route, d_value, n_components,
                            backward=backward)
    if on_cuda:
        launches = triton_gma_launches(batch_size, n_heads, n_q, n_k, n_components, causal=causal,
                                       backward=backward, chunk_size=chunk_size)[0]
        return Work(linear.flops, linear.bytes / 4, launches, linear.peak / 4)
    launches, blocks = triton_gma_launches(batch_size, n_heads, n_q, n_k, n_components, causal=causal,
                                           backward=backward, chunk_size=chunk_size)
    block_seconds = INTERPRETED_SECONDS_PER_BLOCK * (INTERPRETED_CAUSAL_FACTOR if causal else 1.0)
    return Work(0.0, 0.0, 10 * launches, linear.peak / 4,
                seconds=launches * INTERPRETED_SECONDS_PER_LAUNCH + blocks * block_seconds)


def _ch07(p, on_cuda):
    # The chapter's own kernels are toys: a vector, a 37 x 5 matrix, 50 x 7 logits (a few programs each), then
    # its responsibility kernel and the package's on the demo sizes (one K tile of all components per program).
    d = p.demo
    b_h, n, k = d["batch_size"] * d["n_heads"], d["n_tokens"], d["n_components"]
    toys = math.ceil(p.vector_len / p.vector_block) + math.ceil(37 / 16) + math.ceil(50 / 16)
    mine = b_h * math.ceil(n / 32)  # my_responsibilities: blocks of 32 rows
    package = 2 * b_h * math.ceil(n / INTERPRETED_ROWS) * math.ceil(k / min(INTERPRETED_ROWS, _tile(k)))
    blocks, launches = toys + mine + package, 6
    if on_cuda:
        work = Work(4 * b_h * n * k * d["d_route"], FLOAT32 * b_h * n * (d["d_route"] + k) * 3, launches,
                    FLOAT32 * b_h * n * k)
        return [Point("toy kernels and the demo responsibilities", work), Point(
            "compile", Work(seconds=launches * TRITON_COMPILE_SECONDS), on="host")]
    seconds = launches * INTERPRETED_SECONDS_PER_LAUNCH + blocks * INTERPRETED_SECONDS_PER_BLOCK
    return [Point("toy kernels and the demo responsibilities", Work(0, 0, 100, FLOAT32 * b_h * n * k,
                                                                  seconds=seconds))]


def _ch07b(p, on_cuda):
    """Chapter 7b reads chapter 7's preset: the demo (a forward, two causal forwards), the cases against the float64
    spec (each forward + backward, with two heads; the first two twice), the precision table and the timing."""
    d = p.demo
    demo_sizes = (d["batch_size"], d["n_heads"], d["n_tokens"], d["n_tokens"], d["d_route"], d["d_value"],
                  d["n_components"])
    demo = triton_gma_work(*demo_sizes, causal=False, backward=False, on_cuda=on_cuda)
    demo += triton_gma_work(*demo_sizes, causal=True, backward=False, on_cuda=on_cuda,
                            chunk_size=d["chunk_size"]) * 2
    points = [Point("demo: forward, causal forward twice", demo)]
    for i, (n_q, n_k, d_route, d_value, k, causal) in enumerate(p.cases):
        heads, calls = 2, 2 if i < 2 else 1  # max_errors' two heads; the first two cases print again
        kernel = triton_gma_work(1, heads, n_q, n_k, d_route, d_value, k, causal=causal, backward=True,
                                 on_cuda=on_cuda)
        spec = attention_work("gma_naive_causal" if causal else "gma_naive", 1, heads, max(n_q, n_k), d_route,
                              d_value, k, backward=True)  # float64 on the host: twice float32's bytes
        points.append(Point(f"case {n_q}x{n_k} K={k}", kernel * calls))
        points.append(Point(f"case {n_q}x{n_k} K={k}: float64 spec", Work(spec.flops * 2, spec.bytes * 2,
                                                                          spec.ops, spec.peak * 2) * calls,
                            on="host"))
    q = p.precision
    exact = Work(2 * 2 * q["n_tokens"] * q["n_components"] * 2 * q["d_route"] + 30 * q["n_tokens"]
                 * q["n_components"], 8 * 6 * q["n_tokens"] * q["n_components"], 30)
    rows = Work(6 * 2 * q["n_tokens"] * q["n_components"] * 2 * q["d_route"] + 60 * q["n_tokens"]
                * q["n_components"], 4 * 12 * q["n_tokens"] * q["n_components"], 60)  # six rows, splits thrice
    points.append(Point("precision table", (exact + rows) * 3, on="host"))
    t = p.timing
    sizes = (t["batch_size"], t["n_heads"])
    for n in t["seq_lens"]:
        calls = 1 + t["repeat"]  # compare_timings: one warm-up call, then the repeats
        for causal, form in ((False, "gma_linear"), (True, "gma_chunked")):
            kernel = triton_gma_work(*sizes, n, n, t["d_route"], t["d_value"], t["n_components"], causal=causal,
                                     backward=True, on_cuda=on_cuda)
            torch_form = attention_work(form, *sizes, n, t["d_route"], t["d_value"], t["n_components"],
                                        backward=True)
            points.append(Point(f"timing {'causal' if causal else 'bidirectional'} N={n}",
                                (kernel + torch_form) * calls, single_thread=True))
    if on_cuda:  # each new set of tiles compiles a direction's kernels anew
        calls = [(d["d_route"], d["d_value"], d["n_components"], causal) for causal in (False, True)]
        calls += [case[2:] for case in p.cases]
        calls += [(t["d_route"], t["d_value"], t["n_components"], causal) for causal in (False, True)]
        tiles = {(_tile(d_route), _tile(d_value), min(INTERPRETED_ROWS, _tile(k)), causal)
                 for d_route, d_value, k, causal in calls}
        points.append(Point("compile the kernels", Work(seconds=len(tiles) * TRITON_KERNELS_PER_DIRECTION
                                                        * TRITON_COMPILE_SECONDS), on="host"))
    return points


def _ch08(p, on_cuda):
    points = []
    sizes = dict(d_model=p.d_model, n_heads=p.n_heads, batch_size=p.batch_size, n_features=p.n_features,
                 linformer_k=p.linformer_k)
    calls = 1 + p.repeat + 1
    for mixer in p.mixers:
        for n in p.seq_lens:
            if mixer == "softmax" and n > p.softmax_max_len:
                continue
            work = block_work(mixer, seq_len=n, n_components=p.n_components, **sizes)
            points.append(Point(f"{mixer} N={n}", work * calls))
    for k in p.k_values:
        points.append(Point(f"gma K={k}", block_work("gma", seq_len=p.k_sweep_len, n_components=k, **sizes) * calls))
    points.append(Point("gma K=256 at 2N", block_work("gma", seq_len=2 * p.k_sweep_len, n_components=256, **sizes)
                        * 3))
    return points


def _classification_points(experiment, q, mixers, seeds, on_cuda, n_classes):
    points = []
    if experiment == "listops":
        n_trees = q.n_train + q.n_val + q.n_test
        mean_tokens = (q.min_length + q.max_length) / 2
        points.append(Point("generate ListOps", Work(seconds=n_trees * mean_tokens * LISTOPS_SECONDS_PER_TOKEN),
                            on="host"))
        n_val = q.n_val
    else:
        n_val = q.n_test
    steps = q.epochs * math.ceil(q.n_train / q.batch_size)
    evals = (q.epochs * n_val + q.n_test) * q.max_length
    for mixer in mixers:
        work = training_work(n_steps=steps, batch_size=q.batch_size, seq_len=q.max_length, d_model=q.d_model,
                             n_layers=q.n_layers, d_ff=q.d_ff, n_heads=q.n_heads, mixer=mixer, output_size=n_classes,
                             n_eval_tokens=evals, n_components=q.n_components, n_features=q.n_features,
                             linformer_k=q.linformer_k)
        points.append(Point(f"{experiment} {mixer} x{len(seeds)} seeds", work * len(seeds), amp=on_cuda))
    return points


def _ch09(p, on_cuda):
    lp = preset_sizes("listops", p.live_scale, **p.live_listops)
    tp = preset_sizes("text", p.live_scale, **p.live_text)
    stats = Work(seconds=p.n_stats * (lp.min_length + lp.max_length) / 2 * LISTOPS_SECONDS_PER_TOKEN)
    return [Point("ListOps statistics", stats, on="host"),
            *_classification_points("listops", lp, p.mixers, p.seeds, on_cuda, 10),
            *_classification_points("text", tp, p.mixers, p.text_seeds, on_cuda, 4)]


LM_VOCAB = {"stdlib": 13_000, "wikitext-103": 50_257, "wikitext-2": 50_257}  # compacted stdlib: ~13k GPT-2 ids
TOKENIZE_SECONDS_PER_TOKEN = 2e-6  # GPT-2 BPE (tiktoken) and packing, one core
LM_TRAIN_TOKENS = {"stdlib": 1_200_000, "wikitext-103": 118_000_000, "wikitext-2": 2_400_000}
LM_VAL_TOKENS = {"stdlib": 25_000, "wikitext-103": 250_000, "wikitext-2": 250_000}
"""Tokens of a corpus's validation split, each evaluation's forward passes (stdlib 196 blocks of 128; WikiText's
validation text, 218k words, in GPT-2 tokens)."""


def _lm_points(q, runs, on_cuda, *, cached_first=False):
    vocab = LM_VOCAB.get(q.source, 50_257)
    val_tokens = q.max_val_tokens or LM_VAL_TOKENS.get(q.source, 250_000)
    evals = (q.n_steps // q.eval_every + 1) * val_tokens
    tokenize = Work(seconds=LM_TRAIN_TOKENS.get(q.source, 1e6) * TOKENIZE_SECONDS_PER_TOKEN)
    points = [Point("tokenize the corpus", tokenize, on="host")]
    for i, (label, mixer, k) in enumerate(runs):
        work = training_work(n_steps=q.n_steps, batch_size=q.batch_size, seq_len=q.seq_len, d_model=q.d_model,
                             n_layers=q.n_layers, d_ff=q.d_ff, n_heads=q.n_heads, mixer=mixer, vocab_size=vocab,
                             n_eval_tokens=evals, n_components=k, n_features=q.n_features)
        points.append(Point(label, work, amp=on_cuda, cached=cached_first and i == 0))
    return points


def _ch10(p, on_cuda):
    q = preset_sizes("lm", p.live_scale, **p.live_lm)
    runs = [(f"lm gma K={q.n_components}", "gma", q.n_components)]
    runs += [(f"lm gma K={k}", "gma", k) for k in q.n_components_sweep if k != q.n_components]
    runs += [(f"lm {mixer}", mixer, q.n_components) for mixer in p.mixers]
    return _lm_points(q, runs, on_cuda)


def _ch11(p, on_cuda):
    q = preset_sizes("lm", p.lm_scale, **preset_sizes("ch10", p.lm_scale).live_lm)  # the model chapter 10 saved
    runs = [(f"lm gma K={q.n_components} (chapter 10's)", "gma", q.n_components),
            (f"lm gma K={q.n_components} with the routing remedy", "gma", q.n_components)]
    points = _lm_points(q, runs, on_cuda, cached_first=True)
    forward = training_work(n_steps=0, batch_size=q.batch_size, seq_len=q.seq_len, d_model=q.d_model,
                            n_layers=q.n_layers, d_ff=q.d_ff, n_heads=q.n_heads, mixer="gma",
                            vocab_size=LM_VOCAB.get(q.source, 50_257), n_eval_tokens=p.n_tokens,
                            n_components=q.n_components)
    points.append(Point("read the routing (two trained models, one untrained)", forward * 3))
    shuffles = Work(10 * p.n_tokens * q.n_components, 0, 30) * (2 * p.n_shuffles)
    points.append(Point("permutation baselines", shuffles, on="host"))
    return points


# ----------------------------------------------------------------------------------------------------------------
# The recall model (chapter 12 and the recall study)
# ----------------------------------------------------------------------------------------------------------------
MQAR_SECONDS_PER_TOKEN = 2e-7  # gma_teach.tasks.mqar on one core: 0.24 s for the study's 21,500 examples of 64 tokens
CONV_BLOCK_FLOPS_PER_TOKEN_WIDTH = 2 * 3 + 1  # the short convolution's three taps and its gate (projections apart)
CONV_BLOCK_OPS = 20  # pad, two projections, the depthwise convolution, the gate: forward + backward
OPTIMIZER_OPS_PER_TENSOR = 15  # AdamW's per-tensor loop on a CPU, the gradient clipping and zeroing
CPU_CACHE_BYTES = 8 * 2**20
"""A tensor at most this large is read back from the CPU's caches between operations, not from memory; the recall
model's ``(B, N, D)`` activation of the study is 1 MiB, GMA's ``(B, H, N, K)`` one 4 MiB at K=256."""

RECALL_RUN = dict(seq_len=64, vocab_size=256, kv_pairs=(4, 6, 8, 12, 16), n_train=20_000, n_val=500, n_test=1_000,
                  n_heads=1, batch_size=64, steps=1_000, width=64,
                  arm={"mixer": "gma", "options": {"n_components": 256}})
"""The recall study's sizes that one run's cost depends on, as ``gma_teach.runs.settings.RECALL_STUDY`` declares
them, with the run the ``"recall"`` entry predicts: its largest GMA arm (``gma_k256``) at its first width. A copy,
because this module cannot import the run wing (``gma_teach.runs.profiling`` imports this one, and the package's
rooms may not import each other both ways); tests/test_cost.py checks that it equals the declared study."""


def recall_run_work(*, seq_len: int, vocab_size: int, kv_pairs, batch_size: int, n_steps: int, d_model: int,
                    n_heads: int, mixer: str, n_components: int = 64, n_features: int = 64, n_eval_examples: int = 0,
                    n_parameter_tensors: int = 24) -> Work:
    """One training run of the recall model (:func:`gma_teach.runs.recall.build_model`): two blocks without an FFN,
    a short convolution then ``mixer``, logits only at the queries (an example at ``n`` kv pairs has ``n``).

    FLOPs: the six ``D x D`` projections (two in the convolution block, four around the mixer) on every token, the
    mixer's core (its :class:`~gma_teach.mixers.BlockCost`), the output layer at the queries; three times that for a
    training step, once for each of the ``n_eval_examples``. Bytes: the activations' passes when they outgrow
    :data:`CPU_CACHE_BYTES`, none when they stay in the caches. Ops: both blocks' forward + backward, the optimizer
    over ``n_parameter_tensors`` tensors, 60 for the batch, the loss and the step. Peak: the model, its gradients
    and AdamW's moments, and the activations of a batch."""
    queries = sum(kv_pairs) / len(kv_pairs)
    sizes = dict(n_components=n_components, n_features=n_features, linformer_k=64)
    tokens = batch_size * seq_len
    per_batch = (tokens * (12 * d_model**2 + CONV_BLOCK_FLOPS_PER_TOKEN_WIDTH * d_model)
                 + mixer_flops(mixer, batch_size, seq_len, d_model, n_heads, **sizes)
                 + batch_size * queries * 2 * d_model * vocab_size)
    mixer_values = _mixer_peak_values(mixer, batch_size, seq_len, d_model, n_heads, **sizes)
    activations = FLOAT32 * (mixer_values + 16 * tokens * d_model)  # + the convolution block, norms, residuals
    extra = _block_cost(mixer).extra_peak_values(_sizes(batch_size, seq_len, d_model, n_heads, **sizes))
    largest = FLOAT32 * max(tokens * d_model, extra / 2)  # extra: two or more tensors (softmax 2, GMA 3.2)
    streamed = 0.0 if largest <= CPU_CACHE_BYTES else 3 * activations
    eval_batches = n_eval_examples / batch_size
    ops_per_step = (_block_cost(mixer).ops + 30) + (CONV_BLOCK_OPS + 30) \
        + OPTIMIZER_OPS_PER_TENSOR * n_parameter_tensors + 60
    parameters = 6 * d_model**2 + d_model * (vocab_size + seq_len)
    return Work(per_batch * (3 * n_steps + eval_batches), streamed * (n_steps + eval_batches / 3),
                ops_per_step * n_steps + 60 * eval_batches, 16 * parameters + activations)


def _recall_run_point(design: dict, arm: dict, width: int, *, evaluate: bool) -> Point:
    """One run of the recall model: ``design`` holds a study's sizes (``RECALL_RUN``, a study's design such as a
    record's ``"design"``), ``arm`` its mixer and options (``{"mixer", "options", "n_heads"}``)."""
    options = arm.get("options") or {}
    work = recall_run_work(seq_len=design["seq_len"], vocab_size=design["vocab_size"], kv_pairs=design["kv_pairs"],
                           batch_size=design["batch_size"], n_steps=design["steps"], d_model=width,
                           n_heads=arm.get("n_heads", design["n_heads"]), mixer=arm["mixer"],
                           n_components=options.get("n_components", 64), n_features=options.get("n_features", 64),
                           n_eval_examples=design["n_val"] + design["n_test"] if evaluate else 0)
    label = f"recall {arm['mixer']}" + "".join(f" {key}={value}" for key, value in options.items()) + f" d={width}"
    return Point(label, work, single_thread=True)  # the study and chapter 12 train on one CPU thread


def _mqar_point(design: dict) -> Point:
    examples = design["n_train"] + design["n_val"] + design["n_test"]
    return Point("generate the MQAR splits", Work(seconds=examples * design["seq_len"] * MQAR_SECONDS_PER_TOKEN),
                 on="host")


def _recall(p, on_cuda):
    """One run of the recall study (one arm, seed and learning rate, training and its evaluation) at
    :data:`RECALL_RUN`; the study has one declared setting, not a preset per scale, so every scale predicts it."""
    return [_mqar_point(RECALL_RUN), _recall_run_point(RECALL_RUN, RECALL_RUN["arm"], RECALL_RUN["width"],
                                                       evaluate=True)]


RECALL_DEMO_OPS = 30  # one float64 store-and-recall of chapter 12's exact demo (routing, write, read, scoring)


def _ch12(p, on_cuda):
    """Chapter 12: the exact demos and the Monte Carlo in float64, the state-byte table (each mixer decodes its
    tokens one step at a time), then the live MQAR run: SDPA and GMA K=``live_gma_k`` at ``live_width`` on the
    recall study's model, shrunk to ``live`` (one head, one thread on a CPU); the study's records are only read."""
    k = p.n_slots
    pairs = range(1, p.max_pairs + 1)
    curves = (2 + 2 + 2 * len(p.decays)) * len(pairs)  # two scorings, demo and formula, and each decay's curve
    demo = Work(sum(4 * n * n * k for n in pairs) * (2 + len(p.decays)), 0, curves * RECALL_DEMO_OPS)
    carlo = sum((Work(4 * p.mc_trials * n * n * k, 8 * 4 * p.mc_trials * n * k, RECALL_DEMO_OPS)
                for n in (k // 2, k, 2 * k)), Work())
    horizon = Work(sum(4 * s**3 for s in p.horizon_slots) * len(p.decays), 0,
                   sum(5 * s for s in p.horizon_slots) * len(p.decays))  # decayed writes: one step a key
    decoded = 2 * len(p.state_seq_lens) * p.state_seq_lens[-1] + 12 * p.state_seq_lens[0]  # steps of the table
    states = Work(decoded * 4 * p.state_width**2, 0, decoded * 20)
    points = [Point("exact demos and the Monte Carlo", demo + carlo + horizon, on="host"),
              Point("state-byte table", states, on="host")]
    live = dict(p.live, n_heads=1)  # the recall study's one head
    points.append(_mqar_point(live))
    for arm in ({"mixer": "sdpa"}, {"mixer": "gma", "options": {"n_components": p.live_gma_k}}):
        points.append(_recall_run_point(live, arm, p.live_width, evaluate=True))
    return points


# ----------------------------------------------------------------------------------------------------------------
# The other pages the book executes: the answers, the statistics primer, Part IV's findings
# ----------------------------------------------------------------------------------------------------------------
PAGE_FIXED_SECONDS = 2.0
"""The fixed cost of a page that is not a chapter, a kernel start and the imports and few figures (the lightest pages
of build_seconds_cpu_small.json took 2.2-2.6 s)."""
PAGE_SECONDS = {"statistics_primer": 6.3, "part_iv_findings": 0.6, "answers01": 0.4, "answers02": 0.6,
                "answers03": 1.6, "answers04": 1.8, "answers05": 0.5, "answers06": 2.3, "answers07": 1.2,
                "answers08": 0.2, "answers09": 1.5, "answers10": 0.5, "answers11": 0.2, "answers12": 1.0}
"""Seconds of each page's fixed-size work beyond :data:`PAGE_FIXED_SECONDS`: checkers on their own small inputs, the
records read and plotted, the same at every scale (build_seconds_cpu_small.json's time less the fixed cost and the
page's sized work below)."""
ANSWER_10_KS = (4, 8, 16)  # the values of K answers/10 passes to ch10.check_k_sweep


def _answers01(p, on_cuda):
    """Exercise 1.3: eager softmax timed (a warm-up and three repeats) and its peak measured at the three lengths
    below chapter 1's longest."""
    return [_sweep_point(f"softmax N={n}", attention_work("softmax", p.batch_size, p.n_heads, n, p.d_head, p.d_head),
                         1 + 3 + 1, single_thread=False) for n in p.seq_lens[-4:-1]]


def _answers05(p, on_cuda):
    """Exercise 5.3: GMA at K = n_keys / 8, n_keys / 2, n_keys and softmax on ``exercise_recall``'s task, chapter 5's
    model, steps and one thread, each evaluated once."""
    n_keys, seq_len = p.exercise_recall["n_keys"], 2 * p.exercise_recall["n_pairs"] + 1
    runs = [("gma", k) for k in (max(2, n_keys // 8), n_keys // 2, n_keys)] + [("softmax", p.n_components)]
    return [_task_run(p, f"train {mixer} K={k}" if mixer == "gma" else f"train {mixer}", mixer, seq_len, k, 1,
                      on_cuda) for mixer, k in runs]


def _answers06(p, on_cuda):
    """Exercise 6.3's measurement: the chunked causal form's peak at chapter 6's longest length, each chunk size."""
    return [Point(f"chunk size {c}", attention_work("gma_chunked", p.batch_size, p.n_heads, p.seq_lens[-1], p.d_route,
                                                    p.d_value, p.n_components, chunk_size=c), single_thread=False)
            for c in p.chunk_sizes]


def _answers08(p, on_cuda):
    """Exercises 8.2 and 8.3: chapter 8's protocol for Performer over its lengths and for GMA over its K (one timed
    call each, with a warm-up and the peak), and GMA at K = 256 and twice the K sweep's length."""
    sizes = dict(d_model=p.d_model, n_heads=p.n_heads, batch_size=p.batch_size)
    points = [Point(f"performer N={n}", block_work("performer", seq_len=n, n_features=p.n_features, **sizes) * 3)
              for n in p.seq_lens]
    points += [Point(f"gma K={k}", block_work("gma", seq_len=p.k_sweep_len, n_components=k, **sizes) * 3)
               for k in p.k_values]
    return points + [Point("gma K=256 at 2N", block_work("gma", seq_len=2 * p.k_sweep_len, n_components=256,
                                                         **sizes) * 3)]


def _answers10(p, on_cuda):
    """Exercise 10.2: one LM a value of :data:`ANSWER_10_KS` at ``exercise_lm``'s sizes on chapter 10's data (tokenized
    there), each evaluated once more by the checker."""
    q = preset_sizes("lm", p.live_scale, **p.exercise_lm)
    tokenize, *runs = _lm_points(q, [(f"lm gma K={k}", "gma", k) for k in ANSWER_10_KS], on_cuda)
    tokenize.cached = True
    val_tokens = q.max_val_tokens or LM_VAL_TOKENS.get(q.source, 250_000)
    checks = [training_work(n_steps=0, batch_size=q.batch_size, seq_len=q.seq_len, d_model=q.d_model,
                            n_layers=q.n_layers, d_ff=q.d_ff, n_heads=q.n_heads, mixer="gma",
                            vocab_size=LM_VOCAB.get(q.source, 50_257), n_eval_tokens=val_tokens, n_components=k)
              for k in ANSWER_10_KS]
    return [tokenize, *runs, Point("the checker's evaluations", sum(checks, Work()), amp=on_cuda)]


def _page(name, sized=None):
    """A page's points: its sized work (``sized(p, on_cuda)``, if any) and its fixed-size work of
    :data:`PAGE_SECONDS`."""
    def points(p, on_cuda):
        fixed = Point("checkers, records and figures", Work(seconds=PAGE_SECONDS[name]), on="host")
        return [*(sized(p, on_cuda) if sized is not None else []), fixed]
    return points


SIZED_WORK = {"answers01": _answers01, "answers05": _answers05, "answers06": _answers06, "answers08": _answers08,
              "answers10": _answers10}
PAGES = {name: _page(name, SIZED_WORK.get(name)) for name in PAGE_SECONDS}
"""The pages the book executes besides the chapters, keyed ``"answersNN"`` for ``book/answers/NN_answers.ipynb``
(it reads chapter NN's preset, :data:`PRESET_OF`) and by the notebook's name for the other pages."""


def _experiment(name):
    def points(q, on_cuda):
        if name == "lm":
            return _lm_points(q, [(f"lm gma K={q.n_components}", "gma", q.n_components)], on_cuda)
        return _classification_points(name, q, ["gma"], [0], on_cuda, 10 if name == "listops" else 4)
    return points


CHAPTERS = {"ch01": _ch01, "ch02": _ch02, "ch03": _ch03, "ch04": _ch04, "ch05": _ch05, "ch06": _ch06, "ch07": _ch07,
            "ch07b": _ch07b,
            "ch08": _ch08, "ch09": _ch09, "ch10": _ch10, "ch11": _ch11, "ch12": _ch12,
            **PAGES, "listops": _experiment("listops"), "text": _experiment("text"), "lm": _experiment("lm"),
            "recall": _recall}
"""Everything the model predicts, by key, namely the chapters ``"ch01"`` ... ``"ch12"`` with ``"ch07b"`` (the keys
``tools/build_book.py`` and ``tools/time_chapters.py`` derive from the notebooks' names; chapter 7b reads chapter 7's
preset, see :data:`PRESET_OF`) and every other page the book executes (:data:`PAGES`); one GMA run (one seed) of
each experiment preset, ``"listops"``, ``"text"`` and ``"lm"``; and ``"recall"``, one run of the recall study (one
arm, seed and learning rate: :data:`RECALL_RUN`, the same at every scale)."""


PRESET_OF = {"ch07b": "ch07", "recall": None, "statistics_primer": None, "part_iv_findings": None,
             **{f"answers{n:02d}": f"ch{n:02d}" for n in range(1, 13)}}
"""The preset an entry of :data:`CHAPTERS` reads when it is not the entry's own name: chapter 7b runs on chapter 7's
sizes and an answers page on its chapter's; ``None``: the entry has no preset (the recall study's one setting,
:data:`RECALL_RUN`; the primer and Part IV's findings, which read records)."""


def points(chapter: str, scale: str, on_cuda: bool) -> list[Point]:
    """The :class:`Point` list of ``chapter`` (a key of :data:`CHAPTERS`) at ``scale`` (``on_cuda``: the device is a
    GPU, so training uses mixed precision and chapters 7 and 7b their compiled kernels)."""
    if not isinstance(chapter, str) or chapter not in CHAPTERS:
        raise ValueError(f"chapter must be one of {sorted(CHAPTERS)}, got {chapter!r}")
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {SCALES}, got {scale!r}")
    name = PRESET_OF.get(chapter, chapter)
    return CHAPTERS[chapter](None if name is None else preset_sizes(name, scale), on_cuda)


def predict(chapter: str, scale: str, device_profile="cpu-2core") -> Prediction:
    """Predicted time and peak memory of ``chapter`` at ``scale`` on ``device_profile``.

    Args:
        chapter: a key of :data:`CHAPTERS`: ``"ch01"`` ... ``"ch12"`` or ``"ch07b"``, a page of :data:`PAGES`
            (``"answers05"``, ``"statistics_primer"``, ...), or an experiment
            (``"listops"``, ``"text"``, ``"lm"``: one GMA run of the preset; ``"recall"``: one run of the recall
            study, :data:`RECALL_RUN`, whatever the scale).
        scale: one of ``gma_teach.environment.SCALES``.
        device_profile: a name of ``PROFILES`` or a :class:`DeviceProfile`.

    Returns:
        a :class:`Prediction`; ``points`` holds every sweep point and run with its own time, peak and ``fits``.
    """
    device = profile(device_profile)
    predicted = []
    for point in points(chapter, scale, device.is_cuda):
        budget = PROFILES[HOST].memory_budget_bytes if point.on == "host" and device.is_cuda \
            else device.memory_budget_bytes
        predicted.append(PointPrediction(point.label, point_seconds(point, device), point.work.peak,
                                         point.work.peak <= budget, point.on if device.is_cuda else "device",
                                         point.cached))
    fixed = CHAPTER_FIXED_SECONDS if chapter.startswith("ch") else PAGE_FIXED_SECONDS if chapter in PAGES else 0.0
    on_device = [q.peak_bytes for q in predicted if q.on == "device"]
    on_host = [q.peak_bytes for q in predicted if q.on == "host"]
    return Prediction(chapter, scale, device.name, max(on_device, default=0.0), max(on_host, default=0.0),
                      fixed + sum(q.seconds for q in predicted if not q.cached), predicted)


def fits(chapter: str, scale: str, device_profile="cpu-2core", *, seconds: float | None = None) -> bool:
    """``True`` when every point of ``chapter`` at ``scale`` fits the profile's memory and the chapter takes at most
    ``seconds`` (default: :data:`BUDGET_SECONDS` of the scale; no time limit at ``full``)."""
    prediction = predict(chapter, scale, device_profile)
    limit = BUDGET_SECONDS.get(scale, math.inf) if seconds is None else seconds
    return all(q.fits for q in prediction.points) and prediction.seconds <= limit


def point_fits(form: str, *, batch_size: int, n_heads: int, seq_len: int, d_route: int = 64,
               d_value: int | None = None, n_components: int = 64, chunk_size: int = 64, backward: bool = False,
               device_profile=None, free_bytes: float | None = None) -> bool:
    """Would one sweep point fit in memory? For skipping a point before it runs out of memory.

    Args:
        form: an attention form of :func:`attention_work` (``"softmax"``, ``"sdpa"``, ``"gma_naive"``,
            ``"gma_naive_causal"``, ``"gma_linear"``, ``"gma_cumsum"``, ``"gma_chunked"``) or a mixer name with a
            cost-model entry (:mod:`gma_teach.mixers`) prefixed with ``"block:"`` (chapter 8's forward + backward
            block; ``d_route`` is then the block's width ``d_model``).
        batch_size, n_heads, seq_len, d_route, d_value, n_components, chunk_size, backward: the point's sizes.
        device_profile: a profile name or :class:`DeviceProfile`; default :func:`current_profile`.
        free_bytes: the memory available (default: the profile's budget).

    Returns:
        ``True`` when the predicted peak (the point's own bytes plus its inputs) is at most ``free_bytes``.
    """
    device = current_profile() if device_profile is None else profile(device_profile)
    available = device.memory_budget_bytes if free_bytes is None else free_bytes
    if form.startswith("block:"):
        work = block_work(form.split(":", 1)[1], d_model=d_route, n_heads=n_heads, seq_len=seq_len,
                          batch_size=batch_size, n_components=n_components)
        inputs = 2 * FLOAT32 * batch_size * seq_len * d_route
    else:
        d_value = d_route if d_value is None else d_value
        work = attention_work(form, batch_size, n_heads, seq_len, d_route, d_value, n_components,
                              chunk_size=chunk_size, backward=backward)
        inputs = FLOAT32 * batch_size * n_heads * seq_len * (2 * d_route + 2 * d_value)
    return work.peak + inputs <= available


# ----------------------------------------------------------------------------------------------------------------
# Model against measurement
# ----------------------------------------------------------------------------------------------------------------
def compare_with_record(record: dict, device_profile=None) -> list[dict]:
    """The model beside a recorded result file, one row per measurement.

    Args:
        record: a loaded record of :func:`gma_teach.measure.results_folder`: a profiling sweep (``"results"`` rows
            of chapter 8's protocol), an experiment (``"experiment"``, ``"config"``, ``"runs"``) or an arm of the
            recall study (``"design"``, ``"width"``, ``"runs"``: each run's training on one core, its
            ``cpu_seconds``, against the model's single-threaded time; the mixer needs a cost-model entry).
        device_profile: the profile to predict with; default: ``"cpu-2core"`` for a CPU record, else the GPU
            profile whose name appears in the record's GPU name (``"t4"``, ``"a100"``, ...), else ``"h200"``.

    Returns:
        rows ``{"label", "measured_seconds", "predicted_seconds", "measured_bytes", "predicted_bytes"}``
        (bytes ``None`` where the record has none).
    """
    if not isinstance(record, dict):
        raise TypeError(f"record must be a dict (a loaded result file), got {type(record).__name__}")
    device = profile(device_profile) if device_profile is not None else _record_profile(record)
    if "results" in record:
        rows = []
        for r in record["results"]:
            work = block_work(r["mixer"], d_model=r["d_model"], n_heads=r["n_heads"], seq_len=r["seq_len"],
                              batch_size=r["batch_size"], n_components=r.get("n_components") or 64,
                              **{k: record["config"][k] for k in ("n_features", "linformer_k")
                                 if k in record.get("config", {})})
            rows.append({"label": f"{r['label']} N={r['seq_len']}", "measured_seconds": r["seconds"],
                         "predicted_seconds": point_seconds(Point("", work, single_thread=True), device),
                         "measured_bytes": r.get("peak_memory_bytes"), "predicted_bytes": work.peak})
        return rows
    if "experiment" in record and "runs" in record:
        config = SimpleNamespace(**record["config"])
        for old, new in (("steps", "n_steps"), ("block_size", "seq_len")):  # records made before the key rename
            if not hasattr(config, new) and hasattr(config, old):
                setattr(config, new, getattr(config, old))
        name, mixer = record["experiment"], record["mixer"]
        if name == "lm":
            k = record.get("n_components") or config.n_components
            point = _lm_points(config, [(f"lm {mixer}", mixer, k)], device.is_cuda)[-1]
        else:
            point = _classification_points(name, config, [mixer], [0], device.is_cuda,
                                           10 if name == "listops" else 4)[-1]
        predicted = point_seconds(point, device)
        return [{"label": f"{name} {mixer} seed {run['seed']}", "measured_seconds": run["train_seconds"],
                 "predicted_seconds": predicted, "measured_bytes": None, "predicted_bytes": point.work.peak}
                for run in record["runs"]]
    if "design" in record and "runs" in record and "arm" in record["design"]:
        design = record["design"]
        point = _recall_run_point(design, design["arm"], record["width"], evaluate=False)
        predicted = point_seconds(point, device)
        return [{"label": f"{record.get('study', 'recall')} {record['arm']} d={record['width']} lr={run['lr']:g} "
                          f"seed {run['seed']}", "measured_seconds": run["cpu_seconds"],
                 "predicted_seconds": predicted, "measured_bytes": None, "predicted_bytes": point.work.peak}
                for run in record["runs"]]
    raise ValueError("record must be a profiling sweep (with 'results'), an experiment record (with 'experiment' "
                     f"and 'runs') or a recall study record (with 'design' and 'runs'); got keys {sorted(record)}")


def _record_profile(record: dict) -> DeviceProfile:
    hardware = record.get("hardware")
    text = str(hardware).lower()
    if (isinstance(hardware, dict) and hardware.get("device", "cpu") == "cpu") or text.startswith("cpu"):
        return PROFILES["cpu-2core"]
    for name in ("t4", "a100", "h100", "h200"):
        if name in text:
            return PROFILES[name]
    return PROFILES["h200"]
