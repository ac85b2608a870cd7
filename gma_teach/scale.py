"""The scale switch, the device choice, the cache folder and the environment report.

Every chapter sizes its experiments through :func:`preset`, never by hand, so one environment variable
(``GMA_TEACH_SCALE``) shrinks the whole book for CI or grows it on a GPU:

* ``tiny``  -- what CI uses: each chapter runs in at most about two minutes on two CPU cores;
* ``small`` -- the default on a CPU: at most about ten minutes a chapter, results worth reading;
* ``full``  -- the default on a GPU: the paper's sizes where they fit.
"""
from __future__ import annotations

import os
import platform
import sys
from pathlib import Path
from types import SimpleNamespace

import torch

SCALES = ("tiny", "small", "full")
_SCALE_VARIABLE = "GMA_TEACH_SCALE"


def scale() -> str:
    """The scale in force: ``GMA_TEACH_SCALE`` if set, else ``"full"`` on a CUDA GPU and ``"small"`` otherwise."""
    value = os.environ.get(_SCALE_VARIABLE, "").strip().lower()
    if not value:
        return "full" if torch.cuda.is_available() else "small"
    if value not in SCALES:
        raise ValueError(f"{_SCALE_VARIABLE} must be one of {SCALES}, got {value!r}")
    return value


def preset(name: str, scale_name: str | None = None) -> SimpleNamespace:
    """The sizes that chapter or experiment ``name`` (for example ``"ch04"``) uses at a scale.

    Args:
        name: a key of :data:`gma_teach.presets.PRESETS`.
        scale_name: ``"tiny"``, ``"small"`` or ``"full"``; ``None`` means :func:`scale`.

    Returns:
        A namespace of sizes (``p.seq_lens``, ``p.n_steps``, ...), with ``p.scale`` naming the scale used.
    """
    from .presets import PRESETS

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
    import random

    import numpy as np

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _triton_line() -> str:
    try:
        from . import kernels
    except ImportError as error:  # the package works without triton
        return f"not available ({error})"
    return kernels.triton_status()


def env_report() -> str:
    """A short text naming versions, device, GPU and compute capability, Triton's mode and the scale in force."""
    from . import __version__

    lines = [
        f"python     {platform.python_version()} ({sys.platform})",
        f"torch      {torch.__version__}",
        f"gma_teach  {__version__}",
        f"triton     {_triton_line()}",
    ]
    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        bf16 = "yes" if torch.cuda.is_bf16_supported() else "no"
        lines.append(f"device     cuda: {torch.cuda.get_device_name()} (sm_{major}{minor}, bf16 {bf16})")
    else:
        lines.append(f"device     cpu ({os.cpu_count()} logical cores, {torch.get_num_threads()} torch threads)")
    lines.append(f"scale      {scale()}")
    return "\n".join(lines)
