"""LM data: tokenizers, the offline corpus, packing, compaction, WikiText-format local files, offline errors."""
import math
import time

import pytest
import torch

from gma_teach.data import DataUnavailableError, wikitext


def test_byte_tokenizer_roundtrip():
    tok = wikitext.get_tokenizer("bytes")
    sample = "na\u00efve caf\u00e9\n"
    ids = tok.encode(sample)
    assert tok.decode(ids + [tok.eos_id]) == sample and tok.n_vocab == 257
    assert "".join(tok.token_strings(tok.encode("abc"))) == "abc"


def test_gpt2_tokenizer_ships_with_the_package():
    import hashlib
    import os

    path = wikitext.gpt2_vocabulary_file()
    assert os.path.isfile(path) and os.path.isfile(path + ".LICENSE")
    with open(path, "rb") as handle:
        assert hashlib.sha256(handle.read()).hexdigest() == wikitext.GPT2_TIKTOKEN_SHA256
    pytest.importorskip("tiktoken")
    for kind in ("gpt2", "auto"):
        tok = wikitext.get_tokenizer(kind)
        assert tok.name == wikitext.GPT2_NAME
        assert tok.encode("Hello world") == [15496, 995] and tok.n_vocab == 50257 and tok.eos_id == 50256
        assert tok.token_strings(tok.encode("Hello world, the")) == ["Hello", " world", ",", " the"]


def test_gpt2_tokenizer_refuses_a_corrupted_file(tmp_path):
    pytest.importorskip("tiktoken")
    bad = tmp_path / "gpt2.tiktoken"
    bad.write_bytes(open(wikitext.gpt2_vocabulary_file(), "rb").read()[:-10])
    with pytest.raises(ValueError, match="SHA-256"):
        wikitext._gpt2_from_file(str(bad))


def test_bits_per_byte_by_hand():
    # Two tokens each predicted with probability 1/4 cost 2 ln 4 nats = 4 bits; over 8 bytes: 0.5 bits per byte.
    assert wikitext.bits_per_byte(2 * math.log(4), 8) == pytest.approx(0.5, abs=1e-15)
    # A byte-level model that gives each byte probability 1/256 codes 8 bits per byte.
    assert wikitext.bits_per_byte(5 * math.log(256), 5) == pytest.approx(8.0, abs=1e-12)
    with pytest.raises(ValueError, match="n_bytes"):
        wikitext.bits_per_byte(1.0, 0)
    with pytest.raises(TypeError, match="n_bytes"):
        wikitext.bits_per_byte(1.0, 2.5)
    with pytest.raises(ValueError, match="total_loss_nats"):
        wikitext.bits_per_byte(float("nan"), 3)


@pytest.mark.parametrize("kind", ["bytes", "gpt2"])
def test_utf8_bytes_counts_the_text(kind):
    if kind == "gpt2":
        pytest.importorskip("tiktoken")
    base = wikitext.get_tokenizer(kind)
    text = "na\u00efve caf\u00e9 \u2014 the end\n"
    ids = base.encode(text) + [base.eos_id]
    assert wikitext.utf8_bytes(base, ids) == len(text.encode("utf-8"))  # end-of-text counts no byte
    tok = wikitext.compact(base, torch.tensor(ids))
    assert wikitext.utf8_bytes(tok, tok.to_new(ids)) == len(text.encode("utf-8"))
    assert wikitext.utf8_bytes(tok, torch.tensor([tok.unk_id])) == 0


def test_pack_covers_the_stream_once():
    stream = torch.arange(23)
    blocks = wikitext.pack(stream, 5)
    assert blocks.shape == (4, 6)
    assert torch.equal(blocks[:, :-1].flatten(), stream[:20]) and torch.equal(blocks[:, 1:].flatten(), stream[1:21])
    with pytest.raises(ValueError, match="block_size"):
        wikitext.pack(stream, 0)
    with pytest.raises(ValueError, match="too short"):
        wikitext.pack(torch.arange(3), 5)
    with pytest.raises(ValueError, match="1-D"):
        wikitext.pack(torch.zeros(2, 3, dtype=torch.long), 1)


def test_encode_text_in_pieces_equals_whole():
    tok = wikitext.get_tokenizer("bytes")
    text = "".join(f" = Heading {i} = \n\n Some text , with @-@ marks .\n" for i in range(50))
    whole = torch.tensor(tok.encode(text) + [tok.eos_id])
    assert torch.equal(wikitext.encode_text(tok, text, chunk_chars=37), whole)
    assert torch.equal(wikitext.encode_text(tok, text, chunk_chars=37, max_tokens=100), whole[:100])


def test_compaction_roundtrip_and_unknowns():
    base = wikitext.get_tokenizer("bytes")
    stream = torch.tensor(base.encode("the cat sat on the mat"))
    tok = wikitext.compact(base, stream)
    assert tok.n_vocab == len(set(stream.tolist())) + 2  # + end-of-text + <unk>
    new = tok.to_new(stream)
    assert new.max() < tok.n_vocab and tok.decode(new) == "the cat sat on the mat"
    assert tok.token_strings(tok.encode("cat")) == ["c", "a", "t"]
    assert tok.decode(tok.encode("dog")).count("<unk>") == 2  # 'd' and 'g' never occurred; 'o' did
    assert tok.to_base([tok.unk_id]) == [None] and tok.eos_id != tok.unk_id
    with pytest.raises(ValueError, match="outside"):
        tok.to_base([tok.n_vocab])


def test_stdlib_corpus_lm_data(tmp_path, monkeypatch):
    monkeypatch.setenv("GMA_TEACH_CACHE", str(tmp_path))
    data = wikitext.lm_data(source="stdlib", tokenizer="bytes", block_size=32, max_train_tokens=20_000,
                            max_val_tokens=5_000)
    assert data.train.shape == ((20_000 - 1) // 32, 33) and data.val.shape == ((5_000 - 1) // 32, 33)
    assert int(data.train.max()) < data.tokenizer.n_vocab
    text = data.tokenizer.decode(data.train[0])
    assert sum(c.isalpha() for c in text) > 0.5 * len(text)  # real English
    train_docs, val_docs = wikitext.split_documents(wikitext.stdlib_corpus(), 0.05, 0)
    assert len(train_docs) > 5000 and all(isinstance(d, str) and d for d in val_docs)
    assert len(val_docs) == round(0.05 * (len(train_docs) + len(val_docs)))
    assert len(list((tmp_path / "data").glob("lm-*.pt"))) == 1


def test_wikitext_local_files(tmp_path, monkeypatch):
    import pandas as pd

    monkeypatch.setenv("GMA_TEACH_CACHE", str(tmp_path / "cache"))
    lines = ["", " = Valkyria Chronicles = \n", "", " The game began development in 2010 . \n"] * 30
    files = {}
    for split in ("train", "validation", "test"):
        files[split] = tmp_path / f"{split}.parquet"
        pd.DataFrame({"text": lines}).to_parquet(files[split])
    raw = wikitext.load_wikitext("wikitext-2", data_files=files)
    assert raw["train"].startswith("\n = Valkyria") and raw["validation"].count("\n") == len(lines)
    data = wikitext.lm_data(source="files", data_files=files, tokenizer="bytes", block_size=16, compact_vocab=False)
    assert torch.equal(data.train_ids[:20], torch.tensor(list(raw["train"].encode()[:20])))
    assert data.val.shape[1] == 17


def test_offline_errors_are_fast_and_say_what_to_do(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    start = time.perf_counter()
    with pytest.raises(DataUnavailableError, match="stdlib"):
        wikitext.load_wikitext("wikitext-103")
    assert time.perf_counter() - start < 10
    with pytest.raises(ValueError, match="name"):
        wikitext.load_wikitext("wikitext-3")
    with pytest.raises(ValueError, match="source"):
        wikitext.lm_data(source="web")
