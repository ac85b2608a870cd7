"""Chapter 9's exercises: evaluate a ListOps expression, and tokenize it the way LRA does.

The checkers call your function on hand-made expressions that isolate one rule each (``[MED`` with an even number
of arguments, ``[SM`` wrapping past 10, deep nesting, LRA's parentheses) and on generated ones, and compare it with
:mod:`gma_teach.data.listops`. They raise :class:`~gma_teach.exercises.ExerciseError` saying which expression
failed and why, or return a short success message.
"""
from __future__ import annotations

from ..data import listops
from ._common import ExerciseError, call_reader

__all__ = ["check_listops_evaluator", "check_listops_tokenizer"]

_HINTS = {
    listops.MED: "[MED is int(np.median(args)): for an even count, the mean of the two middle values, truncated",
    listops.SUM_MOD: "[SM is the sum of the arguments modulo 10",
    listops.MIN: "[MIN is the smallest argument",
    listops.MAX: "[MAX is the largest argument",
}

_HAND_MADE = (
    "[MAX 2 9 [MIN 4 7 ] 0 ]",
    "[MED 1 2 3 4 ]",
    "[MED 3 8 ]",
    "[MED 7 1 9 ]",
    "[SM 5 7 9 ]",
    "[SM [MED 9 8 ] [MAX 0 4 ] ]",
    "[MIN [MAX [SM 9 9 ] 3 ] [MED 6 6 7 8 ] ]",
    "( ( ( [MAX 2 ) 9 ) ] )",
)


def _first_operator_hint(source: str) -> str:
    for token in listops.tokenize(source):
        if token in _HINTS:
            return _HINTS[token]
    return ""


def check_listops_evaluator(fn, *, n_random: int = 200, seed: int = 0) -> str:
    """Check ``fn(source: str) -> int``, the value of a ListOps expression.

    ``source`` may be LRA's parenthesized text form (``( ( ( [MAX 2 ) 9 ) ] )``) or the bare form
    (``[MAX 2 9 ]``); your function should ignore parentheses. Random expressions go up to depth 6.
    """
    generated = [s for s, _ in listops.generate(n_random, max_depth=6, max_args=6, min_length=10, max_length=200,
                                                 seed=seed)]
    for source in list(_HAND_MADE) + generated:
        expected = listops.evaluate(source)
        got = call_reader(fn, source)
        if type(got).__module__ == "numpy" and hasattr(got, "item"):  # a numpy integer is fine
            got = got.item()
        if isinstance(got, bool) or not isinstance(got, int):
            raise ExerciseError(f"expected a Python int for {source[:60]!r}, got {type(got).__name__} {got!r}")
        if got != expected:
            shown = source if len(source) <= 120 else source[:117] + "..."
            n_operators = sum(token in listops.OPERATORS for token in listops.tokenize(source))
            hint = _first_operator_hint(source) if n_operators == 1 else (
                "Look at nesting: an operator's argument may itself be an expression, evaluated before the outer "
                "operator is applied (a stack of open operators does it)")
            raise ExerciseError(f"{shown!r} evaluates to {expected}, your function returned {got}. {hint}")
    return f"correct on {len(_HAND_MADE)} hand-made and {n_random} generated expressions"


def check_listops_tokenizer(fn, *, n_random: int = 50, seed: int = 0) -> str:
    """Check ``fn(source: str) -> list[str]``: LRA's preprocessing (drop ``(`` and ``)``, map ``]`` to ``X``, split
    on whitespace)."""
    generated = [s for s, _ in listops.generate(n_random, max_depth=5, max_args=5, min_length=5, max_length=80,
                                                 seed=seed)]
    for source in list(_HAND_MADE) + ["( ( [SM 1 ) ] )", "7"] + generated:
        expected = listops.tokenize(source)
        got = call_reader(fn, source)
        if not isinstance(got, list) or not all(isinstance(t, str) for t in got):
            raise ExerciseError(f"expected a list of str for {source[:60]!r}, got {type(got).__name__}")
        if got != expected:
            if any(t in ("(", ")") for t in got):
                problem = "parentheses must be dropped"
            elif "]" in got:
                problem = "']' must become 'X'"
            elif len(got) != len(expected):
                problem = f"got {len(got)} tokens, expected {len(expected)}"
            else:
                index = next(i for i, (a, b) in enumerate(zip(got, expected)) if a != b)
                problem = f"token {index} is {got[index]!r}, expected {expected[index]!r}"
            raise ExerciseError(f"tokenizing {source[:60]!r}: {problem}")
    return f"correct on {len(_HAND_MADE) + 2 + n_random} expressions"
