"""The experiments of chapters 9 and 10: ``python -m gma_teach.experiments ...`` and the names the chapters read.

The code lives in ``gma_teach.runs.experiments`` (over ``options``, ``classification`` and ``language_model`` of
the run wing; ``gma_teach.runs.reproduce`` for
``python -m gma_teach.experiments reproduce RECORD``); this module is the one public path to the experiments' names
and keeps the command the records use. The model, training and summary names it once passed on under second names
still import, with a ``DeprecationWarning`` naming their one path (:mod:`gma_teach.models`, :mod:`gma_teach.train`,
:mod:`gma_teach.stats`, :mod:`gma_teach.baselines`) and the date they go.
"""
from __future__ import annotations

from ._aliases import deprecated_getattr
from .runs.experiments import (
    CLASSIFIER_MIXERS,
    EXPERIMENTS,
    LM_MIXERS,
    LMRun,
    build_classifier,
    build_lm,
    chapter_study,
    decoding_state_bytes,
    headline,
    listops_data,
    lm_checkpoint_path,
    lm_data,
    load_or_train_lm,
    load_results,
    main,
    majority_accuracy,
    mixer_options,
    routing_monitor,
    run,
    run_classification,
    run_lm,
    text_data,
    validation_bytes,
)
from .runs.reproduce import (
    RECORDING_MODULES,
    REPLAY_TOLERANCE,
    REPRODUCED_FILE,
    compare_seed,
    headline_number,
    reproduce,
    reproduce_command,
)

__all__ = ["CLASSIFIER_MIXERS", "EXPERIMENTS", "LMRun", "LM_MIXERS", "RECORDING_MODULES", "REPLAY_TOLERANCE",
           "REPRODUCED_FILE", "build_classifier", "build_lm", "chapter_study", "compare_seed", "decoding_state_bytes",
           "headline", "headline_number", "listops_data", "lm_checkpoint_path", "lm_data", "load_or_train_lm",
           "load_results", "main", "majority_accuracy", "mixer_options", "reproduce", "reproduce_command",
           "routing_monitor", "run", "run_classification", "run_lm", "text_data", "validation_bytes"]

__getattr__ = deprecated_getattr(__name__, {
    "MIXER_NAMES": "gma_teach.baselines", "DecoderLM": "gma_teach.models", "EncoderClassifier": "gma_teach.models",
    "parameter_counts": "gma_teach.models", "History": "gma_teach.train", "evaluate": "gma_teach.train",
    "fit": "gma_teach.train", "save_atomically": "gma_teach.train", "mean_std": "gma_teach.stats",
})


if __name__ == "__main__":
    main()
