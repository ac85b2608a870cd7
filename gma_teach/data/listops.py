"""LRA ListOps: the generator, an evaluator, the tokenization and the official data.

A ListOps example is a nested list expression over the digits 0-9 and four operators, written in prefix form with
a closing bracket; the label is its value (10 classes)::

    [MAX 2 9 [MIN 4 7 ] 0 ]   ->   9

* ``[MIN`` / ``[MAX``: the smallest / largest argument;
* ``[MED``: ``int(np.median(args))`` -- for an even count the mean of the two middle values, truncated;
* ``[SM``: the sum modulo 10.

:func:`generate` re-implements the Long Range Arena generator
(google-research/long-range-arena, ``lra_benchmarks/data/listops.py``) faithfully: trees grow from depth 1; below
``max_depth`` a node is a leaf with probability 0.75; an operator node draws ``randint(2, max_args)`` children
(inclusive) and an operator uniformly; a tree's length counts one token per digit plus two per operator (the
operator and its ``]``); a tree is kept only if ``min_length < length < max_length`` (strict) and it is new. The text
form nests parentheses as LRA writes it, e.g. ``( ( ( [MAX 2 ) 9 ) ] )``. LRA's input pipeline drops the
parentheses, maps ``]`` to ``X`` and splits on whitespace (:func:`tokenize`). Unlike LRA's generator (which keeps a
``set`` whose order depends on Python's string hashing), the order of our samples depends only on ``seed``.
"""
from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence

import numpy as np
import torch

from .. import _checks
from ._hub import cached, load_hub_dataset

MIN, MAX, MED, SUM_MOD, END = "[MIN", "[MAX", "[MED", "[SM", "]"
OPERATORS = (MIN, MAX, MED, SUM_MOD)
VALUES = tuple(range(10))
VALUE_P = 0.25  # LRA's threshold: a node below max_depth is a leaf when random() > VALUE_P
N_CLASSES = 10

PAD, UNK, CLS = "<pad>", "<unk>", "<cls>"
SPECIALS = (PAD, UNK, CLS)
SYMBOLS = tuple(str(v) for v in VALUES) + OPERATORS + ("X",)  # the 15 symbols after LRA's preprocessing
VOCAB = SPECIALS + SYMBOLS
TOKEN_TO_ID = {token: index for index, token in enumerate(VOCAB)}
PAD_ID, UNK_ID, CLS_ID = 0, 1, 2

HUB_REPO = "fengyang0317/listops-1000"
LRA_SPLIT_SIZES = {"train": 96_000, "validation": 2_000, "test": 2_000}


# --------------------------------------------------------------------------------------------- the generator
def generate_tree(rng: random.Random, depth: int, max_depth: int, max_args: int):
    """One random tree in LRA's nested-pair form and its length (digits + 2 per operator).

    A leaf is an ``int``; an operator node with arguments ``a1 .. an`` is
    ``((...((op, a1), a2)..., an), "]")``, exactly LRA's representation.
    """
    r = rng.random() if depth < max_depth else 1.0
    if r > VALUE_P:
        return rng.choice(VALUES), 1
    length = 2
    n_args = rng.randint(2, max_args)
    args = []
    for _ in range(n_args):
        subtree, sublength = generate_tree(rng, depth + 1, max_depth, max_args)
        args.append(subtree)
        length += sublength
    tree = (rng.choice(OPERATORS), args[0])
    for arg in args[1:]:
        tree = (tree, arg)
    return (tree, END), length


def to_string(tree) -> str:
    """LRA's text form of a tree: every pair in parentheses, e.g. ``( ( ( [MAX 2 ) 9 ) ] )``."""
    if isinstance(tree, str):
        return tree
    if isinstance(tree, int):
        return str(tree)
    return "( " + to_string(tree[0]) + " " + to_string(tree[1]) + " )"


def tree_value(tree):
    """LRA's own recursive evaluation of the nested-pair form (kept as an independent check of :func:`evaluate`)."""

    if not isinstance(tree, tuple):
        return tree
    left, right = tree_value(tree[0]), tree_value(tree[1])
    if left in OPERATORS:
        return (left, [right])
    if right == END:
        operator, args = left
        if operator == MIN:
            return min(args)
        if operator == MAX:
            return max(args)
        if operator == MED:
            return int(np.median(args))
        return int(np.sum(args) % 10)
    return (left[0], left[1] + [right])


def generate(n_samples: int, *, max_depth: int = 10, max_args: int = 10, min_length: int = 500,
             max_length: int = 2000, seed: int = 0, max_tries: int | None = None) -> list[tuple[str, int]]:
    """``n_samples`` distinct ListOps examples ``(source, target)`` drawn like LRA's generator.

    Args:
        n_samples: how many distinct examples to return.
        max_depth: nodes at this depth are always leaves (LRA: 10).
        max_args: an operator takes ``randint(2, max_args)`` arguments, inclusive (LRA: 10).
        min_length, max_length: keep a tree only if ``min_length < length < max_length`` (LRA: 500, 2000), where
            length counts tokens without parentheses.
        seed: seeds a private ``random.Random``; the same arguments give the same list.
        max_tries: give up (``RuntimeError``) after this many trees; default ``1000 * n_samples + 100000``.

    Returns:
        A list of ``(source, target)`` with ``source`` in LRA's parenthesized text form and ``target`` in 0..9.
    """
    _checks.integer("n_samples", n_samples, minimum=0)
    _checks.positive_int("max_depth", max_depth)
    _checks.integer("max_args", max_args, minimum=2)
    _checks.integer("min_length", min_length, minimum=0)
    _checks.integer("max_length", max_length, minimum=1)
    if max_length - min_length < 2:
        raise ValueError(f"need min_length < length < max_length to admit a length, got {min_length}, {max_length}")
    rng = random.Random(seed)
    budget = max_tries if max_tries is not None else 1000 * n_samples + 100_000
    kept: dict[str, int] = {}
    tries = 0
    while len(kept) < n_samples:
        if tries >= budget:
            raise RuntimeError(f"only {len(kept)} of {n_samples} trees passed {min_length} < length < {max_length} "
                               f"with max_depth={max_depth}, max_args={max_args} in {budget} tries")
        tries += 1
        tree, length = generate_tree(rng, 1, max_depth, max_args)
        if min_length < length < max_length:
            source = to_string(tree)
            if source not in kept:
                kept[source] = tree_value(tree)
    return list(kept.items())


# --------------------------------------------------------------------------------------------- the evaluator
def _apply(operator: str, args: list[int]) -> int:
    if not args:
        raise ValueError(f"operator {operator} closed without arguments")
    if operator == MIN:
        return min(args)
    if operator == MAX:
        return max(args)
    if operator == SUM_MOD:
        return sum(args) % 10
    ordered = sorted(args)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) // 2  # np.median then int(): truncation (values are >= 0)


def evaluate(source: str | Sequence[str]) -> int:
    """The value of a ListOps expression, with a stack (no recursion, so any depth works).

    Accepts LRA's text form (parentheses are ignored), the bare form ``[MAX 2 9 ]`` or a token list in which ``X``
    closes an operator. Raises ``ValueError`` on an unknown token, an unbalanced ``]``, a digit outside an operator
    next to other tokens, or an unclosed operator.
    """
    tokens = source.split() if isinstance(source, str) else list(source)
    stack: list[tuple[str, list[int]]] = []
    result = None
    for token in tokens:
        if token in ("(", ")"):
            continue
        if token in OPERATORS:
            stack.append((token, []))
            continue
        if token in (END, "X"):
            if not stack:
                raise ValueError(f"unbalanced closing token {token!r} in source")
            value = _apply(*stack.pop())
        elif token.isdigit() and len(token) == 1:
            value = int(token)
        else:
            raise ValueError(f"unknown ListOps token {token!r}; expected a digit, one of {OPERATORS} or ']'")
        if stack:
            stack[-1][1].append(value)
        elif result is None:
            result = value
        else:
            raise ValueError("source holds more than one top-level expression")
    if stack:
        raise ValueError(f"{len(stack)} operator(s) never closed in source")
    if result is None:
        raise ValueError("source holds no expression")
    return result


# --------------------------------------------------------------------------------------------- tokenization
def tokenize(source: str) -> list[str]:
    """LRA's preprocessing: drop ``(`` and ``)``, map ``]`` to ``X``, split on whitespace."""
    if not isinstance(source, str):
        raise TypeError(f"source must be a str, got {type(source).__name__}")
    return source.replace("(", " ").replace(")", " ").replace("]", "X").split()


def encode(source: str, *, max_seq_len: int | None = None, add_cls: bool = True) -> list[int]:
    """Token ids of ``source`` (``<cls>`` first when ``add_cls``); unknown symbols map to ``<unk>``.

    Raises ``ValueError`` when the ids would exceed ``max_seq_len`` (ListOps is never truncated: a truncated
    expression has a different value).
    """
    ids = ([CLS_ID] if add_cls else []) + [TOKEN_TO_ID.get(token, UNK_ID) for token in tokenize(source)]
    if max_seq_len is not None and len(ids) > max_seq_len:
        raise ValueError(f"source has {len(ids)} tokens (with cls={add_cls}), more than max_seq_len={max_seq_len}")
    return ids


def decode(ids: Sequence[int]) -> str:
    """The tokens of ``ids`` joined by spaces, without padding."""
    return " ".join(VOCAB[int(i)] for i in ids if int(i) != PAD_ID)


def to_tensors(examples: Sequence[tuple[str, int]], max_seq_len: int, *, add_cls: bool = True):
    """``(tokens (n, max_seq_len) int64 padded with 0, labels (n,) int64)`` for a list of examples."""
    tokens = torch.full((len(examples), max_seq_len), PAD_ID, dtype=torch.long)
    labels = torch.empty(len(examples), dtype=torch.long)
    for row, (source, target) in enumerate(examples):
        ids = encode(source, max_seq_len=max_seq_len, add_cls=add_cls)
        tokens[row, : len(ids)] = torch.tensor(ids)
        labels[row] = int(target)
    return tokens, labels


# --------------------------------------------------------------------------------------------- official data
def validate(splits: dict, *, expected_sizes: dict | None = LRA_SPLIT_SIZES, min_length: int = 500,
             max_length: int = 2000, n_checked: int = 500, max_majority: float = 0.3) -> dict:
    """Check that data claiming to be LRA ListOps is: sizes, lengths, vocabulary, labels and their balance.

    Args:
        splits: ``{split: list of (source, target)}``.
        expected_sizes: required ``{split: size}``, or None to skip the size check.
        min_length, max_length: every source must have ``min_length < tokens < max_length`` (parentheses dropped).
        n_checked: per split, recompute this many labels with :func:`evaluate` (all if larger than the split).
        max_majority: the most frequent label may hold at most this fraction (LRA: about 0.17).

    Returns:
        A report ``{split: {"size", "min_length", "max_length", "label_counts"}}``.

    Raises:
        ValueError: naming the first check that failed.
    """
    report = {}
    for split, examples in splits.items():
        if expected_sizes is not None and split in expected_sizes and len(examples) != expected_sizes[split]:
            raise ValueError(f"split {split!r} has {len(examples)} rows, expected {expected_sizes[split]}")
        lengths, labels = [], Counter()
        for index, (source, target) in enumerate(examples):
            tokens = tokenize(source)
            unknown = set(tokens) - set(SYMBOLS)
            if unknown:
                raise ValueError(f"split {split!r} row {index} has tokens outside ListOps's vocabulary: "
                                 f"{sorted(unknown)[:5]}")
            if not min_length < len(tokens) < max_length:
                raise ValueError(f"split {split!r} row {index} has {len(tokens)} tokens, outside "
                                 f"({min_length}, {max_length})")
            if int(target) not in VALUES:
                raise ValueError(f"split {split!r} row {index} has label {target!r}, expected 0..9")
            lengths.append(len(tokens))
            labels[int(target)] += 1
        step = max(1, len(examples) // max(1, n_checked))
        for index in range(0, len(examples), step):
            source, target = examples[index]
            if evaluate(source) != int(target):
                raise ValueError(f"split {split!r} row {index}: label {target} but the expression evaluates to "
                                 f"{evaluate(source)}")
        if examples and max(labels.values()) / len(examples) > max_majority:
            label, count = labels.most_common(1)[0]
            raise ValueError(f"split {split!r}: label {label} holds {count / len(examples):.1%} of rows, more than "
                             f"max_majority={max_majority:.0%}; not LRA's label distribution")
        report[split] = {"size": len(examples), "min_length": min(lengths, default=0),
                         "max_length": max(lengths, default=0), "label_counts": dict(sorted(labels.items()))}
    return report


def load(*, repo: str = HUB_REPO, data_files: dict | None = None, expected_sizes: dict | None = LRA_SPLIT_SIZES,
         min_length: int = 500, max_length: int = 2000, n_checked: int = 500) -> dict[str, list[tuple[str, int]]]:
    """LRA's ListOps from the hub mirror (or local files in its format), validated before it is trusted.

    Columns ``Source`` and ``Target``; splits ``train``/``validation``/``test`` (``val`` is accepted for
    validation). Offline, use :func:`generate` (or :func:`splits` with ``source="generate"``).

    Raises:
        DataUnavailableError: quickly, when the hub cannot be reached and the data is not cached.
        ValueError: when the data fails :func:`validate`.
    """

    hint = "Offline, generate ListOps instead: gma_teach.data.listops.generate(...) or splits(source='generate')."
    raw = load_hub_dataset(repo, data_files=data_files, offline_hint=hint)
    result = {}
    for split in raw:
        columns = raw[split].column_names
        if "Source" not in columns or "Target" not in columns:
            raise ValueError(f"split {split!r} has columns {columns}, expected 'Source' and 'Target'")
        name = "validation" if split in ("val", "valid") else split
        result[name] = [(str(s), int(t)) for s, t in zip(raw[split]["Source"], raw[split]["Target"])]
    validate(result, expected_sizes=expected_sizes, min_length=min_length, max_length=max_length,
             n_checked=n_checked)
    return result


def splits(n_train: int, n_val: int, n_test: int, *, source: str = "generate", max_depth: int = 10,
           max_args: int = 10, min_length: int = 500, max_length: int = 2000, seed: int = 0,
           data_files: dict | None = None, add_cls: bool = True) -> dict:
    """Tokenized ListOps splits ``{"train", "validation", "test"}`` of ``(tokens (n, L), labels (n,))``, cached.

    Args:
        n_train, n_val, n_test: split sizes (a prefix of each official split; disjoint generated samples).
        source: ``"generate"`` (offline, :func:`generate`), ``"hub"`` (:func:`load` from :data:`HUB_REPO`) or
            ``"files"`` (:func:`load` from ``data_files``).
        max_depth, max_args, min_length, max_length, seed: the generator's settings (lengths also validate).
        add_cls: put ``<cls>`` first.

    The padded length is ``max_length - 1 + add_cls`` (the longest admissible expression).
    """
    if source not in ("generate", "hub", "files"):
        raise ValueError(f"source must be 'generate', 'hub' or 'files', got {source!r}")
    for name, value in (("n_train", n_train), ("n_val", n_val), ("n_test", n_test)):
        _checks.integer(name, value, minimum=0)
    if source == "files" and data_files is None:
        raise ValueError("source='files' needs data_files={split: path}")

    seq_len = max_length - 1 + int(add_cls)
    fields = dict(n_train=n_train, n_val=n_val, n_test=n_test, source=source, max_depth=max_depth,
                  max_args=max_args, min_length=min_length, max_length=max_length, seed=seed, add_cls=add_cls,
                  data_files=sorted((k, str(v)) for k, v in (data_files or {}).items()))

    def build() -> dict:
        if source == "generate":
            examples = generate(n_train + n_val + n_test, max_depth=max_depth, max_args=max_args,
                                min_length=min_length, max_length=max_length, seed=seed)
            parts = {"train": examples[:n_train], "validation": examples[n_train:n_train + n_val],
                     "test": examples[n_train + n_val:]}
        else:
            official = load(data_files=data_files if source == "files" else None,
                            expected_sizes=LRA_SPLIT_SIZES if source == "hub" else None,
                            min_length=min_length, max_length=max_length)
            sizes = {"train": n_train, "validation": n_val, "test": n_test}
            parts = {}
            for split, size in sizes.items():
                if len(official.get(split, [])) < size:
                    raise ValueError(f"split {split!r} has {len(official.get(split, []))} rows, fewer than {size}")
                parts[split] = official[split][:size]
        return {split: to_tensors(examples, seq_len, add_cls=add_cls) for split, examples in parts.items()}

    return cached("listops", fields, build)


def label_counts(labels: torch.Tensor) -> torch.Tensor:
    """How many examples carry each of the 10 labels, shape ``(10,)``."""
    return torch.bincount(labels.flatten(), minlength=N_CLASSES)
