"""Device profiles: what a device can do in the cost model's four numbers, and its memory budget.

A CPU profile is calibrated on recorded measurements; a GPU profile is its spec sheet's rates times fixed
efficiencies (:data:`GPU_FLOP_EFFICIENCY`, ...) until a GPU record exists. :func:`current_profile` picks the one
closest to this machine. The constants' docstrings are in the package's ``__init__``, where the API page reads them.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, replace

import torch

FLOAT32 = 4
GiB = 2**30

CPU_CACHE_BYTES = 8 * 2**20  # a tensor this small is read back from the caches, not from memory


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
HOST = "cpu-2core"  # the CPU beside a GPU

BUDGET_SECONDS = {"tiny": 120.0, "small": 600.0, "medium": 600.0}
TARGET_PROFILE = {"tiny": "cpu-2core", "small": "cpu-2core", "medium": "t4", "full": "h200"}


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
