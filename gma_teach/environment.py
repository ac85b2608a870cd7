"""The reader's environment: the scale switch, the device, the cache folder, seeding and the environment report.

Every chapter sizes its experiments through :func:`preset`, never by hand, so one environment variable
(``GMA_TEACH_SCALE``) sizes the whole book for the hardware at hand:

* ``tiny``   -- what CI uses: each chapter runs in about two minutes on two CPU cores;
* ``small``  -- the default on a CPU: at most about ten minutes a chapter on a laptop, results worth reading;
* ``medium`` -- the default on a CUDA GPU with at least :data:`MEDIUM_MIN_GPU_BYTES` of memory: sized for a free
  Colab T4 (16 GB): every chapter within about ten minutes and 12 GiB of GPU memory;
* ``full``   -- only when asked (``GMA_TEACH_SCALE=full``): the paper's sizes where they fit; chapters 9-10 then
  load the recorded long runs and train a short live demo.

:mod:`gma_teach.cost` predicts each chapter's time and peak memory at each scale on named device profiles, and its
tests hold every preset to its budget.
"""
from __future__ import annotations

import os
import platform
import random
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

from .presets import PRESETS

SCALES = ("tiny", "small", "medium", "full")
SCALE_VARIABLE = "GMA_TEACH_SCALE"
MEDIUM_MIN_GPU_BYTES = 14 * 2**30
"""A CUDA GPU with less memory than this (a T4 reports about 14.7 GiB) defaults to ``small`` instead of ``medium``."""


def default_scale() -> str:
    """The scale used when ``GMA_TEACH_SCALE`` is unset: ``"medium"`` on a CUDA GPU with at least
    :data:`MEDIUM_MIN_GPU_BYTES` of memory, ``"small"`` on a smaller GPU or a CPU. ``"full"`` is never a default."""
    if not torch.cuda.is_available():
        return "small"
    total = torch.cuda.get_device_properties(torch.device("cuda")).total_memory
    return "medium" if total >= MEDIUM_MIN_GPU_BYTES else "small"


def scale() -> str:
    """The scale in force: ``GMA_TEACH_SCALE`` if set (one of ``SCALES``), else :func:`default_scale`."""
    value = os.environ.get(SCALE_VARIABLE, "").strip().lower()
    if not value:
        return default_scale()
    if value not in SCALES:
        raise ValueError(f"{SCALE_VARIABLE} must be one of {SCALES}, got {value!r}")
    return value


def preset(name: str, scale_name: str | None = None) -> SimpleNamespace:
    """The sizes that chapter or experiment ``name`` (for example ``"ch04"``) uses at a scale.

    Args:
        name: a key of :data:`gma_teach.presets.PRESETS`.
        scale_name: one of ``SCALES``; ``None`` means :func:`gma_teach.environment.scale`.

    Returns:
        A namespace of sizes (``p.seq_lens``, ``p.n_steps``, ...), with ``p.scale`` naming the scale used.
    """

    if not isinstance(name, str):
        raise TypeError(f"preset name must be a str, got {type(name).__name__}")
    if name not in PRESETS:
        raise ValueError(f"preset name must be one of {sorted(PRESETS)}, got {name!r}")
    chosen = scale() if scale_name is None else scale_name
    if chosen not in SCALES:
        raise ValueError(f"scale_name must be one of {SCALES} or None, got {chosen!r}")
    return SimpleNamespace(scale=chosen, **PRESETS[name][chosen])


def device() -> torch.device:
    """``cuda`` when a CUDA GPU is visible, else ``cpu``."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def cache_dir() -> Path:
    """Folder for processed data and checkpoints: ``$GMA_TEACH_CACHE``, else ``~/.cache/gma_teach`` (created)."""
    path = Path(os.environ.get("GMA_TEACH_CACHE") or Path.home() / ".cache" / "gma_teach")
    path.mkdir(parents=True, exist_ok=True)
    return path


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and torch's generators (all devices)."""


    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _triton_line() -> str:
    try:
        from . import kernels  # optional dependency: the kernels need triton
    except ImportError as error:  # the package works without triton
        return f"not available ({error})"
    return kernels.triton_status()


def _scale_line() -> str:
    chosen = scale()
    if os.environ.get(SCALE_VARIABLE, "").strip():
        return f"{chosen} (from {SCALE_VARIABLE})"
    hint = f"; {SCALE_VARIABLE}=full for the paper's sizes" if chosen == "medium" else ""
    return f"{chosen} (default on this device{hint})"


def env_report() -> str:
    """A short text naming versions, device, GPU and compute capability, Triton's mode and the scale in force."""
    from . import __version__  # a true cycle: gma_teach/__init__ imports this module

    lines = [
        f"python     {platform.python_version()} ({sys.platform})",
        f"torch      {torch.__version__}",
        f"gma_teach  {__version__}",
        f"triton     {_triton_line()}",
    ]
    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        bf16 = "yes" if torch.cuda.is_bf16_supported() else "no"
        memory = torch.cuda.get_device_properties(torch.device("cuda")).total_memory / 2**30
        lines.append(f"device     cuda: {torch.cuda.get_device_name()} (sm_{major}{minor}, {memory:.1f} GiB, "
                     f"bf16 {bf16})")
    else:
        lines.append(f"device     cpu ({os.cpu_count()} logical cores, {torch.get_num_threads()} torch threads)")
    lines.append(f"scale      {_scale_line()}")
    return "\n".join(lines)
