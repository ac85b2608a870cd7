"""Multi-query associative recall: the generator keeps Zoology's rules, checked as properties on random sizes."""
from __future__ import annotations

import pytest
import torch

from gma_teach.tasks import IGNORE_INDEX, MQARData, mqar, mqar_gap_probabilities

SIZES = [(7, 16, 1, 10), (13, 37, 4, 50), (9, 64, 16, 40), (5, 65, 3, 7)]  # (examples, seq_len, pairs, vocab)


@pytest.mark.parametrize("n, seq_len, pairs, vocab", SIZES)
def test_every_label_is_the_value_that_followed_its_key(n, seq_len, pairs, vocab):
    data = mqar(n, seq_len, pairs, vocab_size=vocab, seed=3)
    assert isinstance(data, MQARData) and data.inputs.shape == data.labels.shape == (n, seq_len)
    for inputs, labels in zip(data.inputs.tolist(), data.labels.tolist()):
        context = {inputs[i]: inputs[i + 1] for i in range(0, 2 * pairs, 2)}
        scored = [t for t, label in enumerate(labels) if label != IGNORE_INDEX]
        assert len(scored) == pairs  # every key is asked exactly once
        assert sorted(inputs[t] for t in scored) == sorted(context)
        for t in scored:
            assert t >= 2 * pairs and (t - 2 * pairs) % 2 == 0  # a query opens a two-position slot after the context
            assert labels[t] == context[inputs[t]]


@pytest.mark.parametrize("n, seq_len, pairs, vocab", SIZES)
def test_keys_are_distinct_and_the_halves_of_the_vocabulary_split_keys_from_values(n, seq_len, pairs, vocab):
    data = mqar(n, seq_len, pairs, vocab_size=vocab, seed=5)
    keys, values = data.inputs[:, 0:2 * pairs:2], data.inputs[:, 1:2 * pairs:2]
    for row in keys.tolist():
        assert len(set(row)) == pairs
    assert int(keys.max()) < vocab // 2 <= int(values.min()) and int(values.max()) < vocab
    assert int(data.inputs.min()) >= 0 and int(data.inputs.max()) < vocab


def test_the_same_seed_gives_the_same_data_and_another_seed_other_data():
    a, b = mqar(20, 32, 4, vocab_size=64, seed=11), mqar(20, 32, 4, vocab_size=64, seed=11)
    c = mqar(20, 32, 4, vocab_size=64, seed=12)
    assert torch.equal(a.inputs, b.inputs) and torch.equal(a.labels, b.labels)
    assert not torch.equal(a.inputs, c.inputs)


def test_without_random_fill_every_other_position_is_zero():
    data = mqar(6, 30, 3, vocab_size=40, seed=0, random_fill=False)
    scored = data.labels != IGNORE_INDEX
    rest = data.inputs[:, 6:][~scored[:, 6:]]
    assert torch.all(rest == 0)


def test_queries_follow_the_power_law_close_to_the_context():
    probabilities = mqar_gap_probabilities(20, 0.01)
    assert torch.isclose(probabilities.sum(), torch.tensor(1.0, dtype=torch.float64))
    assert torch.all(probabilities[:-1] > probabilities[1:])  # decreasing with the gap
    data = mqar(4000, 42, 1, vocab_size=50, seed=1)  # 20 slots after a 2-token context
    slots = ((data.labels != IGNORE_INDEX).nonzero()[:, 1] - 2) // 2
    observed = torch.bincount(slots, minlength=20).double() / 4000
    assert torch.allclose(observed, probabilities, atol=0.03)
    uniform = mqar_gap_probabilities(20, 1.0)
    assert torch.allclose(uniform, torch.full((20,), 0.05, dtype=torch.float64))


@pytest.mark.parametrize("kwargs, message", [
    (dict(n_examples=4, seq_len=15, n_pairs=4, vocab_size=64), "seq_len >= 4 \\* n_pairs"),
    (dict(n_examples=4, seq_len=64, n_pairs=9, vocab_size=16), "vocab_size >= 2 \\* n_pairs"),
    (dict(n_examples=0, seq_len=64, n_pairs=2, vocab_size=16), "n_examples"),
    (dict(n_examples=4, seq_len=64, n_pairs=0, vocab_size=16), "n_pairs"),
    (dict(n_examples=4, seq_len=64, n_pairs=2, vocab_size=16, power_a=1.5), "power_a"),
    (dict(n_examples=4, seq_len=64, n_pairs=2, vocab_size=16, power_a=0.0), "power_a"),
])
def test_impossible_sizes_raise_clear_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        mqar(**kwargs)


def test_a_non_integer_size_is_a_type_error():
    with pytest.raises(TypeError, match="seq_len"):
        mqar(4, 64.0, 2, vocab_size=16)
