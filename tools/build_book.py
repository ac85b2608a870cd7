"""Build the book with visible progress: execute the notebooks one at a time into jupyter-book's cache, then render.

README's command 1 runs it from the repository root::

    python tools/build_book.py                 # the reader's build: a failing cell shows its error on its page
    python tools/build_book.py --strict        # CI: any cell error fails the run, and the rendering uses -W -n
    python tools/build_book.py --record book/results/build_seconds_cpu_small.json   # ... and record its times

Every notebook of ``_toc.yml`` is executed by the same myst-nb client that ``jupyter-book build .`` uses, into the same
jupyter-cache folder (``_build/.jupyter_cache``), so the rendering that follows finds every notebook cached and
executes nothing. A notebook whose code has not changed since its last run is taken from the cache. While a notebook
runs, a bar counts the expected seconds of the whole book (each page's expected time from
:func:`gma_teach.cost.predict` on this machine's profile: the chapters, the answers, the primer and Part IV's
findings) and shows the time left; a notebook the model does not cover (none of the book's) counts the model's fixed
cost of a chapter. Notebook cells show no output while a batch build runs, so this bar is the progress a reader sees.
``--record`` keeps, beside each notebook's measured seconds, the seconds the bar expected.

The reader's build has no per-cell time limit and records a cell's error on its page (``execute.allow_errors`` in
``_config.yml``); ``--strict`` executes with ``allow_errors`` off and a per-cell limit, stops before rendering when
any notebook failed, and passes ``-W -n --keep-going`` to jupyter-book, so a warning fails the build as well.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml
from tqdm import tqdm

from gma_teach.records import git_commit, load_average, provenance, write_record

ROOT = Path(__file__).resolve().parent.parent
STRICT_CELL_TIMEOUT = 1800  # seconds a cell may run in the strict build (CI, at tiny) before it counts as hung


def toc_notebooks(root: Path = ROOT) -> list[Path]:
    """The notebooks of ``_toc.yml``, in reading order."""
    toc = yaml.safe_load((root / "_toc.yml").read_text())

    def files(node):
        if isinstance(node, dict):
            if "file" in node:
                yield node["file"]
            for key, value in node.items():
                if key != "file":
                    yield from files(value)
        elif isinstance(node, list):
            for item in node:
                yield from files(item)

    names = [toc["root"], *files({key: value for key, value in toc.items() if key != "root"})]
    return [root / f"{name}.ipynb" for name in names if (root / f"{name}.ipynb").exists()]


def page_key(path: Path) -> str | None:
    """The cost model's key of a notebook of the book (a key of :data:`gma_teach.cost.CHAPTERS`): ``"chNN"`` for a
    chapter ``book/NN_*.ipynb``, ``"answersNN"`` for ``book/answers/NN_answers.ipynb``, the notebook's name for
    another page (``"statistics_primer"``); ``None`` for a notebook the model does not cover."""
    from gma_teach import cost

    number = path.name.split("_")[0]
    if path.parent.name == "answers" and path.parent.parent.name == "book":
        key = f"answers{number}"
    elif path.parent.name == "book":
        key = f"ch{number}" if number[:1].isdigit() else path.stem
    else:
        return None
    return key if key in cost.CHAPTERS else None


def expected_seconds(path: Path, scale: str) -> tuple[float, bool]:
    """The expected seconds of one notebook on this machine and whether they come from the cost model (``False``: a
    notebook the model does not cover, counted at the model's fixed cost of a chapter)."""
    from gma_teach import cost

    key = page_key(path)
    if key is None:
        return cost.CHAPTER_FIXED_SECONDS, False
    return cost.predict(key, scale, cost.current_profile()).seconds, True


class _Logger:
    """The logger interface myst-nb's execution client calls (``info``/``warning`` with ``subtype``); it keeps the
    warnings and drops the rest."""

    def __init__(self):
        self.warnings: list[str] = []

    def debug(self, message, **kwargs):
        pass

    info = debug

    def warning(self, message, **kwargs):
        self.warnings.append(str(message))

    error = warning


def execute_into_cache(path: Path, cache_path: Path, *, strict: bool) -> tuple[bool, float, str]:
    """Execute one notebook (or take it from the cache) exactly as ``jupyter-book build`` does in ``cache`` mode.

    Returns ``(succeeded, seconds, message)``. In the reader's build cell errors are allowed: they are kept in the
    cached outputs and shown on the page. In the strict build the first cell error stops the notebook, which is then
    not cached, and ``succeeded`` is ``False``.
    """
    from myst_nb.core.config import NbParserConfig
    from myst_nb.core.execute import create_client
    from myst_nb.core.read import standard_nb_read

    notebook = standard_nb_read(path.read_text(encoding="utf-8"))
    config = NbParserConfig(execution_mode="cache", execution_cache_path=str(cache_path),
                            execution_allow_errors=not strict,
                            execution_timeout=STRICT_CELL_TIMEOUT if strict else -1,
                            execution_raise_on_error=False, execution_show_tb=True)
    logger = _Logger()
    started = time.perf_counter()
    with create_client(notebook, str(path), config, logger) as client:
        succeeded = client.exec_metadata is None or client.exec_metadata["succeeded"]
        error = None if client.exec_metadata is None else client.exec_metadata.get("error")
    seconds = time.perf_counter() - started
    return bool(succeeded), seconds, (error or "") + ("\n" + "\n".join(logger.warnings) if logger.warnings else "")


def _shown(path: Path) -> str:
    """``path`` as the build shows it: relative to the repository root when it is inside it."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _tick(bar: tqdm, start_position: float, budget: float, stop: threading.Event):
    """Move ``bar`` with the clock while a notebook runs, up to just short of its expected end."""
    started = time.perf_counter()
    while not stop.wait(1.0):
        target = start_position + min(time.perf_counter() - started, 0.98 * budget)
        if target > bar.n:
            bar.update(target - bar.n)


def execute_all(notebooks: list[Path], scale: str, *, strict: bool, cache_path: Path,
                timings: list | None = None) -> list[tuple[Path, str]]:
    """Execute ``notebooks`` one at a time with a bar in expected seconds; returns the failures ``(path, message)``.

    ``timings``: a list that receives, per notebook, ``{"notebook", "seconds", "expected_seconds", "modelled",
    "succeeded", "load_after"}`` (wall seconds, whether the cost model covers it, the 1-minute load average after it).
    """
    expected = {path: expected_seconds(path, scale) for path in notebooks}
    total = sum(seconds for seconds, _ in expected.values())
    failures = []
    bar_format = "{desc} |{bar}| {percentage:3.0f}% of the expected time, elapsed {elapsed}, left about {remaining}"
    with tqdm(total=round(total), bar_format=bar_format, file=sys.stderr, dynamic_ncols=True) as bar:
        position = 0.0
        for index, path in enumerate(notebooks, 1):
            seconds, modelled = expected[path]
            estimate = f"expected {seconds / 60:.1f} min" if modelled else "no estimate"
            bar.set_description(f"[{index}/{len(notebooks)}] {_shown(path)} ({estimate})")
            stop = threading.Event()
            ticker = threading.Thread(target=_tick, args=(bar, position, seconds, stop), daemon=True)
            ticker.start()
            try:
                succeeded, took, message = execute_into_cache(path, cache_path, strict=strict)
            finally:
                stop.set()
                ticker.join()
            position += seconds
            bar.update(max(position - bar.n, 0))
            if timings is not None:
                load = load_average()
                timings.append({"notebook": _shown(path), "seconds": round(took, 1),
                                "expected_seconds": round(seconds, 1), "modelled": modelled,
                                "succeeded": succeeded, "load_after": load[0] if load else None})
            outcome = "ok" if succeeded else "FAILED"
            bar.write(f"{_shown(path)}: {outcome} in {took:.0f} s ({estimate})")
            if not succeeded:
                failures.append((path, message))
    return failures


def measured_over_expected(timings: list[dict]) -> list[float]:
    """The smallest and the largest ratio of a notebook's measured seconds to the seconds the bar expected, over
    ``timings`` (:func:`execute_all`'s list)."""
    ratios = [timing["seconds"] / timing["expected_seconds"] for timing in timings]
    return [round(min(ratios), 3), round(max(ratios), 3)]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--strict", action="store_true",
                        help="fail on any cell error (no page with a traceback) and render with -W -n --keep-going")
    parser.add_argument("--execute-only", action="store_true", help="fill the cache, do not render")
    parser.add_argument("--builddir", type=Path, default=ROOT / "_build",
                        help="jupyter-book's output folder (the cache is its .jupyter_cache)")
    parser.add_argument("--record", type=Path, default=None,
                        help="write the measured times (each notebook, the rendering, the whole command) and their "
                             "provenance to this JSON file")
    args = parser.parse_args(argv)
    started = time.perf_counter()

    if args.builddir.name != "_build":
        parser.error(f"--builddir must end in _build (jupyter-book writes there), got {args.builddir}")
    from gma_teach.environment import cache_dir, scale

    # A batch build saves whatever a cell prints into the page: gma_teach hides its training bars when CI is set
    # (gma_teach.train), and this command shows its own bar instead.
    os.environ.setdefault("CI", "1")
    notebooks = toc_notebooks()
    cache_path = args.builddir / ".jupyter_cache"
    command_line = "python tools/build_book.py " + " ".join(argv if argv is not None else sys.argv[1:])
    record = {**provenance(command_line.strip()), "commit": git_commit(ROOT), "scale": scale(), "strict": args.strict,
              "cache_was_empty": not cache_path.exists(),
              "data_cache_was_empty": not any(cache_dir().iterdir()),  # gma_teach's data and checkpoints
              "what": "wall seconds of README's command 1: each notebook executed into jupyter-book's cache, the "
                      "rendering, and the whole command", "notebooks": []}
    print(f"executing {len(notebooks)} notebooks at scale {scale()!r} into {args.builddir / '.jupyter_cache'}"
          f"{' (strict)' if args.strict else ''}", flush=True)
    failures = execute_all(notebooks, scale(), strict=args.strict, cache_path=cache_path, timings=record["notebooks"])
    record["execute_seconds"] = round(time.perf_counter() - started, 1)
    for path, message in failures:
        print(f"\n{_shown(path)} failed:\n{message}", file=sys.stderr)
    if failures and args.strict:
        print(f"strict build: {len(failures)} notebook(s) failed; not rendering", file=sys.stderr)
        return 1
    if args.execute_only:
        return 0
    command = ["jupyter-book", "build", str(ROOT), "--path-output", str(args.builddir.parent)]
    if args.strict:
        command += ["-W", "-n", "--keep-going"]
    print("rendering:", " ".join(command), flush=True)
    rendered = time.perf_counter()
    returncode = subprocess.run(command, cwd=ROOT).returncode
    if args.record is not None:
        record.update(render_seconds=round(time.perf_counter() - rendered, 1), render_returncode=returncode,
                      total_seconds=round(time.perf_counter() - started, 1),
                      measured_over_expected=measured_over_expected(record["notebooks"]))
        write_record(args.record, record)
        low, high = record["measured_over_expected"]
        print(f"recorded the times in {args.record}: {record['total_seconds'] / 60:.1f} min in all; each notebook "
              f"took {low:.2f} to {high:.2f} times the seconds the bar expected", flush=True)
    return returncode


if __name__ == "__main__":
    sys.exit(main())
