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

Its parts, each a private module with one job: ``_devices`` (the profiles), ``_work`` (a call's work, a chapter's
points, their time on a profile, the work of the book's operations), ``_chapters`` (the chapters' workloads and the
training runs they share), ``_triton`` (chapters 7 and 7b: the compiled kernels and the interpreter), ``_recall``
(the recall model, chapter 12, and the ``"recall"`` entry, which reads the recall study's declared design,
``gma_teach.designs.RECALL_STUDY``, instead of a copy of it), ``_pages`` (the answers, the primer, Part IV),
``_predict`` (the registry and the predictions) and ``_compare`` (the model against records). The constants'
docstrings are here, where the API page reads them.
"""
from __future__ import annotations

from . import _chapters, _devices, _pages, _predict, _recall, _triton
from ._chapters import (LISTOPS_SECONDS_PER_TOKEN, LM_TRAIN_TOKENS, LM_VOCAB, TOKENIZE_SECONDS_PER_TOKEN, PresetSizes,
                        preset_sizes)
from ._compare import compare_with_record
from ._devices import (FLOAT32, GPU_AMP_EFFICIENCY, GPU_BANDWIDTH_EFFICIENCY, GPU_FLOP_EFFICIENCY, GPU_OP_SECONDS,
                       PROFILES, DeviceProfile, GiB, current_profile, profile)
from ._pages import ANSWER_10_KS, SIZED_WORK
from ._predict import fits, point_fits, points, predict
from ._recall import (CONV_BLOCK_FLOPS_PER_TOKEN_WIDTH, CONV_BLOCK_OPS, MQAR_SECONDS_PER_TOKEN,
                      OPTIMIZER_OPS_PER_TENSOR, RECALL_DEMO_OPS, recall_run_work, study_seconds)
from ._triton import triton_gma_launches, triton_gma_work
from ._work import (ELEMENTWISE_PASSES_SOFTMAX, Point, PointPrediction, Prediction, Work, attention_work, block_work,
                    mixer_flops, point_seconds, training_work)

__all__ = ["FLOAT32", "GiB", "DeviceProfile", "GPU_FLOP_EFFICIENCY", "GPU_AMP_EFFICIENCY", "GPU_BANDWIDTH_EFFICIENCY",
           "GPU_OP_SECONDS", "PROFILES", "HOST", "BUDGET_SECONDS", "TARGET_PROFILE", "profile", "current_profile",
           "Work", "Point", "PointPrediction", "Prediction", "point_seconds", "ELEMENTWISE_PASSES_SOFTMAX",
           "attention_work", "mixer_flops", "block_work", "training_work", "LISTOPS_SECONDS_PER_TOKEN",
           "CHAPTER_FIXED_SECONDS", "PresetSizes", "preset_sizes", "SKLEARN_SECONDS", "ADAM_STEP_OPS",
           "INTERPRETED_SECONDS_PER_BLOCK", "INTERPRETED_SECONDS_PER_LAUNCH", "INTERPRETED_CAUSAL_FACTOR",
           "INTERPRETED_ROWS", "TRITON_COMPILE_SECONDS", "TRITON_KERNELS_PER_DIRECTION", "triton_gma_launches",
           "triton_gma_work", "LM_VOCAB", "TOKENIZE_SECONDS_PER_TOKEN", "LM_TRAIN_TOKENS", "LM_VAL_TOKENS",
           "MQAR_SECONDS_PER_TOKEN", "CONV_BLOCK_FLOPS_PER_TOKEN_WIDTH", "CONV_BLOCK_OPS", "OPTIMIZER_OPS_PER_TENSOR",
           "CPU_CACHE_BYTES", "recall_run_work",
           "study_seconds", "RECALL_DEMO_OPS", "PAGE_FIXED_SECONDS", "PAGE_SECONDS",
           "ANSWER_10_KS", "SIZED_WORK", "PAGES", "CHAPTERS", "PRESET_OF", "points", "predict", "fits", "point_fits",
           "compare_with_record"]

# The constants with a docstring, taken from their modules by name, so that the API page reads their text here.
HOST = _devices.HOST
"""The profile of the CPU beside a GPU (a Colab VM has two vCPUs); it runs data generation, float64 demos, figures."""

BUDGET_SECONDS = _devices.BUDGET_SECONDS
"""Time a chapter may take at each scale on its target profile (:data:`TARGET_PROFILE`); ``full`` has none."""
TARGET_PROFILE = _devices.TARGET_PROFILE
"""The device each scale is sized for."""

CHAPTER_FIXED_SECONDS = _chapters.CHAPTER_FIXED_SECONDS
"""Fixed cost of any chapter, on the host, for a kernel start, the imports and the figures; most of a light
chapter's time at tiny, where chapter_seconds_cpu_tiny.json times the lightest chapters at 4-7 s."""
SKLEARN_SECONDS = _chapters.SKLEARN_SECONDS
"""Importing scikit-learn (2 s) and its first diagonal mixture fit (0.8 s), chapter 2's agreement check, on a CPU."""
ADAM_STEP_OPS = _chapters.ADAM_STEP_OPS
"""The eager ops of one of chapter 2's Adam steps on the mixture's log-likelihood, its forward and backward, the
optimizer's loop over three tensors and a ``.item()`` (1.3 ms a step measured at small, 2.0 s for 1,500 steps)."""

INTERPRETED_SECONDS_PER_BLOCK = _triton.INTERPRETED_SECONDS_PER_BLOCK
"""Seconds one interpreted program takes for one ``(rows x K tile)`` block step of the GMA kernels, one core."""
INTERPRETED_SECONDS_PER_LAUNCH = _triton.INTERPRETED_SECONDS_PER_LAUNCH
"""Seconds of one interpreted kernel launch beyond its block steps (the interpreter copies every argument)."""
INTERPRETED_CAUSAL_FACTOR = _triton.INTERPRETED_CAUSAL_FACTOR
"""A causal block step's time against a bidirectional one's, since it also builds its chunk's ``(rows x rows)``
affinity."""
INTERPRETED_ROWS = _triton.INTERPRETED_ROWS
"""Rows per block and longest causal chunk of the interpreted kernels (``gma_teach.kernels.tile_sizes(...,
arch=None)``: 64 rows and K tiles of at most 64 components; tests/test_cost.py checks it against the kernels)."""
TRITON_COMPILE_SECONDS = _triton.TRITON_COMPILE_SECONDS
"""Compiling one kernel specialization on a GPU (a launch with new tiles or flags compiles once; an estimate until
a GPU record measures it)."""
TRITON_KERNELS_PER_DIRECTION = _triton.TRITON_KERNELS_PER_DIRECTION
"""Kernels a forward + backward compiles in one direction (``gma_teach.kernels``' launch list: 10 bidirectional,
11 causal)."""

LM_VAL_TOKENS = _chapters.LM_VAL_TOKENS
"""Tokens of a corpus's validation split, each evaluation's forward passes (stdlib 196 blocks of 128; WikiText's
validation text, 218k words, in GPT-2 tokens)."""
CPU_CACHE_BYTES = _devices.CPU_CACHE_BYTES
"""A tensor at most this large is read back from the CPU's caches between operations, not from memory; the recall
model's ``(B, N, D)`` activation of the study is 1 MiB, GMA's ``(B, H, N, K)`` one 4 MiB at K=256."""

PAGE_FIXED_SECONDS = _pages.PAGE_FIXED_SECONDS
"""The fixed cost of a page that is not a chapter, a kernel start and the imports and few figures (the lightest pages
of build_seconds_cpu_small.json took 2.2-2.6 s)."""
PAGE_SECONDS = _pages.PAGE_SECONDS
"""Seconds of each page's fixed-size work beyond :data:`PAGE_FIXED_SECONDS`: checkers on their own small inputs, the
records read and plotted, the same at every scale (build_seconds_cpu_small.json's time less the fixed cost and the
page's sized work)."""
PAGES = _pages.PAGES
"""The pages the book executes besides the chapters, keyed ``"answersNN"`` for ``book/answers/NN_answers.ipynb``
(it reads chapter NN's preset, :data:`PRESET_OF`) and by the notebook's name for the other pages."""

CHAPTERS = _predict.CHAPTERS
"""Everything the model predicts, by key, namely the chapters ``"ch01"`` ... ``"ch12"`` with ``"ch07b"`` (the keys
``tools/build_book.py`` and ``tools/time_chapters.py`` derive from the notebooks' names; chapter 7b reads chapter 7's
preset, see :data:`PRESET_OF`) and every other page the book executes (:data:`PAGES`); one GMA run (one seed) of
each experiment preset, ``"listops"``, ``"text"`` and ``"lm"``; and ``"recall"``, one run of the recall study (one
arm, seed and learning rate of its declared design, ``gma_teach.designs.RECALL_STUDY``: its largest GMA arm at its
first width, the same at every scale)."""
PRESET_OF = _predict.PRESET_OF
"""The preset an entry of :data:`CHAPTERS` reads when it is not the entry's own name: chapter 7b runs on chapter 7's
sizes and an answers page on its chapter's; ``None``: the entry has no preset (the recall study's one declared
setting, ``gma_teach.designs.RECALL_STUDY``; the primer and Part IV's findings, which read records)."""
