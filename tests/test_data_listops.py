"""ListOps: the generator's statistics, the evaluator against LRA's recursion and numpy, tokenization, validation,
local-file loading in the hub's formats and the fast offline error path."""
import random
import time

import numpy as np
import pytest
import torch

from gma_teach.data import DataUnavailableError, listops

SMALL = dict(max_depth=5, max_args=6, min_length=20, max_length=80)


def _nesting_depth(source):
    depth = deepest = 0
    for token in listops.tokenize(source):
        if token in listops.OPERATORS:
            depth += 1
            deepest = max(deepest, depth)
        elif token == "X":
            depth -= 1
    return deepest


def _argument_counts(source):
    counts, stack = [], []
    for token in listops.tokenize(source):
        if token in listops.OPERATORS:
            if stack:
                stack[-1] += 1
            stack.append(0)
        elif token == "X":
            counts.append(stack.pop())
        elif stack:
            stack[-1] += 1
    return counts


def test_generator_statistics():
    examples = listops.generate(400, seed=3, **SMALL)
    sources = [s for s, _ in examples]
    assert len(examples) == 400 and len(set(sources)) == 400  # deduplicated
    lengths = [len(listops.tokenize(s)) for s in sources]
    assert min(lengths) > SMALL["min_length"] and max(lengths) < SMALL["max_length"]  # strict filter
    assert {t for _, t in examples} <= set(range(10)) and len({t for _, t in examples}) >= 8
    tokens = {tok for s in sources for tok in listops.tokenize(s)}
    assert {tok for tok in tokens if tok.startswith("[")} == set(listops.OPERATORS)
    assert tokens <= set(listops.SYMBOLS)
    assert max(_nesting_depth(s) for s in sources) <= SMALL["max_depth"] - 1  # leaves forced at max_depth
    counts = [c for s in sources for c in _argument_counts(s)]
    assert min(counts) == 2 and max(counts) == SMALL["max_args"]  # randint(2, max_args) is inclusive
    assert listops.generate(50, seed=3, **SMALL) == examples[:50]  # same seed, same order
    assert listops.generate(50, seed=4, **SMALL) != examples[:50]


def test_leaf_probability_and_length_bookkeeping():
    rng = random.Random(0)
    draws = [listops.generate_tree(rng, 1, 4, 5) for _ in range(4000)]
    leaf_fraction = sum(isinstance(tree, int) for tree, _ in draws) / len(draws)
    assert abs(leaf_fraction - (1 - listops.VALUE_P)) < 0.03
    for tree, length in draws[:500]:
        assert len(listops.tokenize(listops.to_string(tree))) == length


def test_evaluator_on_hand_made_trees():
    cases = {
        "[MAX 2 9 [MIN 4 7 ] 0 ]": 9,
        "[MIN 5 [MAX 1 3 ] 8 ]": 3,
        "[MED 1 2 3 4 ]": 2,  # median 2.5, truncated
        "[MED 7 1 9 ]": 7,
        "[SM 5 7 9 ]": 1,
        "[SM [MED 9 8 ] [MAX 0 4 ] ]": 2,  # int(8.5)=8, 8 + 4 = 12 -> 2
        "4": 4,
    }
    for source, value in cases.items():
        assert listops.evaluate(source) == value, source
    tree = ((("[MAX", 2), 9), "]")  # LRA's nested-pair form, built by hand
    assert listops.to_string(tree) == "( ( ( [MAX 2 ) 9 ) ] )"
    assert listops.evaluate(listops.to_string(tree)) == 9 == listops.tree_value(tree)


def test_evaluator_matches_lra_recursion_and_numpy_median():
    for source, target in listops.generate(200, seed=1, **SMALL):
        assert listops.evaluate(source) == target
    rng = np.random.default_rng(0)
    for _ in range(300):
        args = rng.integers(0, 10, size=rng.integers(2, 12)).tolist()
        source = "[MED " + " ".join(map(str, args)) + " ]"
        assert listops.evaluate(source) == int(np.median(args))
        assert listops.evaluate("[SM " + " ".join(map(str, args)) + " ]") == int(np.sum(args) % 10)


@pytest.mark.parametrize("bad", ["[MAX 1 2", "[MAX 1 ] ]", "[FOO 1 ]", "1 2", "", "[MIN ]"])
def test_evaluator_rejects_malformed(bad):
    with pytest.raises(ValueError):
        listops.evaluate(bad)


def test_tokenization():
    source = "( ( ( [MAX 2 ) 9 ) ] )"
    assert listops.tokenize(source) == ["[MAX", "2", "9", "X"]
    assert len(listops.VOCAB) == 18 and len(listops.SYMBOLS) == 15
    ids = listops.encode(source)
    assert ids[0] == listops.CLS_ID and listops.decode(ids) == "<cls> [MAX 2 9 X"
    assert listops.encode("[MAX 2 ? ]", add_cls=False)[2] == listops.UNK_ID
    assert listops.evaluate(listops.decode(ids).split()[1:]) == 9  # X closes an operator too
    with pytest.raises(ValueError, match="max_seq_len"):
        listops.encode(source, max_seq_len=4)
    examples = listops.generate(30, seed=0, **SMALL)
    tokens, labels = listops.to_tensors(examples, SMALL["max_length"])
    assert tokens.shape == (30, SMALL["max_length"]) and tokens.dtype == torch.long
    lengths = (tokens != listops.PAD_ID).sum(1)
    assert lengths.tolist() == [len(listops.tokenize(s)) + 1 for s, _ in examples]
    assert labels.tolist() == [t for _, t in examples]


def test_validate_accepts_generated_and_rejects_corruptions():
    examples = listops.generate(60, seed=2, **SMALL)
    bounds = dict(min_length=SMALL["min_length"], max_length=SMALL["max_length"])
    report = listops.validate({"train": examples}, expected_sizes=None, max_majority=0.5, **bounds)
    assert report["train"]["size"] == 60 and sum(report["train"]["label_counts"].values()) == 60
    wrong = [(s, (t + 1) % 10) for s, t in examples]
    with pytest.raises(ValueError, match="evaluates to"):
        listops.validate({"train": wrong}, expected_sizes=None, max_majority=0.5, **bounds)
    with pytest.raises(ValueError, match="rows, expected"):
        listops.validate({"train": examples}, expected_sizes={"train": 61}, max_majority=0.5, **bounds)
    with pytest.raises(ValueError, match="vocabulary"):
        listops.validate({"train": [("[MAX 1 a ]", 1)]}, expected_sizes=None, min_length=0)
    with pytest.raises(ValueError, match="label 4 holds"):
        listops.validate({"train": [("[MAX 1 4 ]", 4)] * 5}, expected_sizes=None, min_length=0)


def _write(tmp_path, fmt, splits):
    import pandas as pd

    files = {}
    for split, examples in splits.items():
        frame = pd.DataFrame({"Source": [s for s, _ in examples], "Target": [t for _, t in examples]})
        path = tmp_path / f"{split}.{fmt}"
        if fmt == "parquet":
            frame.to_parquet(path)
        elif fmt == "jsonl":
            frame.to_json(path, orient="records", lines=True)
        else:
            frame.to_csv(path, sep="\t", index=False)
        files[split] = path
    return files


@pytest.mark.parametrize("fmt", ["parquet", "jsonl", "tsv"])
def test_load_local_files_in_hub_formats(tmp_path, monkeypatch, fmt):
    monkeypatch.setenv("GMA_TEACH_CACHE", str(tmp_path / "cache"))
    examples = listops.generate(50, seed=5, **SMALL)
    files = _write(tmp_path, fmt, {"train": examples[:30], "val": examples[30:40], "test": examples[40:]})
    bounds = dict(min_length=SMALL["min_length"], max_length=SMALL["max_length"])
    loaded = listops.load(data_files=files, expected_sizes={"train": 30, "validation": 10, "test": 10}, **bounds)
    assert loaded["train"] == examples[:30] and loaded["validation"] == examples[30:40]
    data = listops.splits(20, 5, 5, source="files", data_files=files, **bounds)
    tokens, labels = data["test"]
    assert tokens.shape == (5, SMALL["max_length"]) and labels.tolist() == [t for _, t in examples[40:45]]
    bad = _write(tmp_path, fmt, {"train": [(s, (t + 3) % 10) for s, t in examples]})
    with pytest.raises(ValueError, match="evaluates to"):
        listops.load(data_files=bad, expected_sizes=None, **bounds)


def test_splits_generated_are_disjoint_and_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("GMA_TEACH_CACHE", str(tmp_path))
    data = listops.splits(40, 10, 10, seed=7, **SMALL)
    rows = {tuple(row.tolist()) for split in ("train", "validation", "test") for row in data[split][0]}
    assert len(rows) == 60
    assert len(list((tmp_path / "data").glob("listops-*.pt"))) == 1
    again = listops.splits(40, 10, 10, seed=7, **SMALL)
    assert torch.equal(again["train"][0], data["train"][0])
    with pytest.raises(ValueError, match="source"):
        listops.splits(1, 1, 1, source="web")


def test_offline_without_source_fails_fast(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    start = time.perf_counter()
    with pytest.raises(DataUnavailableError, match="generate"):
        listops.load(repo="gma-teach/not-a-cached-dataset")
    assert time.perf_counter() - start < 10


def test_unreachable_hub_fails_fast(monkeypatch):
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "https://hub.invalid")
    start = time.perf_counter()
    with pytest.raises(DataUnavailableError, match="HF_DATASETS_OFFLINE"):
        listops.load()
    assert time.perf_counter() - start < 10


def test_bad_arguments():
    with pytest.raises(ValueError, match="max_args"):
        listops.generate(3, max_args=1)
    with pytest.raises(ValueError, match="min_length"):
        listops.generate(3, min_length=10, max_length=11)
    with pytest.raises(RuntimeError, match="passed"):
        listops.generate(3, max_depth=1, min_length=5, max_length=50, max_tries=100)
    with pytest.raises(TypeError, match="source"):
        listops.tokenize(3)
