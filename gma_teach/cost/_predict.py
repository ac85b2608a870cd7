"""Predicting: the registry of everything the model predicts (``CHAPTERS``, each entry's preset ``PRESET_OF``), a
chapter's points at a scale, its time and peak on a device profile, whether it fits, and whether one sweep point
fits before it runs. The registry's docstrings are in the package's ``__init__``, where the API page reads them.
"""
from __future__ import annotations

import math

from ..environment import SCALES
from ..layer import DEFAULT_COMPONENTS
from . import _chapters, _recall, _triton
from ._chapters import CHAPTER_FIXED_SECONDS, classification_points, lm_points, preset_sizes
from ._devices import BUDGET_SECONDS, FLOAT32, HOST, PROFILES, current_profile, profile
from ._pages import PAGE_FIXED_SECONDS, PAGES
from ._work import Point, PointPrediction, Prediction, attention_work, block_work, point_seconds


def _experiment(name):
    def points(q, on_cuda):
        if name == "lm":
            return lm_points(q, [(f"lm gma K={q.n_components}", "gma", q.n_components)], on_cuda)
        return classification_points(name, q, ["gma"], [0], on_cuda, 10 if name == "listops" else 4)
    return points


CHAPTERS = {"ch01": _chapters.ch01, "ch02": _chapters.ch02, "ch03": _chapters.ch03, "ch04": _chapters.ch04,
            "ch05": _chapters.ch05, "ch06": _chapters.ch06, "ch07": _triton.ch07, "ch07b": _triton.ch07b,
            "ch08": _chapters.ch08, "ch09": _chapters.ch09, "ch10": _chapters.ch10, "ch11": _chapters.ch11,
            "ch12": _recall.ch12,
            **PAGES, "listops": _experiment("listops"), "text": _experiment("text"), "lm": _experiment("lm"),
            "recall": _recall.recall}
PRESET_OF = {"ch07b": "ch07", "recall": None, "statistics_primer": None, "part_iv_findings": None,
             **{f"answers{n:02d}": f"ch{n:02d}" for n in range(1, 13)}}


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
            study as its design ``gma_teach.designs.RECALL_STUDY`` declares it, whatever the scale).
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
               d_value: int | None = None,
               n_components: int = DEFAULT_COMPONENTS, chunk_size: int = 64, backward: bool = False,
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
                          batch_size=batch_size, n_components=n_components, on_cuda=device.is_cuda)
        inputs = 2 * FLOAT32 * batch_size * seq_len * d_route
    else:
        d_value = d_route if d_value is None else d_value
        work = attention_work(form, batch_size, n_heads, seq_len, d_route, d_value, n_components,
                              chunk_size=chunk_size, backward=backward)
        inputs = FLOAT32 * batch_size * n_heads * seq_len * (2 * d_route + 2 * d_value)
    return work.peak + inputs <= available
