"""Part IV at a glance: every study's declared comparisons, counted as GMA's wins, ties and losses.

:func:`part_iv_synthesis` reads the saved tables (``<study>_tables.json``, ``recall_study_tables.json``) and returns one
row per study; :func:`format_synthesis` writes the rows as a Markdown table. A *win* or a *loss* is a declared
comparison told apart after Holm's correction (the GMA arm ahead or behind); a *tie* is one that is not. A study
with a declared second look is counted at it (:func:`standing_family`). Nothing here trains or reads a run: it
counts what the tables already decided.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..records import results_folder
from .arm_records import tables_path
from .settings import RECALL_STUDY, STUDIES
from .verdicts import study_findings

STUDY_CHAPTERS = {"listops-lra": 9, "text": 9, "lm": 10, "collapse": 11, "recall": 12}
"""The chapter that reads each study."""

WHAT = {"listops-lra": "ListOps at LRA's lengths", "text": "Text stand-in", "lm": "language modelling",
        "collapse": "routing remedies (LM)", "recall": "multi-query associative recall"}
"""Each study in a few words."""


def standing_family(saved: dict) -> dict:
    """The declared comparisons whose verdicts stand in a saved table (``<study>_tables.json``): its declared second
    look where the study has one (more seeds for every arm, each p paying for the extra look), else its first."""
    return saved.get("second_look") or saved["declared"]


def _row(study: str, wins: int, ties: int, losses: int, declared: dict, seeds) -> dict:
    return {"study": study, "what": WHAT[study], "chapter": STUDY_CHAPTERS[study], "declared": declared["family_size"],
            "recorded": len(declared["comparisons"]), "seeds": f"{seeds[0]}-{seeds[-1]}", "wins": wins,
            "ties": ties, "losses": losses}


def part_iv_synthesis(folder=None) -> list[dict]:
    """One row per study with a saved table: ``{"study", "what", "chapter", "declared" (the family's size),
    "recorded" (its comparisons run), "seeds" (those the verdicts rest on, ``"0-4"``), "wins", "ties", "losses"}``,
    in the chapters' order, each counted at its :func:`standing_family`."""
    folder = Path(folder) if folder is not None else results_folder()
    rows = []
    for name in sorted(STUDY_CHAPTERS, key=STUDY_CHAPTERS.get):
        if name == "recall":
            path = folder / f"{RECALL_STUDY['name']}_study_tables.json"
            if not path.exists():
                continue
            declared = json.loads(path.read_text())["declared"]
            told = [c for c in declared["comparisons"] if c["told_apart"]]
            wins = sum(c["difference"] > 0 for c in told)  # the GMA arm is always the first: accuracy, higher wins
            rows.append(_row(name, wins, len(declared["comparisons"]) - len(told), len(told) - wins, declared,
                             RECALL_STUDY["seeds"]))
            continue
        path = tables_path(STUDIES[name], folder)
        if not path.exists():
            continue
        declared = standing_family(json.loads(path.read_text()))
        found = study_findings(STUDIES[name], declared)
        rows.append(_row(name, len(found["wins"]), len(found["ties"]), len(found["losses"]), declared,
                         declared["seeds"]))
    return rows


def format_synthesis(rows: list[dict]) -> str:
    """The rows as a Markdown table (one line a study); *ahead* and *behind* are said of the GMA side (the remedy,
    in the remedy study)."""
    lines = ["| study | chapter | declared comparisons run | seeds | ahead | not told apart | behind |",
             "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['what']} | {r['chapter']} | {r['recorded']} of {r['declared']} | {r['seeds']} | {r['wins']} | "
              f"{r['ties']} | {r['losses']} |" for r in rows]
    return "\n".join(lines)
