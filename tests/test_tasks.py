"""The synthetic tasks of chapter 5: labels agree with a slow per-sequence spec, inputs are validated."""
import pytest
import torch
from torch import nn

from gma_teach.tasks import TaskModel, majority_task, recall_task


def _majority_label_spec(sequence: list[int]) -> int:
    return int(sequence.count(0) > sequence.count(1))


def test_majority_labels_match_a_slow_count():
    data = majority_task(257, 23, n_distractors=3, seed=5)
    assert data.tokens.shape == (257, 23, 1) and data.tokens.dtype == torch.long
    assert data.vocab_sizes == (6,) and data.n_classes == 2
    for tokens, label in zip(data.tokens[..., 0].tolist(), data.labels.tolist()):
        body = tokens[:-1]
        assert tokens[-1] == 5 and 5 not in body
        assert body.count(0) != body.count(1), "ties must be broken"
        assert label == _majority_label_spec(body)


def test_majority_is_balanced_and_seeded():
    data = majority_task(4000, 31, seed=1)
    assert 0.4 < data.labels.float().mean().item() < 0.6
    again = majority_task(4000, 31, seed=1)
    other = majority_task(4000, 31, seed=2)
    assert torch.equal(data.tokens, again.tokens) and torch.equal(data.labels, again.labels)
    assert not torch.equal(data.tokens, other.tokens)


def test_majority_without_distractors_uses_only_a_and_b():
    data = majority_task(64, 10, n_distractors=0, seed=0)
    assert set(data.tokens[:, :-1].unique().tolist()) <= {0, 1}


def test_recall_label_is_the_value_stored_with_the_query_key():
    data = recall_task(301, 7, n_keys=11, n_values=5, seed=3)
    assert data.tokens.shape == (301, 8, 2)
    assert data.vocab_sizes == (11, 6) and data.n_classes == 5
    for sequence, label in zip(data.tokens.tolist(), data.labels.tolist()):
        pairs, (query_key, query_value) = sequence[:-1], sequence[-1]
        keys = [key for key, _ in pairs]
        assert len(set(keys)) == len(keys), "keys in a sequence are distinct"
        assert query_value == 5 and all(0 <= value < 5 for _, value in pairs)
        assert label == dict(pairs)[query_key]


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: majority_task(0, 5), "n_samples"),
        (lambda: majority_task(3, 1), "seq_len"),
        (lambda: majority_task(3, 5, n_distractors=-1), "n_distractors"),
        (lambda: recall_task(3, 9, n_keys=4, n_values=3), "n_pairs"),
        (lambda: recall_task(3, 2, n_keys=4, n_values=1), "n_values"),
    ],
)
def test_bad_sizes_raise_value_errors_naming_the_argument(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_non_integer_size_raises_type_error():
    with pytest.raises(TypeError, match="seq_len"):
        majority_task(3, 5.0)


class _ZeroMixer(nn.Module):
    def forward(self, x):
        return torch.zeros_like(x)


def test_task_model_reads_out_at_the_query_position_only_through_the_mixer():
    torch.manual_seed(0)
    data = recall_task(4, 5, n_keys=6, n_values=3, seed=0)
    isolated = TaskModel(data.vocab_sizes, 8, _ZeroMixer(), data.n_classes)
    changed = data.tokens.clone()
    changed[:, 0, 1] = (changed[:, 0, 1] + 1) % 3
    assert isolated(data.tokens).shape == (4, 3)
    assert torch.equal(isolated(data.tokens), isolated(changed)), "without mixing, earlier tokens are invisible"
    mean_mixer = TaskModel(data.vocab_sizes, 8, _MeanMixer(), data.n_classes)
    assert not torch.allclose(mean_mixer(data.tokens), mean_mixer(changed)), "a mixing layer must see them"


class _MeanMixer(nn.Module):
    def forward(self, x):
        return x.mean(dim=1, keepdim=True).expand_as(x)


def test_task_model_rejects_wrong_field_count():
    model = TaskModel((6,), 8, _ZeroMixer(), 2)
    with pytest.raises(ValueError, match="tokens must have shape"):
        model(torch.zeros(2, 5, 2, dtype=torch.long))
    with pytest.raises(TypeError, match="mixer"):
        TaskModel((6,), 8, "gma", 2)


def test_task_data_is_a_dataset_for_the_training_loop():
    data = recall_task(10, 3, n_keys=5, n_values=2, seed=0)
    tokens, label = data[4]
    assert torch.equal(tokens, data.tokens[4]) and label == data.labels[4]
    batches = list(torch.utils.data.DataLoader(data, batch_size=4))
    assert [len(b[1]) for b in batches] == [4, 4, 2]
    assert torch.equal(torch.cat([b[0] for b in batches]), data.tokens)
