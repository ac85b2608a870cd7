"""The run wing: the code that runs, times and records the book's experiments and studies.

Its modules are the only ones that write records (through :func:`gma_teach.records.write_record`). The story's
modules (``gmm -> mixing -> layer -> mixers -> models``) never import them, and neither do the views (``plots``,
``widgets``), which read :mod:`gma_teach.stats`, :mod:`gma_teach.designs` and the reading modules below
(``arm_records``, ``study_values``, ``tables``, ``verdicts``, ``analyses``, ``profile_tables``, ``recall_tables``),
never a runner.

The studies' designs are data, in :mod:`gma_teach.designs` (typed :class:`~gma_teach.designs.Study` and
:class:`~gma_teach.designs.Arm`). Every study, the recall study included, runs through one runner (``arm``), one
training loop (:func:`gma_teach.train.fit`, whose ``task`` is the pluggable step) and one path to its tables and
verdicts (``verdicts``, at one level, :data:`gma_teach.designs.ALPHA`).

* ``experiments`` -- chapters 9 and 10: several seeds and the command line (``python -m gma_teach.experiments``),
  over ``options`` (the experiments' mixers and their options), ``classification`` (chapter 9's data, models and one
  seed) and ``language_model`` (chapter 10's);
* ``reproduce`` -- re-run a recorded seed from its stored command and compare;
* the studies (``python -m gma_teach.study``): ``arm`` (the runner: a study resolved once per arm and width, then
  seed by seed), ``arm_records`` (where an arm's record lives, reading and summarizing it), ``study_values`` (a
  metric's values by seed), ``tables`` (the per-study tables), ``verdicts`` (the declared comparisons and what they
  found), ``analyses`` (the exploratory analyses), ``recall`` and ``recall_tables`` (what is the recall study's
  own: its data, model, one seed and its table), ``synthesis`` (Part IV at a glance), ``speed``, ``init_scan``,
  ``study_cli`` (the command line);
* ``routing_record`` (chapter 11), ``profiling`` and ``profile_tables`` (chapter 8), ``bench``, ``record_gpu``.

The package imports none of its modules here, so that a module can be added beside the others on its own. Readers
reach these names through one public path each: the command modules ``gma_teach.study``, ``gma_teach.experiments``,
``gma_teach.profiling``, ``gma_teach.bench``, ``gma_teach.record_gpu`` and ``gma_teach.routing_record``, which
are also the commands the records store; the API page documents those, not the modules here.
"""
