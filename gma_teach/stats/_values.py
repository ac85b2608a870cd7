"""The inputs every summary and test reads, checked once: a sequence of numbers, and the per-seed differences of two
arms measured on the same seeds."""
from __future__ import annotations


def floats(name: str, values) -> list[float]:
    """``values`` as a list of floats; a ``TypeError`` naming ``name`` when they are not a sequence of numbers."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise TypeError(f"{name} must be a sequence of numbers, got {type(values).__name__}")
    return [float(v) for v in values]


def paired_differences(a, b) -> list[float]:
    """The per-seed differences ``a[i] - b[i]`` of two arms, each a sequence of one value per seed (at least two)."""
    a, b = floats("a", a), floats("b", b)
    if len(a) != len(b):
        raise ValueError(f"a and b must have one value per seed each, got {len(a)} and {len(b)}")
    if len(a) < 2:
        raise ValueError(f"a paired comparison needs at least 2 seeds, got {len(a)}")
    return [x - y for x, y in zip(a, b)]
