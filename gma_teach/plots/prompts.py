"""What a figure's prompt may name: a structure ("look for bands", "the filled circles") only where it was measured.

A prompt under a figure tells the reader what to look at. When it names a structure the figure's data lack (bands
where no bands were measured, told-apart markers where nothing was told apart), the reader looks for something that
is not there, or worse, sees it. The rule here: a prompt names a structure only when a measurement of the figure's
data says the structure is there.

* :data:`STRUCTURES` -- the structures a prompt can name, each with the words that name it;
* :func:`named_structures` -- which of them a prompt names;
* :func:`checked_prompt` -- the prompt, or a ``ValueError`` naming each structure it names that ``measured`` does
  not hold true (a structure absent from ``measured`` counts as not measured);
* :func:`claims_figure_measured` and :func:`claims_figure_reading` -- Part IV's claims figure
  (:func:`gma_teach.plots.study_figures.plot_claims`): what its rows hold, counted from the claims, and the reading
  printed under it, which names a marker only where the figure draws one; :func:`drawn_claims_markers` counts the
  same markers on the drawn figure, so a test can hold the two together.
"""
from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["STRUCTURES", "checked_prompt", "claims_figure_measured", "claims_figure_reading",
           "drawn_claims_markers", "named_structures"]

STRUCTURES = {
    "bands": r"\bbands?\b|\bbanded\b",
    "stripes": r"\bstripes?\b|\bstriped\b",
    "blocks": r"\bblocks? (?:structure|pattern)\b|\bblocky\b",
    "clusters": r"\bclusters?\b|\bclustered\b",
    "diagonal": r"\bdiagonal\b",
    "filled circles": r"\bfilled (?:circles?|markers?)\b",
    "hollow circles": r"\bhollow (?:circles?|markers?|ones?)\b",
    "diamonds": r"\bdiamonds?\b",
    "exact properties": r"\bexact propert(?:y|ies)\b",
}
"""The structures a figure's prompt can name, each with a regular expression (case-insensitive) for the words that
name it. A prompt that names none of them needs no measurement."""


def named_structures(prompt: str) -> list[str]:
    """The structures of :data:`STRUCTURES` that ``prompt`` names, in the table's order; a negated mention ("no
    bands", "nothing told apart, so no filled circles") is still a mention, and needs its measurement."""
    if not isinstance(prompt, str):
        raise TypeError(f"prompt must be a str, got {type(prompt).__name__}")
    return [name for name, pattern in STRUCTURES.items() if re.search(pattern, prompt, flags=re.I)]


def checked_prompt(prompt: str, measured: Mapping[str, bool]) -> str:
    """``prompt`` unchanged when every structure it names (:func:`named_structures`) is measured present.

    Args:
        prompt: the sentence printed with the figure.
        measured: ``{structure: bool}``, each a measurement of the figure's data (a band test, a count of the
            markers drawn); a structure left out counts as not measured.

    Raises:
        ValueError: naming each structure the prompt names that ``measured`` does not hold true.
    """
    if not isinstance(measured, Mapping):
        raise TypeError(f"measured must be a mapping of structure -> bool, got {type(measured).__name__}")
    unknown = set(measured) - set(STRUCTURES)
    if unknown:
        raise ValueError(f"measured names structures outside STRUCTURES: {sorted(unknown)}")
    lacking = [name for name in named_structures(prompt) if measured.get(name) is not True]
    if lacking:
        raise ValueError(f"the prompt names {', '.join(lacking)}, which the figure's data "
                         f"{'were not measured to hold' if len(lacking) > 1 else 'was not measured to hold'}: "
                         f"{prompt!r}")
    return prompt


def _kind(entry: dict) -> str:
    """How :func:`gma_teach.plots.study_figures.plot_claims` draws one comparison of a claim's basis."""
    if "difference" not in entry:
        return "exact properties"
    if "ci95" not in entry:
        return "diamonds"
    return "filled circles" if entry["told_apart"] else "hollow circles"


def claims_figure_measured(claims: list[dict]) -> dict[str, int]:
    """How many of each marker Part IV's claims figure draws, counted from the claims' comparisons:
    ``{"filled circles", "hollow circles", "diamonds", "exact properties"}`` (every key, 0 where none)."""
    counts = dict.fromkeys(("filled circles", "hollow circles", "diamonds", "exact properties"), 0)
    for claim in claims:
        for entry in claim["basis"]:
            counts[_kind(entry)] += 1
    return counts


def drawn_claims_markers(fig) -> dict[str, int]:
    """The same counts as :func:`claims_figure_measured`, read from a drawn claims figure: a circle filled or
    hollow (white face), a diamond, an exact property written as text in its panel."""
    counts = dict.fromkeys(("filled circles", "hollow circles", "diamonds", "exact properties"), 0)
    for ax in fig.axes:
        for line in ax.lines:
            marker = line.get_marker()
            if marker == "D":
                counts["diamonds"] += 1
            elif marker == "o":
                face = line.get_markerfacecolor()
                counts["hollow circles" if face in ("white", "w", (1.0, 1.0, 1.0, 1.0)) else "filled circles"] += 1
        counts["exact properties"] += sum(text.get_text().strip().startswith("exact:") for text in ax.texts)
    return counts


def claims_figure_reading(claims: list[dict]) -> str:
    """The reading printed under Part IV's claims figure: how it is drawn, and how many of each marker it holds,
    naming a marker only where it draws at least one (checked by :func:`checked_prompt` against
    :func:`claims_figure_measured`), and how many comparisons lie on GMA's better side of zero."""
    counts = claims_figure_measured(claims)
    words = {"filled circles": "told apart after Holm's correction",
             "hollow circles": "not told apart, each with its unadjusted 95% interval",
             "diamonds": "measured once, with no interval",
             "exact properties": "written in its panel, with no scale"}
    drawn = [f"{n} {name if n != 1 else name[:-1] if name != 'exact properties' else 'exact property'} "
             f"({words[name]})" for name, n in counts.items() if n]
    ahead = behind = 0
    for claim in claims:
        for entry in claim["basis"]:
            if "difference" in entry and "ci95" in entry:
                better = entry["difference"] < 0 if entry["lower_is_better"] else entry["difference"] > 0
                ahead, behind = ahead + better, behind + (not better)
    reading = (f"{len(claims)} panels, one a claim, titled with its verdict in its colour; each row is one "
               f"comparison, turned so that GMA's better side is to the right of the zero line. Drawn: "
               + "; ".join(drawn) + f". Of the {ahead + behind} comparisons with an interval, {ahead} lie on GMA's "
               f"better side in the mean and {behind} on the rival's.")
    return checked_prompt(reading, {name: n > 0 for name, n in counts.items()})
