"""LRA Text: byte-level IMDb sentiment, and an offline stand-in built from the Python standard library.

LRA's encoding reads a review as UTF-8 bytes, each byte ``b`` becoming token ``b + 1`` so that 0 can pad
(vocabulary 257), and truncates to a fixed length (4000 in the paper, 1000 in LRA's repository config). The data
is ``stanfordnlp/imdb`` (config ``plain_text``, columns ``text`` and ``label``, 25k train / 25k test; LRA validates
on the test split). The hub lists rows grouped by label, so we shuffle with a fixed seed before taking a subset.

Offline, :func:`stdlib_docstrings` gives real English with natural labels: the docstrings of four standard-library
packages (``tkinter``, ``asyncio``, ``email``, ``logging``), to be classified by package from their bytes. It is a
**stand-in** for IMDb (a different task, four classes), and every result built on it must say so.
"""
from __future__ import annotations

import os
import random
import sys
import sysconfig
from collections.abc import Sequence

import torch

from .. import _checks
from ._hub import cached, load_hub_dataset
from ._stdlib import docstrings_under

PAD_ID = 0
VOCAB_SIZE = 257
HUB_REPO = "stanfordnlp/imdb"
HUB_CONFIG = "plain_text"
IMDB_CLASSES = ("negative", "positive")
STDLIB_GROUPS = ("tkinter", "asyncio", "email", "logging")


def encode_bytes(text: str, max_length: int) -> list[int]:
    """UTF-8 bytes of ``text`` as ``byte + 1``, truncated to ``max_length`` (no padding)."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    _checks.positive_int("max_length", max_length)
    return [b + 1 for b in text.encode("utf-8")[:max_length]]


def decode_bytes(ids: Sequence[int]) -> str:
    """Inverse of :func:`encode_bytes` (padding dropped; a byte sequence cut mid-character shows U+FFFD)."""
    return bytes(int(i) - 1 for i in ids if int(i) != PAD_ID).decode("utf-8", errors="replace")


def to_tensors(texts: Sequence[str], labels: Sequence[int], max_length: int):
    """``(tokens (n, max_length) int64 padded with 0, labels (n,) int64)``."""
    if len(texts) != len(labels):
        raise ValueError(f"texts and labels must have equal lengths, got {len(texts)} and {len(labels)}")
    tokens = torch.full((len(texts), max_length), PAD_ID, dtype=torch.long)
    for row, text in enumerate(texts):
        ids = encode_bytes(text, max_length)
        tokens[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
    return tokens, torch.tensor([int(label) for label in labels], dtype=torch.long)


def _subset(texts: list, labels: list, size: int, seed: int):
    if size > len(texts):
        raise ValueError(f"asked for {size} examples but only {len(texts)} are available")
    order = list(range(len(texts)))
    random.Random(seed).shuffle(order)  # rows come grouped by label: shuffle before any subset
    chosen = order[:size]
    return [texts[i] for i in chosen], [int(labels[i]) for i in chosen]


def load_imdb(*, data_files: dict | None = None) -> dict[str, tuple[list[str], list[int]]]:
    """IMDb ``{"train", "test"}`` as ``(texts, labels)`` from the hub or local files (columns ``text``, ``label``).

    Raises:
        DataUnavailableError: quickly when the hub cannot be reached (offline: use ``source="stdlib"``).
    """

    hint = "Offline, use the labelled stand-in: gma_teach.data.text.splits(..., source='stdlib')."
    raw = load_hub_dataset(HUB_REPO, HUB_CONFIG, data_files=data_files, offline_hint=hint)
    result = {}
    for split in ("train", "test"):
        if split not in raw:
            raise ValueError(f"IMDb data has splits {list(raw)}, expected 'train' and 'test'")
        columns = raw[split].column_names
        if "text" not in columns or "label" not in columns:
            raise ValueError(f"split {split!r} has columns {columns}, expected 'text' and 'label'")
        labels = [int(label) for label in raw[split]["label"]]
        if set(labels) - {0, 1}:
            raise ValueError(f"split {split!r} has labels {sorted(set(labels))}, expected 0 and 1")
        result[split] = (list(raw[split]["text"]), labels)
    return result


def stdlib_root() -> str:
    """The folder of the running Python's standard library."""
    return sysconfig.get_paths()["stdlib"]


def stdlib_docstrings(groups: Sequence[str] = STDLIB_GROUPS, *, min_chars: int = 40) -> list[tuple[str, str]]:
    """Distinct docstrings ``(group, text)`` of the standard-library packages ``groups`` (tests excluded).

    Module, class and function docstrings (``ast.get_docstring``, cleaned) of at least ``min_chars`` characters,
    in sorted file order; a docstring that occurs more than once (in any group) is dropped entirely, so no text
    can appear in two splits or under two labels. The result depends only on the Python version.
    """
    root = stdlib_root()
    groups_of: dict[str, list] = {}
    for group in groups:
        folder = os.path.join(root, group)
        if not os.path.isdir(folder):
            raise ValueError(f"group {group!r} is not a package of this Python's standard library ({root})")
        for text in docstrings_under(folder, min_chars):
            groups_of.setdefault(text, []).append(group)
    return [(found[0], text) for text, found in groups_of.items() if len(found) == 1]


def splits(n_train: int, n_test: int, *, source: str = "stdlib", max_length: int = 1000, seed: int = 0,
           data_files: dict | None = None, groups: Sequence[str] = STDLIB_GROUPS) -> dict:
    """Byte-level classification splits ``{"train", "test", "classes"}``, cached on disk.

    ``"train"`` and ``"test"`` are ``(tokens (n, max_length), labels (n,))``.

    Args:
        n_train, n_test: sizes (random subsets after a shuffle seeded by ``seed``).
        source: ``"imdb"`` (hub), ``"files"`` (IMDb-format local ``data_files``) or ``"stdlib"`` (the offline
            stand-in: docstring -> package; disjoint train/test).
        max_length: truncation length in bytes (LRA: 1000 in its config, 4000 in the paper).
    """
    if source not in ("imdb", "files", "stdlib"):
        raise ValueError(f"source must be 'imdb', 'files' or 'stdlib', got {source!r}")
    if source == "files" and data_files is None:
        raise ValueError("source='files' needs data_files={split: path}")

    fields = dict(n_train=n_train, n_test=n_test, source=source, max_length=max_length, seed=seed,
                  groups=list(groups), python=sys.version_info[:2],
                  data_files=sorted((k, str(v)) for k, v in (data_files or {}).items()))

    def build() -> dict:
        if source == "stdlib":
            pairs = stdlib_docstrings(groups)
            texts = [text for _, text in pairs]
            labels = [list(groups).index(group) for group, _ in pairs]
            texts, labels = _subset(texts, labels, n_train + n_test, seed)
            train = (texts[:n_train], labels[:n_train])
            test = (texts[n_train:], labels[n_train:])
            classes = tuple(groups)
        else:
            data = load_imdb(data_files=data_files if source == "files" else None)
            train = _subset(*data["train"], n_train, seed)
            test = _subset(*data["test"], n_test, seed + 1)
            classes = IMDB_CLASSES
        return {"train": to_tensors(*train, max_length), "test": to_tensors(*test, max_length),
                "classes": classes}

    return cached("text", fields, build)
