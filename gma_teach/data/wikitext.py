"""Language-modelling data: WikiText, GPT-2's BPE, an offline English corpus, packing and vocabulary compaction.

* **WikiText** (``Salesforce/wikitext``, raw configs ``wikitext-103-raw-v1`` and ``wikitext-2-raw-v1``; one column
  ``text``, one row per line) through ``datasets``: :func:`load_wikitext`.
* **Tokenizer** (:func:`get_tokenizer`): GPT-2's BPE (50,257 ids). Its vocabulary ships with the package
  (``gma_teach/data/gpt2.tiktoken``, MIT, SHA-256 checked on load: tiktoken's ``r50k_base``, i.e. GPT-2), so every
  machine -- a reader's, CI, the recorded runs -- tokenizes the same way without the network; ``tiktoken`` runs the
  merges. Without ``tiktoken``, ``"auto"`` falls back to bytes (256 + an end-of-text id); ``tokenizer.name`` always
  says which one is in force.
* **Bits per byte** (:func:`bits_per_byte`, :func:`utf8_bytes`): validation loss summed over tokens / UTF-8 bytes
  of the text / ln 2, the measure that compares models across tokenizers.
* **Offline corpus** (:func:`stdlib_corpus`): real English shipped with every Python -- the ``pydoc_data`` help
  topics and the docstrings of the standard library (tests excluded), about 2.2 MB of text.
* :func:`pack` cuts a token stream into blocks; :func:`compact` maps the ids that occur to ``0..V-1`` so that a
  tiny model does not carry a 50,257-row embedding, keeping the way back to the BPE strings
  (``token_strings``) that chapter 11 reads.
"""
from __future__ import annotations

import base64
import hashlib
import math
import os
import random
import sys
import sysconfig
from collections.abc import Sequence
from dataclasses import dataclass, field
from pydoc_data.topics import topics

import tiktoken
import torch
from tiktoken_ext.openai_public import r50k_pat_str

from .. import _checks
from ._hub import cached, load_hub_dataset
from ._stdlib import docstrings_under

HUB_REPO = "Salesforce/wikitext"
CONFIGS = {"wikitext-103": "wikitext-103-raw-v1", "wikitext-2": "wikitext-2-raw-v1"}
GPT2_TIKTOKEN_SHA256 = "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"
GPT2_FILE = "gpt2.tiktoken"
GPT2_NAME = "GPT-2 BPE (r50k_base via tiktoken, vocabulary file shipped with gma_teach)"


# --------------------------------------------------------------------------------------------- tokenizers
class Tokenizer:
    """The interface every tokenizer here offers: ``encode``, ``decode``, ``token_strings``, ``n_vocab``,
    ``eos_id`` and ``name`` (which tokenizer is in force)."""

    name: str
    n_vocab: int
    eos_id: int

    def encode(self, text: str) -> list[int]:
        raise NotImplementedError

    def decode(self, ids: Sequence[int]) -> str:
        raise NotImplementedError

    def token_strings(self, ids: Sequence[int]) -> list[str]:
        """The surface string of each id (for BPE: the piece with its leading space, e.g. ``" the"``)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, n_vocab={self.n_vocab})"


def _as_ids(ids) -> list[int]:
    if isinstance(ids, torch.Tensor):
        return [int(i) for i in ids.flatten().tolist()]
    return [int(i) for i in ids]


class TiktokenTokenizer(Tokenizer):
    """GPT-2's BPE through a ``tiktoken.Encoding``; ``<|endoftext|>`` (50256) ends each document."""

    def __init__(self, encoding, name: str):
        self.encoding, self.name = encoding, name
        self.n_vocab = encoding.n_vocab
        self.eos_id = encoding.eot_token

    def encode(self, text: str) -> list[int]:
        return self.encoding.encode_ordinary(text)

    def decode(self, ids) -> str:
        return self.encoding.decode(_as_ids(ids))

    def token_strings(self, ids) -> list[str]:
        return [self.encoding.decode_single_token_bytes(i).decode("utf-8", errors="replace") for i in _as_ids(ids)]


class ByteTokenizer(Tokenizer):
    """UTF-8 bytes as ids 0..255 and an end-of-text id 256 (the fallback when GPT-2's BPE is unavailable)."""

    name = "bytes (UTF-8, 256 + end-of-text)"
    n_vocab = 257
    eos_id = 256

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids) -> str:
        return bytes(i for i in _as_ids(ids) if i < 256).decode("utf-8", errors="replace")

    def token_strings(self, ids) -> list[str]:
        return ["<|endoftext|>" if i == 256 else bytes([i]).decode("latin-1") for i in _as_ids(ids)]


def gpt2_vocabulary_file() -> str:
    """Path of ``gpt2.tiktoken``, GPT-2's BPE vocabulary shipped inside ``gma_teach.data`` (MIT; see
    ``gpt2.tiktoken.LICENSE`` beside it)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), GPT2_FILE)


def _gpt2_from_file(path: str):

    with open(path, "rb") as handle:
        contents = handle.read()
    digest = hashlib.sha256(contents).hexdigest()
    if digest != GPT2_TIKTOKEN_SHA256:
        raise ValueError(f"{path} has SHA-256 {digest}, not GPT-2's r50k_base ({GPT2_TIKTOKEN_SHA256})")
    ranks = {base64.b64decode(token): int(rank) for token, rank in (line.split() for line in contents.splitlines()
                                                                     if line)}
    return tiktoken.Encoding(name="gpt2", pat_str=r50k_pat_str, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": 50256}, explicit_n_vocab=50257)


def get_tokenizer(kind: str = "auto") -> Tokenizer:
    """A tokenizer: ``"gpt2"`` (GPT-2's BPE from the vocabulary file shipped with the package, through
    ``tiktoken``; never the network), ``"bytes"``, or ``"auto"`` (GPT-2 when ``tiktoken`` is installed, else bytes).
    ``.name`` says which is in force."""
    if kind not in ("auto", "gpt2", "bytes"):
        raise ValueError(f"kind must be 'auto', 'gpt2' or 'bytes', got {kind!r}")
    if kind == "bytes":
        return ByteTokenizer()
    try:
        import tiktoken  # noqa: F401  (optional dependency: the BPE merge loop)
    except ImportError:
        if kind == "gpt2":
            raise ImportError("GPT-2's BPE needs tiktoken: pip install 'tiktoken>=0.6' (or gma_teach[data])") from None
        return ByteTokenizer()
    return TiktokenTokenizer(_gpt2_from_file(gpt2_vocabulary_file()), GPT2_NAME)


def bits_per_byte(total_loss_nats: float, n_bytes: int) -> float:
    """Bits per UTF-8 byte of a text from the summed token loss over it: ``total_loss_nats / n_bytes / ln 2``.

    The tokenizer-independent measure of a language model: a model that spends ``L`` nats on the tokens of a text
    of ``n_bytes`` bytes codes it in ``L / ln 2`` bits, whatever the tokens were.
    """
    _checks.integer("n_bytes", n_bytes, minimum=1)
    total_loss_nats = float(total_loss_nats)
    if not math.isfinite(total_loss_nats) or total_loss_nats < 0:
        raise ValueError(f"total_loss_nats must be finite and >= 0, got {total_loss_nats}")
    return total_loss_nats / n_bytes / math.log(2)


def utf8_bytes(tokenizer: Tokenizer, ids) -> int:
    """UTF-8 bytes of the text that token ``ids`` spell (end-of-text and ``<unk>`` count 0 bytes; a compacted
    ``<unk>`` stands for a token the training text never had, so a validation stream is counted by its base ids).

    Counted token by token from the vocabulary's byte strings, so a byte-level BPE gives the exact byte count of the
    text it encoded.
    """
    counts = token_byte_lengths(tokenizer)
    ids = torch.as_tensor(ids, dtype=torch.long)
    return int(counts[ids].sum())


def token_byte_lengths(tokenizer: Tokenizer) -> torch.Tensor:
    """``(n_vocab,)`` int64: UTF-8 bytes of each id's text (0 for end-of-text and ``<unk>``)."""
    if isinstance(tokenizer, CompactTokenizer):
        base = token_byte_lengths(tokenizer.base)
        lengths = torch.zeros(tokenizer.n_vocab, dtype=torch.long)
        lengths[:len(tokenizer.kept)] = base[tokenizer.kept]
        return lengths
    if isinstance(tokenizer, TiktokenTokenizer):
        specials = set(tokenizer.encoding.special_tokens_set)
        encoding = tokenizer.encoding
        return torch.tensor([0 if i == tokenizer.eos_id or i in specials else
                             len(encoding.decode_single_token_bytes(i)) for i in range(tokenizer.n_vocab)],
                            dtype=torch.long)
    if isinstance(tokenizer, ByteTokenizer):
        lengths = torch.ones(tokenizer.n_vocab, dtype=torch.long)
        lengths[tokenizer.eos_id] = 0
        return lengths
    raise TypeError(f"tokenizer must be a gma_teach tokenizer, got {type(tokenizer).__name__}")


@dataclass(repr=False)
class CompactTokenizer(Tokenizer):
    """A base tokenizer restricted to the ids in ``kept`` (sorted), renumbered ``0..len(kept)-1``; one more id,
    ``len(kept)``, stands for any other base id (``<unk>``)."""

    base: Tokenizer
    kept: torch.Tensor
    _old_to_new: dict = field(init=False, repr=False)

    def __post_init__(self):
        self.kept = torch.as_tensor(self.kept, dtype=torch.long)
        self._old_to_new = {int(old): new for new, old in enumerate(self.kept.tolist())}
        self.n_vocab = len(self.kept) + 1
        self.unk_id = len(self.kept)
        self.name = f"{self.base.name}, compacted to {self.n_vocab} ids"
        self.eos_id = self._old_to_new.get(self.base.eos_id, self.unk_id)

    def to_new(self, base_ids) -> torch.Tensor:
        """Base ids -> compact ids (unknown ones -> ``unk_id``)."""
        return torch.tensor([self._old_to_new.get(i, self.unk_id) for i in _as_ids(base_ids)], dtype=torch.long)

    def to_base(self, ids) -> list[int | None]:
        """Compact ids -> base ids (``None`` for ``unk_id``)."""
        out = []
        for i in _as_ids(ids):
            if not 0 <= i < self.n_vocab:
                raise ValueError(f"id {i} is outside the compact vocabulary 0..{self.n_vocab - 1}")
            out.append(None if i == self.unk_id else int(self.kept[i]))
        return out

    def encode(self, text: str) -> list[int]:
        return self.to_new(self.base.encode(text)).tolist()

    def decode(self, ids) -> str:
        pieces, run = [], []
        for base_id in self.to_base(ids):
            if base_id is None:
                pieces.append(self.base.decode(run) + "<unk>")
                run = []
            else:
                run.append(base_id)
        return "".join(pieces) + self.base.decode(run)

    def token_strings(self, ids) -> list[str]:
        return ["<unk>" if b is None else self.base.token_strings([b])[0] for b in self.to_base(ids)]


def compact(base: Tokenizer, *streams: torch.Tensor) -> CompactTokenizer:
    """A :class:`CompactTokenizer` keeping exactly the base ids that occur in ``streams`` (and end-of-text)."""
    if not streams:
        raise ValueError("compact needs at least one id stream")
    present = torch.unique(torch.cat([s.flatten() for s in streams] + [torch.tensor([base.eos_id])]))
    return CompactTokenizer(base, present)


# --------------------------------------------------------------------------------------------- corpora
def stdlib_corpus(*, min_chars: int = 40) -> list[str]:
    """Documents of real English from the running Python: the ``pydoc_data`` help topics (sorted by name), then
    every module's, class's and function's docstring of at least ``min_chars`` characters (sorted file walk of the
    standard library, test folders and site-packages excluded). Depends only on the Python version."""

    documents = [topics[name] for name in sorted(topics)]
    documents.extend(docstrings_under(sysconfig.get_paths()["stdlib"], min_chars))
    return documents


def load_wikitext(name: str = "wikitext-103", *, data_files: dict | None = None) -> dict[str, str]:
    """WikiText's raw splits ``{"train", "validation", "test"}`` as one string each (rows joined as given).

    Args:
        name: ``"wikitext-103"`` or ``"wikitext-2"`` (the ``-raw-v1`` configs, meant for BPE).
        data_files: local files in the hub's format (column ``text``) instead of the hub.

    Raises:
        DataUnavailableError: quickly when the hub cannot be reached (offline: ``source="stdlib"``).
    """
    if name not in CONFIGS:
        raise ValueError(f"name must be one of {sorted(CONFIGS)}, got {name!r}")

    hint = "Offline, use the standard-library corpus: gma_teach.data.wikitext.lm_data(source='stdlib', ...)."
    raw = load_hub_dataset(HUB_REPO, CONFIGS[name], data_files=data_files, offline_hint=hint)
    result = {}
    for split in raw:
        if "text" not in raw[split].column_names:
            raise ValueError(f"split {split!r} has columns {raw[split].column_names}, expected 'text'")
        result[split] = "".join(line if line.endswith("\n") else line + "\n" for line in raw[split]["text"])
    return result


# --------------------------------------------------------------------------------------------- packing
def encode_documents(tokenizer: Tokenizer, documents: Sequence[str], *, max_tokens: int | None = None) -> torch.Tensor:
    """One stream ``(n_tokens,)``: each document's ids followed by end-of-text, cut at ``max_tokens``."""
    ids: list[int] = []
    for document in documents:
        ids.extend(tokenizer.encode(document))
        ids.append(tokenizer.eos_id)
        if max_tokens is not None and len(ids) >= max_tokens:
            return torch.tensor(ids[:max_tokens], dtype=torch.long)
    return torch.tensor(ids, dtype=torch.long)


def encode_text(tokenizer: Tokenizer, text: str, *, max_tokens: int | None = None,
                chunk_chars: int = 1 << 20) -> torch.Tensor:
    """One long text (a WikiText split) as ids ``(n_tokens,)``, encoded in pieces of about ``chunk_chars``
    characters cut after a newline (so a 500 MB split never becomes one call), stopping once ``max_tokens`` ids are
    reached. Ends with end-of-text."""
    pieces, count, start = [], 0, 0
    while start < len(text) and (max_tokens is None or count < max_tokens):
        stop = text.find("\n", start + chunk_chars)
        stop = len(text) if stop < 0 else stop + 1
        ids = tokenizer.encode(text[start:stop])
        pieces.append(torch.tensor(ids, dtype=torch.long))
        count, start = count + len(ids), stop
    pieces.append(torch.tensor([tokenizer.eos_id], dtype=torch.long))
    stream = torch.cat(pieces)
    return stream if max_tokens is None else stream[:max_tokens]


def pack(stream: torch.Tensor, block_size: int) -> torch.Tensor:
    """Non-overlapping blocks ``(n_blocks, block_size + 1)`` of a 1-D ``stream``: block ``i`` is
    ``stream[i*block_size : (i+1)*block_size + 1]``, so inputs ``b[:-1]`` and targets ``b[1:]`` cover the stream
    once; the tail that does not fill a block is dropped."""
    if not isinstance(stream, torch.Tensor) or stream.dim() != 1:
        raise ValueError(f"stream must be a 1-D tensor, got {type(stream).__name__} "
                         f"{tuple(getattr(stream, 'shape', ()))}")
    _checks.positive_int("block_size", block_size)
    n_blocks = (stream.numel() - 1) // block_size
    if n_blocks < 1:
        raise ValueError(f"stream of {stream.numel()} tokens is too short for one block of {block_size} + 1")
    index = torch.arange(n_blocks)[:, None] * block_size + torch.arange(block_size + 1)[None, :]
    return stream[index]


@dataclass
class LMData:
    """Packed language-modelling data: ``train`` and ``val`` blocks ``(n, block_size + 1)`` of ids in
    ``tokenizer``'s vocabulary, the streams they came from, and a description of the source."""

    tokenizer: Tokenizer
    train: torch.Tensor
    val: torch.Tensor
    train_ids: torch.Tensor
    val_ids: torch.Tensor
    source: str


def split_documents(documents: Sequence[str], val_fraction: float, seed: int) -> tuple[list[str], list[str]]:
    """Shuffle documents with ``seed`` and hold out the last ``val_fraction`` of them (at least one)."""
    if not 0 < val_fraction < 1:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction!r}")
    order = list(range(len(documents)))
    random.Random(seed).shuffle(order)
    n_val = max(1, int(round(val_fraction * len(documents))))
    return [documents[i] for i in order[:-n_val]], [documents[i] for i in order[-n_val:]]


def lm_data(*, source: str = "stdlib", tokenizer: str = "auto", block_size: int = 128,
            max_train_tokens: int | None = None, max_val_tokens: int | None = None, compact_vocab: bool = True,
            val_fraction: float = 0.05, seed: int = 0, data_files: dict | None = None) -> LMData:
    """Tokenized, packed LM data, cached on disk under ``gma_teach.cache_dir()``.

    Args:
        source: ``"stdlib"`` (offline corpus; documents split train/val with ``seed``), ``"wikitext-2"``,
            ``"wikitext-103"`` (hub) or ``"files"`` (WikiText-format local ``data_files``).
        tokenizer: ``"auto"``, ``"gpt2"`` or ``"bytes"`` (see :func:`get_tokenizer`).
        block_size: context length; blocks hold ``block_size + 1`` ids.
        max_train_tokens, max_val_tokens: cut the streams (None: all).
        compact_vocab: renumber the ids that occur in train or val to ``0..V-1`` (+ ``<unk>``).
    """
    if source not in ("stdlib", "wikitext-2", "wikitext-103", "files"):
        raise ValueError(f"source must be 'stdlib', 'wikitext-2', 'wikitext-103' or 'files', got {source!r}")
    if source == "files" and data_files is None:
        raise ValueError("source='files' needs data_files={split: path}")
    base = get_tokenizer(tokenizer)

    fields = dict(source=source, tokenizer=base.name, max_train_tokens=max_train_tokens,
                  max_val_tokens=max_val_tokens, val_fraction=val_fraction, seed=seed, python=sys.version_info[:2],
                  data_files=sorted((k, str(v)) for k, v in (data_files or {}).items()))

    def build() -> dict:
        if source != "stdlib":
            text = load_wikitext("wikitext-2" if source == "files" else source,
                                 data_files=data_files if source == "files" else None)
            return {"train": encode_text(base, text["train"], max_tokens=max_train_tokens),
                    "val": encode_text(base, text["validation"], max_tokens=max_val_tokens)}
        train_docs, val_docs = split_documents(stdlib_corpus(), val_fraction, seed)
        return {"train": encode_documents(base, train_docs, max_tokens=max_train_tokens),
                "val": encode_documents(base, val_docs, max_tokens=max_val_tokens)}

    streams = cached("lm", fields, build)
    train_ids, val_ids = streams["train"], streams["val"]
    chosen: Tokenizer = base
    if compact_vocab:
        chosen = compact(base, train_ids, val_ids)
        lookup = torch.full((int(chosen.kept.max()) + 1,), chosen.unk_id, dtype=torch.long)
        lookup[chosen.kept] = torch.arange(len(chosen.kept))
        train_ids, val_ids = lookup[train_ids], lookup[val_ids]
    description = "Python standard library (pydoc topics + docstrings)" if source == "stdlib" else source
    return LMData(chosen, pack(train_ids, block_size), pack(val_ids, block_size), train_ids, val_ids, description)
