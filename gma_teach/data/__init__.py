"""The data behind chapters 9-11: LRA ListOps and Text, and language-modelling text.

* :mod:`gma_teach.data.listops` -- the ListOps generator, evaluator, tokenization and the official data;
* :mod:`gma_teach.data.text` -- byte-level IMDb and its offline stand-in (standard-library docstrings);
* :mod:`gma_teach.data.wikitext` -- WikiText, GPT-2's BPE, an offline English corpus, packing, compaction.

Hub loaders import ``datasets`` only when called, honour ``HF_HUB_OFFLINE`` / ``HF_DATASETS_OFFLINE`` and fail
within seconds with :class:`DataUnavailableError` (saying which offline source to use) when the hub is unreachable.
Processed tensors are cached under ``gma_teach.cache_dir() / "data"``.
"""
from . import listops, text, wikitext
from ._hub import DataUnavailableError, hub_offline, hub_reachable
