"""Training speed of every arm of a language-model study, measured together in one process."""
from __future__ import annotations

import torch

from .. import _checks, measure
from ..designs import as_study
from ..train import fit
from .arm import resolve, study_data
from .language_model import build_lm

__all__ = ["measure_training_speed"]


def measure_training_speed(study: dict, *, steps: int = 3, repeat: int = 3, warmup: int = 1, data=None) -> dict:
    """Training throughput of every arm of a language-model study, measured in one process so that the arms can
    be compared: each arm's model (built as its runs build it) trains ``steps`` steps of :func:`~gma_teach.train.fit`
    per call, the arms interleaved, on one thread, and the fastest of ``repeat`` calls is kept
    (:func:`gma_teach.measure.compare_timings`). The seeds' own ``tokens_per_second`` were measured on whatever
    load the machine had while each ran; these are the numbers to compare.

    Returns:
        ``{"steps_per_call", "tokens_per_step", "seconds_per_step": {arm: s}, "tokens_per_second": {arm: ...}}``.
    """
    study = as_study(study)
    if study.get("experiment", "lm") != "lm":
        raise ValueError(f"study must be a language-model study, got experiment {study.get('experiment')!r}")
    steps = _checks.positive_int("steps", steps)
    data = data if data is not None else study_data(study)
    q = resolve(study, next(iter(study.arms))).namespace()  # the training sizes do not depend on the arm
    blocks = data.train[: q.batch_size * steps]

    def one_call(model):
        return lambda: fit(model, blocks, steps=steps, lr=q.lr, weight_decay=q.weight_decay, batch_size=q.batch_size,
                           task="lm", progress=False, seed=0)

    calls = {}
    for name in study.arms:
        config = resolve(study, name)  # the arm's own heads and options, as its runs build it
        torch.manual_seed(0)
        model = build_lm(config.namespace(), config.arm.mixer, data.tokenizer.n_vocab, options=dict(config.options))
        calls[name] = one_call(model)
    seconds = measure.compare_timings(calls, repeat=repeat, warmup=warmup, threads=1)
    tokens_per_step = q.batch_size * q.seq_len
    return {"steps_per_call": steps, "tokens_per_step": tokens_per_step,
            "seconds_per_step": {arm: t / steps for arm, t in seconds.items()},
            "tokens_per_second": {arm: tokens_per_step * steps / t for arm, t in seconds.items()}}
