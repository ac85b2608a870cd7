"""The run wing: the code that runs, times and records the book's experiments and studies.

Its modules are the only ones that write records (through :func:`gma_teach.records.write_record`). The story's
modules (``gmm -> mixing -> layer -> mixers -> models``) never import them, and neither do the views (``plots``,
``widgets``), which read :mod:`gma_teach.stats` and the reading modules below (``settings``, ``arm_records``,
``study_values``, ``tables``, ``verdicts``, ``analyses``, ``profile_tables``, ``recall_tables``), never a runner.

* ``experiments`` -- chapters 9 and 10: several seeds and the command line (``python -m gma_teach.experiments``),
  over ``options`` (the experiments' mixers and their options), ``classification`` (chapter 9's data, models and one
  seed) and ``language_model`` (chapter 10's);
* ``reproduce`` -- re-run a recorded seed from its stored command and compare;
* the studies (``python -m gma_teach.study``): ``settings`` (declared designs), ``arm`` (running an arm),
  ``arm_records`` (where an arm's record lives, reading and summarizing it), ``study_values`` (a metric's values
  by seed), ``tables`` (the per-study tables), ``verdicts`` (the declared comparisons and what they found),
  ``analyses`` (the exploratory analyses), ``speed``, ``init_scan``, ``study_cli`` (the command line);
* ``recall`` and ``recall_tables`` -- chapter 12's recall study and its table (``python -m gma_teach.study recall``);
* ``routing_record`` (chapter 11), ``profiling`` and ``profile_tables`` (chapter 8), ``bench``, ``record_gpu``.

The package imports none of its modules here, so that a module can be added beside the others on its own; the
historical paths (``gma_teach.study``, ``gma_teach.experiments``, ...) keep their names and commands.
"""
