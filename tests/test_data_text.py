"""Byte-level text classification data: encoding, the seeded subset, IMDb-format local files, the stdlib stand-in."""
import time

import pytest
import torch

from gma_teach.data import DataUnavailableError, text


def test_byte_encoding_roundtrip_and_truncation():
    sample = "Caf\u00e9 \u2014 great film!"
    ids = text.encode_bytes(sample, 100)
    assert ids == [b + 1 for b in sample.encode("utf-8")] and min(ids) >= 1 and max(ids) <= 256
    assert text.decode_bytes(ids + [0, 0]) == sample
    assert len(text.encode_bytes(sample, 5)) == 5
    tokens, labels = text.to_tensors([sample, "ok"], [1, 0], 8)
    assert tokens.shape == (2, 8) and tokens[1, 2:].eq(0).all() and labels.tolist() == [1, 0]
    with pytest.raises(ValueError, match="max_length"):
        text.encode_bytes(sample, 0)
    with pytest.raises(TypeError, match="text"):
        text.encode_bytes(b"bytes", 3)
    with pytest.raises(ValueError, match="equal lengths"):
        text.to_tensors(["a"], [0, 1], 4)


def _imdb_files(tmp_path, n=40):
    import pandas as pd

    # grouped by label, as the hub lists IMDb
    rows = [(f"review {i} " + ("terrible " if i < n // 2 else "wonderful ") * (i % 5 + 1), int(i >= n // 2))
            for i in range(n)]
    files = {}
    for split in ("train", "test"):
        path = tmp_path / f"{split}.parquet"
        pd.DataFrame({"text": [split + " " + r[0] for r in rows], "label": [r[1] for r in rows]}).to_parquet(path)
        files[split] = path
    return files, rows


def test_imdb_from_local_parquet_is_shuffled_before_subset(tmp_path, monkeypatch):
    monkeypatch.setenv("GMA_TEACH_CACHE", str(tmp_path / "cache"))
    files, rows = _imdb_files(tmp_path)
    data = text.splits(10, 6, source="files", data_files=files, max_length=64, seed=0)
    tokens, labels = data["train"]
    assert tokens.shape == (10, 64) and data["classes"] == text.IMDB_CLASSES
    assert 0 < labels.float().mean() < 1  # a prefix of grouped rows would hold one label only
    for row, label in zip(tokens, labels):
        decoded = text.decode_bytes(row)
        assert decoded.startswith("train ") and ("wonderful" in decoded) == bool(label)
    again = text.splits(10, 6, source="files", data_files=files, max_length=64, seed=0)
    assert torch.equal(again["train"][0], tokens)
    other = text.splits(10, 6, source="files", data_files=files, max_length=64, seed=1)
    assert not torch.equal(other["train"][0], tokens)
    with pytest.raises(ValueError, match="available"):
        text.splits(100, 6, source="files", data_files=files, seed=2)


def test_imdb_rejects_wrong_columns(tmp_path, monkeypatch):
    import pandas as pd

    monkeypatch.setenv("GMA_TEACH_CACHE", str(tmp_path / "cache"))
    files = {}
    for split in ("train", "test"):
        files[split] = tmp_path / f"{split}.jsonl"
        pd.DataFrame({"review": ["a"], "label": [0]}).to_json(files[split], orient="records", lines=True)
    with pytest.raises(ValueError, match="columns"):
        text.load_imdb(data_files=files)


def test_stdlib_stand_in(tmp_path, monkeypatch):
    monkeypatch.setenv("GMA_TEACH_CACHE", str(tmp_path))
    pairs = text.stdlib_docstrings()
    groups = {g for g, _ in pairs}
    assert groups == set(text.STDLIB_GROUPS) and len(pairs) > 500
    texts = [t for _, t in pairs]
    assert len(set(texts)) == len(texts)  # no docstring under two labels or in two splits
    data = text.splits(200, 100, source="stdlib", max_length=256, seed=0)
    train_rows = {tuple(r.tolist()) for r in data["train"][0]}
    test_rows = {tuple(r.tolist()) for r in data["test"][0]}
    assert not train_rows & test_rows
    assert set(data["train"][1].tolist()) == {0, 1, 2, 3} and data["classes"] == text.STDLIB_GROUPS
    with pytest.raises(ValueError, match="group"):
        text.stdlib_docstrings(("no_such_package_here",))


def test_imdb_offline_fails_fast(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", "/nonexistent-gma-teach-hf-home")
    start = time.perf_counter()
    with pytest.raises(DataUnavailableError, match="stdlib"):
        text.load_imdb()
    assert time.perf_counter() - start < 10
