"""Two removals of wasted work, each shown to leave every result unchanged: ``fit`` no longer counts correct
arg-max predictions on training steps (a count it discarded), and the MQAR generator draws its keys and values
without sorting every row (the same draws, tie for tie)."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from gma_teach import tasks, train
from gma_teach.tasks import IGNORE_INDEX, mqar, mqar_gap_probabilities


# ------------------------------------------------------------------------------------------------ fit
class _Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(11, 8)
        self.head = nn.Linear(8, 3)

    def forward(self, tokens):
        return self.head(self.embed(tokens).mean(1))


def _data(seed):
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, 11, (37, 5), generator=generator)
    return tokens, tokens[:, 0] % 3


def _fit(monkeypatch, count_on_training_steps: bool):
    calls = []
    original = train._loss_and_count

    def spy(model, batch, task, device, *, count_correct=True):
        calls.append(count_correct)
        return original(model, batch, task, device,
                        count_correct=True if count_on_training_steps else count_correct)

    monkeypatch.setattr(train, "_loss_and_count", spy)
    torch.manual_seed(0)
    model = _Classifier()
    history = train.fit(model, _data(0), val_data=_data(1), steps=12, eval_every=4, batch_size=8, lr=1e-2, seed=3,
                        progress=False)
    monkeypatch.setattr(train, "_loss_and_count", original)
    return model, history, calls


def test_fit_counts_no_argmax_on_a_training_step_and_returns_the_same(monkeypatch):
    model, history, calls = _fit(monkeypatch, count_on_training_steps=False)
    reference_model, reference, _ = _fit(monkeypatch, count_on_training_steps=True)  # the earlier code path
    assert calls.count(False) == 12  # every training step skips the count
    assert calls.count(True) == 3 * 5  # every evaluation batch still counts (3 evaluations of 37 / 8 -> 5 batches)
    assert history.step_loss == reference.step_loss
    assert history.val_metric == reference.val_metric and history.val_loss == reference.val_loss
    assert history.best_step == reference.best_step
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, reference_model.state_dict()[name]), name


def test_a_count_when_asked_is_the_number_correct():
    logits, labels = torch.tensor([[0.1, 2.0], [3.0, 0.0], [0.0, 1.0]]), torch.tensor([1, 1, 1])
    assert train._correct(logits, labels, True) == 2
    assert train._correct(logits, labels, False) == 0


# ------------------------------------------------------------------------------------------------ MQAR
def _mqar_before(n_examples, seq_len, n_pairs, *, vocab_size, seed=0, power_a=0.01, random_fill=True):
    """The generator as it was before the change (every row argsorted), written out as the reference."""
    n_keys = vocab_size // 2
    context = 2 * n_pairs
    n_slots = (seq_len - context) // 2
    probabilities = mqar_gap_probabilities(n_slots, power_a)
    generator = torch.Generator().manual_seed(seed)
    keys = torch.rand(n_examples, n_keys, generator=generator).argsort(dim=1)[:, :n_pairs]
    values = n_keys + torch.rand(n_examples, vocab_size - n_keys, generator=generator).argsort(dim=1)[:, :n_pairs]
    uniform = torch.rand(n_examples, n_slots, generator=generator, dtype=torch.float64).clamp_min(1e-300)
    slots = (probabilities.log() - (-uniform.log()).log()).topk(n_pairs, dim=1).indices
    if random_fill:
        inputs = torch.randint(0, vocab_size, (n_examples, seq_len), generator=generator)
    else:
        inputs = torch.zeros(n_examples, seq_len, dtype=torch.long)
    inputs[:, 0:context:2], inputs[:, 1:context:2] = keys, values
    query_positions = context + 2 * slots
    inputs.scatter_(1, query_positions, keys)
    labels = torch.full((n_examples, seq_len), IGNORE_INDEX, dtype=torch.long)
    labels.scatter_(1, query_positions, values)
    return inputs, labels


@pytest.mark.parametrize("n_examples, seq_len, n_pairs, vocab_size, seed", [
    (4000, 64, 16, 256, 1_016),     # the recall study's largest count
    (4000, 64, 4, 256, 3_004),
    (1500, 256, 64, 8192, 11_064),  # the second recall design's largest count: float32 ties occur here
    (300, 32, 8, 16, 0),            # every key drawn (n_pairs == vocab_size // 2)
    (200, 20, 3, 9, 5),             # an odd vocabulary
])
def test_mqar_draws_are_unchanged(n_examples, seq_len, n_pairs, vocab_size, seed):
    data = mqar(n_examples, seq_len, n_pairs, vocab_size=vocab_size, seed=seed)
    inputs, labels = _mqar_before(n_examples, seq_len, n_pairs, vocab_size=vocab_size, seed=seed)
    assert torch.equal(data.inputs, inputs) and torch.equal(data.labels, labels)


def test_the_first_of_a_random_order_handles_ties_as_argsort_does():
    uniform = torch.tensor([[0.5, 0.25, 0.25, 0.75, 0.25], [0.1, 0.2, 0.3, 0.4, 0.5], [0.3, 0.3, 0.3, 0.3, 0.3]])
    for count in (1, 2, 3, 5):
        assert torch.equal(tasks._first_of_random_order(uniform, count), uniform.argsort(dim=1)[:, :count])
    generator = torch.Generator().manual_seed(0)
    coarse = torch.randint(0, 6, (500, 40), generator=generator).float()  # ties everywhere
    assert torch.equal(tasks._first_of_random_order(coarse, 7), coarse.argsort(dim=1)[:, :7])
