"""Reaching the Hugging Face hub without hanging, and caching processed tensors.

``datasets`` is imported inside the functions (never when ``gma_teach`` is imported): the package works without it.
An unreachable hub costs ``datasets`` about 25 s of retries before it fails, so :func:`load_hub_dataset` first
honours ``HF_HUB_OFFLINE`` / ``HF_DATASETS_OFFLINE`` (cache only) and otherwise probes the hub with a short socket
timeout, failing within seconds with a message that says what to do.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlparse

import torch

from ..environment import cache_dir

DEFAULT_ENDPOINT = "https://huggingface.co"
_LOCAL_BUILDERS = {".parquet": "parquet", ".json": "json", ".jsonl": "json", ".arrow": "arrow", ".csv": "csv",
                   ".tsv": "csv"}


class DataUnavailableError(RuntimeError):
    """The requested data cannot be loaded here; the message says which offline source to use instead."""


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def hub_offline() -> bool:
    """True when ``HF_HUB_OFFLINE`` or ``HF_DATASETS_OFFLINE`` asks for cache-only access."""
    return _truthy("HF_HUB_OFFLINE") or _truthy("HF_DATASETS_OFFLINE")


def hub_host() -> tuple[str, int]:
    """Host and port of the hub endpoint in force (``HF_ENDPOINT``, as ``huggingface_hub`` reads it)."""
    parsed = urlparse(os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT)
    return parsed.hostname or "huggingface.co", parsed.port or (80 if parsed.scheme == "http" else 443)


def hub_reachable(timeout: float = 2.0) -> bool:
    """Whether a TCP connection to the hub opens within ``timeout`` seconds (assumed True behind a proxy)."""
    if any(os.environ.get(name) for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return True
    try:
        with socket.create_connection(hub_host(), timeout=timeout):
            return True
    except OSError:
        return False


@contextlib.contextmanager
def _offline_mode():
    """Force cache-only access even when ``datasets`` was imported before the offline variables were set."""
    import datasets.config  # optional dependency (the data extra)
    import huggingface_hub.constants  # optional dependency (the data extra)

    saved = (datasets.config.HF_HUB_OFFLINE, datasets.config.HF_DATASETS_OFFLINE,
             huggingface_hub.constants.HF_HUB_OFFLINE)
    datasets.config.HF_HUB_OFFLINE = datasets.config.HF_DATASETS_OFFLINE = True
    huggingface_hub.constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        (datasets.config.HF_HUB_OFFLINE, datasets.config.HF_DATASETS_OFFLINE,
         huggingface_hub.constants.HF_HUB_OFFLINE) = saved


def local_builder(path: str | os.PathLike) -> tuple[str, dict]:
    """The ``datasets`` builder name and extra options for a local data file, chosen by its extension."""
    suffix = Path(path).suffix.lower()
    if suffix not in _LOCAL_BUILDERS:
        raise ValueError(f"data file {str(path)!r} has extension {suffix!r}; supported: {sorted(_LOCAL_BUILDERS)}")
    return _LOCAL_BUILDERS[suffix], ({"delimiter": "\t"} if suffix == ".tsv" else {})


def load_hub_dataset(repo: str, config: str | None = None, *, data_files: dict | None = None,
                     offline_hint: str = ""):
    """A ``datasets.DatasetDict`` from the hub (``repo``, ``config``) or from local ``data_files``.

    Args:
        repo: hub dataset id such as ``"stanfordnlp/imdb"`` (ignored when ``data_files`` is given).
        config: hub configuration name (``"plain_text"``, ``"wikitext-2-raw-v1"``) or None.
        data_files: ``{split: path}`` of local files in the hub's formats (parquet, arrow, json/jsonl, csv, tsv);
            all files must share one format.
        offline_hint: what the caller can use instead, appended to the error message.

    Raises:
        DataUnavailableError: within seconds when the hub cannot be reached and the data is not cached.
    """
    try:
        import datasets  # optional dependency (the data extra)
    except ImportError as error:
        raise DataUnavailableError(
            f"loading {repo!r} needs the 'datasets' package (pip install 'gma_teach[data]'). {offline_hint}"
        ) from error
    if data_files is not None:
        if not isinstance(data_files, dict) or not data_files:
            raise TypeError(f"data_files must be a non-empty dict {{split: path}}, got {data_files!r}")
        builders = [local_builder(path) for path in data_files.values()]
        if len({name for name, _ in builders}) != 1:
            raise ValueError(f"data_files must share one format, got {sorted(str(p) for p in data_files.values())}")
        builder, options = builders[0]
        files = {split: str(path) for split, path in data_files.items()}
        return datasets.load_dataset(builder, data_files=files, cache_dir=str(_hf_cache()), **options)
    offline = hub_offline()
    if not offline and not hub_reachable():
        raise DataUnavailableError(
            f"cannot reach {hub_host()[0]} to download {repo!r} (no network?). Set HF_DATASETS_OFFLINE=1 to use a "
            f"cached copy, pass data_files= with local files, or use an offline source. {offline_hint}"
        )
    try:
        with _offline_mode() if offline else contextlib.nullcontext():
            return datasets.load_dataset(repo, config)
    except (ConnectionError, OSError, FileNotFoundError) as error:
        state = "offline mode is on and it is not cached" if offline else "the hub did not serve it"
        raise DataUnavailableError(
            f"{repo!r} is not available: {state} ({type(error).__name__}: {str(error)[:200]}). {offline_hint}"
        ) from error


def _hf_cache() -> Path:

    return cache_dir() / "hf_local"


def cache_key(**fields) -> str:
    """A short stable hash of the JSON of ``fields`` (used to name cached tensors)."""
    text = json.dumps(fields, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def cached(name: str, fields: dict, build: Callable[[], dict]) -> dict:
    """``build()`` once per ``fields``, saved with ``torch.save`` under ``cache_dir()/data``; later calls load it.

    Disable with ``GMA_TEACH_NO_DATA_CACHE=1``.
    """

    if _truthy("GMA_TEACH_NO_DATA_CACHE"):
        return build()
    path = cache_dir() / "data" / f"{name}-{cache_key(**fields)}.pt"
    if path.exists():
        return torch.load(path, weights_only=False)
    value = build()
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(f".tmp{os.getpid()}")
    torch.save(value, temporary)
    temporary.replace(path)
    return value
