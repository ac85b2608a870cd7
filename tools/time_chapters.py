"""Time every chapter notebook at one scale and record the wall-clock seconds with their provenance.

The record is what :mod:`gma_teach.cost` calibrates its CPU profile against and what a chapter can show beside the
model's prediction::

    python tools/time_chapters.py --scale tiny --out book/results/chapter_seconds_cpu_tiny.json

Each notebook runs through nbval (``pytest --nbval-lax``), exactly as the test command does, so a time includes the
kernel start, the imports and every figure. The load average before and after each chapter goes into the record.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from gma_teach.records import git_commit, provenance, write_record

ROOT = Path(__file__).resolve().parent.parent


def chapter_notebooks() -> list[Path]:
    """Every chapter notebook, lettered companions (``07b``) included, in reading order."""
    return sorted((ROOT / "book").glob("[0-9][0-9]*_*.ipynb"))


def chapter_name(path: Path) -> str:
    """``"ch07b"`` for ``book/07b_gma_kernels.ipynb``: the number (and letter) before the first underscore."""
    return f"ch{path.name.split('_')[0]}"


def time_notebook(path: Path, scale: str, timeout: float) -> dict:
    """Run one notebook under nbval at ``scale``; returns ``{"chapter", "seconds", "passed", "load_before",
    "load_after"}``."""
    environment = {**os.environ, "GMA_TEACH_SCALE": scale, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    command = [sys.executable, "-m", "pytest", str(path), "--nbval-lax", "--nbval-current-env", "-p",
               "no:cacheprovider", "-q"]
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    try:
        finished = subprocess.run(command, cwd=ROOT, env=environment, capture_output=True, text=True,
                                  timeout=timeout)
        passed = finished.returncode == 0
    except subprocess.TimeoutExpired:
        passed = False
    seconds = time.perf_counter() - started
    return {"chapter": chapter_name(path), "notebook": path.name, "seconds": round(seconds, 2), "passed": passed,
            "load_before": round(load_before, 2), "load_after": round(os.getloadavg()[0], 2)}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", default="tiny", choices=("tiny", "small", "medium", "full"))
    parser.add_argument("--chapters", nargs="*", default=None,
                        help="chapter numbers as in the file names, e.g. 05 07b (default: all)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds allowed per chapter")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    notebooks = chapter_notebooks()
    if args.chapters:
        unknown = set(args.chapters) - {path.name.split("_")[0] for path in notebooks}
        if unknown:
            parser.error(f"no chapter notebook numbered {sorted(unknown)}")
        notebooks = [path for path in notebooks if path.name.split("_")[0] in args.chapters]
    command = "python tools/time_chapters.py " + " ".join(argv if argv is not None else sys.argv[1:])
    record = {**provenance(command), "commit": git_commit(ROOT), "scale": args.scale,
              "what": "wall seconds of one nbval run per notebook",
              "chapters": []}
    for path in notebooks:
        record["chapters"].append(time_notebook(path, args.scale, args.timeout))
        print(json.dumps(record["chapters"][-1]), flush=True)
    write_record(args.out, record)
    return record


if __name__ == "__main__":
    main()
