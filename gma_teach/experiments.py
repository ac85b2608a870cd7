"""The experiments of chapters 9 and 10: ``python -m gma_teach.experiments ...`` and the names the chapters read.

The code lives in ``gma_teach.runs.experiments`` (over ``options``, ``classification`` and ``language_model`` of
the run wing; ``gma_teach.runs.reproduce`` for
``python -m gma_teach.experiments reproduce RECORD``); this module keeps the command and the names at the path the
book and the records use, with the model, training and summary helpers the chapters reach through it.
"""
from __future__ import annotations

from .baselines import MIXER_NAMES
from .models import DecoderLM, EncoderClassifier, parameter_counts
from .runs.experiments import (
    CLASSIFIER_MIXERS,
    EXPERIMENTS,
    LM_MIXERS,
    LMRun,
    build_classifier,
    build_lm,
    decoding_state_bytes,
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
from .runs.reproduce import RECORDING_MODULES, REPRODUCED_FILE, compare_seed, reproduce, reproduce_command
from .stats import mean_std
from .train import History, evaluate, fit, save_atomically

__all__ = ["CLASSIFIER_MIXERS", "DecoderLM", "EXPERIMENTS", "EncoderClassifier", "History", "LMRun", "LM_MIXERS",
           "MIXER_NAMES", "RECORDING_MODULES", "REPRODUCED_FILE", "build_classifier", "build_lm", "compare_seed",
           "decoding_state_bytes", "evaluate", "fit", "listops_data", "lm_checkpoint_path", "lm_data",
           "load_or_train_lm", "load_results", "main", "majority_accuracy", "mean_std", "mixer_options",
           "parameter_counts", "reproduce", "reproduce_command", "routing_monitor", "run", "run_classification",
           "run_lm", "save_atomically", "text_data", "validation_bytes"]


if __name__ == "__main__":
    main()
