"""A study's runs sent to Dask: ``python -m gma_teach.study <study> --executor dask``.

Each ``(arm, seed, width)`` run still missing from the records (:func:`gma_teach.study.planned_runs`; in a study
that sweeps learning rates each rate of the sweep is a run of its own, and the later seeds follow once the sweep
is recorded) is one Dask task. A task calls the one runner (:func:`gma_teach.study.run_arm`, restricted to its run)
with the study, the records' folder, the command and its torch threads; the device is whatever its worker sees
(one GPU per worker under ``dask-cuda``). Records land in the run store (:mod:`gma_teach.records`): a task writes
its run's own file, so no run is lost whichever worker ran it or died, a run another process holds is skipped, and
a study interrupted anywhere resumes by giving the same command again. The numbers of a run do not depend on the
worker that ran it: the same run of the local runner gives the same record, its costs and origin aside.

Why Dask: the same code runs on a laptop (its local mode, a ``LocalCluster`` of N single-threaded worker
processes, the default here), on a multi-GPU machine (``dask cuda worker``, one worker per GPU) and on a
university cluster's Slurm (``dask-jobqueue``'s ``SLURMCluster`` submits the workers as Slurm jobs; give its
scheduler's address with ``--scheduler``): the engine the field's clusters and laptops both have, installed from
PyPI with no service to run (``pip install "gma-teach[distributed]"``). Ray needs its own cluster service and a
far larger install; submitit reaches Slurm as well, and the one engine chosen here also runs locally as a fixed
number of worker processes.

Progress: one line per finished run, with the runs done, the runs left and the time left (from the mean time per
finished run and the workers), and a ``tqdm`` bar over the runs.
"""
from __future__ import annotations

import contextlib
import io
import time

import torch
from tqdm.auto import tqdm

from ..designs import as_study, thawed
from .arm import planned_runs, run_arm

__all__ = ["ENGINES", "run_task", "submit_study"]

ENGINES = ("dask",)
"""The engines ``--executor`` takes."""


def run_task(design: dict, arm: str, seed: int, lr: float | None, width: int | None, folder, command: str,
             threads: int) -> dict:
    """One task, as a worker runs it: run ``(seed, lr)`` of ``arm`` (at ``width``) of the study ``design`` (a
    study as a plain mapping, :func:`gma_teach.designs.thawed`: what a worker process receives) into the records
    of ``folder`` with ``threads`` torch threads.

    Returns:
        ``{"arm", "seed", "lr", "width", "lines": what the runner printed, "seconds"}``.
    """
    torch.set_num_threads(threads)
    started = time.perf_counter()
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        run_arm(as_study(design), arm, seeds=(seed,), width=width, folder=folder, command=command,
                runs=[(seed, lr)])
    return {"arm": arm, "seed": seed, "lr": lr, "width": width, "lines": printed.getvalue().splitlines(),
            "seconds": time.perf_counter() - started}


def _tasks(study, arms, seeds, widths, folder) -> list[tuple]:
    return [(arm, seed, lr, width) for width in widths or [None] for arm in arms
            for seed, lr in planned_runs(study, arm, seeds=seeds, width=width, folder=folder)]


def submit_study(study, *, arms=None, seeds=None, widths=None, folder=None, command: str, threads: int = 1,
                 workers: int = 2, scheduler: str | None = None, client=None) -> list[dict]:
    """Run every missing run of ``study`` (its ``arms``, ``seeds`` and ``widths``, default all) as Dask tasks and
    wait for them; returns each task's result (``run_task``), in the order they finished.

    Args:
        study: a :class:`gma_teach.designs.Study` or a dict design.
        arms, seeds, widths: what to run (default: the study's).
        folder: the records' folder (default: the results folder).
        command: the command stored in every run's provenance.
        threads: torch threads per task.
        workers: worker processes of the local cluster (``scheduler`` and ``client`` not given).
        scheduler: the address of a running Dask scheduler (a Slurm cluster's, ``tcp://host:8786``), in place of
            a local cluster.
        client: a ``distributed.Client`` to use as it is.

    Raises:
        ImportError: when Dask's ``distributed`` is not installed (``pip install "gma-teach[distributed]"``).
        ValueError: for ``workers`` or ``threads`` below 1.
    """
    for name, value in (("workers", workers), ("threads", threads)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    try:  # an optional extra: the local runner needs none of it
        from distributed import Client, LocalCluster, as_completed  # optional extra
    except ImportError as error:
        raise ImportError('--executor dask needs Dask: pip install "gma-teach[distributed]" (or distributed)') \
            from error
    study = as_study(study)
    arms = list(arms or study.arms)
    widths = list(widths or study.widths or [])
    design = thawed(study)
    with contextlib.ExitStack() as stack:
        if client is None:
            if scheduler is None:
                cluster = stack.enter_context(LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                                           dashboard_address=None))
                client = stack.enter_context(Client(cluster))
            else:
                client = stack.enter_context(Client(scheduler))
        sent, results = set(), []
        futures = as_completed()
        started = time.perf_counter()
        bar = stack.enter_context(tqdm(total=0, desc=f"{study.name} runs", unit="run"))

        def send():  # every run now possible that is not sent yet (later seeds of a sweep once it is recorded)
            for task in _tasks(study, arms, seeds, widths, folder):
                if task not in sent:
                    sent.add(task)
                    arm, seed, lr, width = task
                    futures.add(client.submit(run_task, design, arm, seed, lr, width, folder, command, threads,
                                              key=f"{study.name}-{arm}-{width}-{seed}-{lr}", pure=False))
                    bar.total += 1
            bar.refresh()

        send()
        for future in futures:
            result = future.result()
            results.append(result)
            bar.update(1)
            done, left = len(results), bar.total - len(results)
            per_run = (time.perf_counter() - started) / done
            for line in result["lines"]:
                tqdm.write(f"{line} [{done} done, {left} left, about {per_run * left / 60:.0f} min left]")
            send()
    return results
