"""Chapter 8's Table 1 protocol: ``python -m gma_teach.profiling ...`` and the names the chapter reads.

The code lives in ``gma_teach.runs.profiling`` (running the sweep) and ``gma_teach.runs.profile_tables``
(reading it); this module keeps the command and the names at the path the book and the records use.
"""
from __future__ import annotations

from .runs.profile_tables import (
    PAPER_TABLE_1,
    fit_slopes,
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

__all__ = ["DEFAULT_MIXERS", "PAPER_TABLE_1", "block_fits", "fit_slopes", "format_table", "label_of", "load_recorded",
           "main", "memory_crossing", "n_sweep", "paper_memory_crossing", "profile_mixer", "run_recorded", "sweep",
           "sweep_config", "table1_options"]


if __name__ == "__main__":
    main()
