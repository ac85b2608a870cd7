"""Chapter 8's Table 1 protocol: ``python -m gma_teach.profiling ...`` and the names the chapter reads.

The code lives in ``gma_teach.runs.profiling`` (running the sweep) and ``gma_teach.runs.profile_tables``
(reading it); this module keeps the command and the names at the path the book and the records use.
"""
from __future__ import annotations

from .runs.block_profile import (
    BLOCK_MIXERS,
    BLOCK_SEQ_LENS,
    block_mixer,
    interleaved_run,
    run_block_record,
    saved_for_backward,
    time_by_operator,
)
from .runs.profile_tables import (
    PAPER_TABLE_1,
    TARGETS,
    block_ratios,
    block_verdicts,
    extra_time,
    fit_slopes,
    format_block_table,
    format_breakdown,
    format_table,
    label_of,
    load_recorded,
    memory_crossing,
    n_sweep,
    paper_memory_crossing,
)
from .runs.profiling import (
    DEFAULT_MIXERS,
    block_fits,
    main,
    profile_mixer,
    run_recorded,
    sweep,
    sweep_config,
    table1_options,
)

__all__ = ["BLOCK_MIXERS", "BLOCK_SEQ_LENS", "DEFAULT_MIXERS", "PAPER_TABLE_1", "TARGETS", "block_fits", "block_mixer",
           "block_ratios", "block_verdicts", "extra_time", "fit_slopes", "format_block_table", "format_breakdown",
           "format_table", "interleaved_run", "label_of", "load_recorded", "main", "memory_crossing", "n_sweep",
           "paper_memory_crossing", "profile_mixer", "run_block_record", "run_recorded", "saved_for_backward", "sweep",
           "sweep_config", "table1_options", "time_by_operator"]


if __name__ == "__main__":
    main()
