"""Tests for the training loop: it learns, resumes exactly, follows its schedule and restores the best weights."""
import math

import pytest
import torch

from gma_teach.models import DecoderLM, EncoderClassifier
from gma_teach.plots import plot_training
from gma_teach.train import History, epoch_order, evaluate, fit, lr_at


def _classification_data(n, seed):
    """Label = whether token 3 occurs in the sequence: learnable by one attention layer."""
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randint(4, 12, (n, 10), generator=generator)
    labels = torch.randint(0, 2, (n,), generator=generator)
    positions = torch.randint(0, 10, (n,), generator=generator)
    tokens[labels == 1, positions[labels == 1]] = 3
    return tokens, labels


def _classifier(mixer="gma", seed=0, max_seq_len=10):
    torch.manual_seed(seed)
    return EncoderClassifier(12, 2, 16, 1, 2, mixer=mixer, max_seq_len=max_seq_len, pooling="mean",
                             mixer_options={"n_components": 8} if mixer == "gma" else None)


def test_loss_decreases_on_a_learnable_task():
    model = _classifier()
    history = fit(model, _classification_data(256, 0), val_data=_classification_data(128, 1), epochs=6, lr=1e-2,
                  batch_size=32, warmup=4, progress=False)
    first, last = sum(history.step_loss[:8]) / 8, sum(history.step_loss[-8:]) / 8
    assert last < 0.6 * first, (first, last)
    assert history.best_metric >= 0.8 and len(history.val_metric) == 6
    assert history.tokens_per_second > 0 and history.steps == [8 * (e + 1) for e in range(6)]


def test_language_model_training_lowers_perplexity():
    torch.manual_seed(0)
    blocks = torch.arange(12).repeat(40).unfold(0, 9, 8)  # a periodic stream, cut into (S, 9) blocks
    model = DecoderLM(12, 16, 1, 2, mixer="gma", max_seq_len=8, mixer_options={"n_components": 8})
    before = evaluate(model, blocks, task="lm")["perplexity"]
    fit(model, blocks, steps=60, lr=1e-2, batch_size=8, task="lm", progress=False)
    after = evaluate(model, blocks, task="lm")
    assert after["perplexity"] < before / 3 and math.isclose(after["perplexity"], math.exp(after["loss"]))


def test_monitor_is_called_at_every_evaluation_and_auxiliary_loss_is_added():
    blocks = torch.arange(12).repeat(40).unfold(0, 9, 8)
    seen = []

    def monitor(model):
        seen.append(model.training)
        return {"calls": len(seen)}

    torch.manual_seed(0)
    model = DecoderLM(12, 16, 1, 2, mixer="gma", max_seq_len=8, mixer_options={"n_components": 8})
    history = fit(model, blocks, val_data=blocks, steps=6, eval_every=3, batch_size=8, task="lm", progress=False,
                  monitor=monitor)
    assert history.monitor == [{"calls": 1}, {"calls": 2}] and history.train_auxiliary_loss == [0.0, 0.0]

    class Penalized(DecoderLM):  # a known auxiliary loss: the squared norm of the embedding, times 10
        def auxiliary_loss(self):
            return 10 * self.embedding.weight.pow(2).sum()

    norms, penalties = {}, {}
    for cls in (DecoderLM, Penalized):
        torch.manual_seed(0)
        model = cls(12, 16, 1, 2, mixer="sdpa", max_seq_len=8)
        history = fit(model, blocks, steps=20, lr=1e-2, batch_size=8, task="lm", progress=False, eval_every=10)
        norms[cls] = float(model.embedding.weight.detach().pow(2).sum())
        penalties[cls] = history.train_auxiliary_loss
    assert len(penalties[Penalized]) == 2 and penalties[Penalized][1] < penalties[Penalized][0]
    assert norms[Penalized] < norms[DecoderLM] / 2  # the added loss was trained on
    with pytest.raises(TypeError, match="monitor"):
        fit(model, blocks, steps=1, batch_size=8, task="lm", progress=False, monitor="health")


class _Interrupt(Exception):
    pass


def test_resume_reproduces_an_uninterrupted_run_exactly(tmp_path):
    data, val = _classification_data(96, 2), _classification_data(32, 3)
    options = dict(val_data=val, steps=18, eval_every=6, lr=2e-3, warmup=3, batch_size=16, progress=False)
    reference = _classifier(seed=1)
    reference_history = fit(reference, data, **options)

    interrupted = _classifier(seed=1)
    path = tmp_path / "run.ckpt"
    forward = interrupted.forward
    calls = {"n": 0}

    def failing_forward(tokens):
        calls["n"] += 1
        if calls["n"] == 10:  # during step 8: after the checkpoint of step 6 (6 training + 2 evaluation batches)
            raise _Interrupt
        return forward(tokens)

    interrupted.forward = failing_forward
    with pytest.raises(_Interrupt):
        fit(interrupted, data, checkpoint_path=path, **options)
    resumed = _classifier(seed=99)  # different weights: everything must come from the checkpoint
    history = fit(resumed, data, checkpoint_path=path, resume=True, **options)
    for (name, a), b in zip(reference.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(a, b), name
    assert history.step_loss == reference_history.step_loss
    assert history.val_metric == reference_history.val_metric


def test_schedule_warms_up_linearly_then_decays_by_cosine():
    total, warmup, base = 50, 10, 2.0
    rates = [lr_at(s, total_steps=total, warmup=warmup, base_lr=base, min_lr_ratio=0.1) for s in range(total)]
    assert rates[:warmup] == pytest.approx([base * (s + 1) / warmup for s in range(warmup)])
    assert max(rates) == pytest.approx(base) and rates[-1] == pytest.approx(0.1 * base)
    decay = rates[warmup:]
    assert all(a >= b for a, b in zip(decay, decay[1:]))
    middle = warmup + (total - 1 - warmup) / 2
    assert lr_at(middle, total_steps=total, warmup=warmup, base_lr=base) == pytest.approx(base * 0.55)

    model = _classifier()
    history = fit(model, _classification_data(64, 0), steps=total, warmup=warmup, lr=base * 1e-3, batch_size=8,
                  progress=False)
    assert history.learning_rate == pytest.approx([r * 1e-3 for r in rates])


def _fit_with_scores(monkeypatch, **options):
    """Train three epochs while the validation scores 0.5, 0.9, 0.6; returns the model, its history and the
    weights seen at each evaluation."""
    import gma_teach.train as train

    scores = iter([0.5, 0.9, 0.6])
    snapshots = []

    def fake_evaluate(model, data, **kw):
        snapshots.append({k: v.clone() for k, v in model.state_dict().items()})
        return {"loss": 1.0, "accuracy": next(scores)}

    monkeypatch.setattr(train, "evaluate", fake_evaluate)
    model = _classifier()
    history = fit(model, _classification_data(48, 0), val_data=_classification_data(8, 1), epochs=3, lr=1e-2,
                  batch_size=16, progress=False, **options)
    return model, history, snapshots


def test_best_validation_weights_are_restored(monkeypatch):
    model, history, snapshots = _fit_with_scores(monkeypatch)
    assert history.best_metric == 0.9 and history.best_step == 6
    for name, value in model.state_dict().items():
        assert torch.equal(value, snapshots[1][name]), name
    assert not torch.equal(snapshots[1]["head.weight"], snapshots[2]["head.weight"])


def test_keep_last_keeps_the_final_weights_whatever_the_validation_says(monkeypatch):
    model, history, snapshots = _fit_with_scores(monkeypatch, keep="last")
    assert history.best_metric == 0.9 and history.val_metric == [0.5, 0.9, 0.6]  # still reported
    for name, value in model.state_dict().items():
        assert torch.equal(value, snapshots[2][name]), name
    with pytest.raises(ValueError, match="keep must be 'best' or 'last', got 'first'"):
        fit(_classifier(), _classification_data(16, 0), steps=1, progress=False, keep="first")


def test_progress_bar_is_quiet_under_ci(monkeypatch, capsys):
    monkeypatch.setenv("CI", "1")
    fit(_classifier(), _classification_data(32, 0), steps=2, batch_size=16, progress=True)
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""


def test_plot_training_draws_every_run():
    histories = []
    for mixer in ("gma", "softmax"):
        history = fit(_classifier(mixer), _classification_data(32, 0), val_data=_classification_data(16, 1),
                      epochs=2, batch_size=16, progress=False, label=mixer)
        histories.append(history)
    fig = plot_training(histories, smooth=2)
    assert [line.get_label() for line in fig.axes[1].lines] == ["gma", "softmax"]
    assert isinstance(histories[0], History)


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(), ValueError, "exactly one of epochs and steps"),
    (dict(steps=2, task="regress"), ValueError, "task"),
    (dict(steps=2, resume=True), ValueError, "checkpoint_path"),
    (dict(steps=2, warmup=-1), ValueError, "warmup"),
    (dict(steps=2, lr=0.0), ValueError, "lr"),
])
def test_bad_arguments_raise_clear_errors(kwargs, error, message):
    with pytest.raises(error, match=message):
        fit(_classifier(), _classification_data(8, 0), progress=False, **kwargs)


def test_bad_data_raises_a_clear_error():
    with pytest.raises(TypeError, match="tokens"):
        fit(_classifier(), torch.zeros(4, 10, dtype=torch.long), steps=1, progress=False)


def _padded_data(n, seed, pad_id=0):
    """Right-padded sequences of lengths 3..20 in a (n, 24) tensor; label = whether token 3 occurs."""
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(3, 21, (n,), generator=generator)
    tokens = torch.randint(4, 12, (n, 24), generator=generator)
    labels = torch.randint(0, 2, (n,), generator=generator)
    for i in range(n):
        if labels[i]:
            tokens[i, int(torch.randint(0, int(lengths[i]), (1,), generator=generator))] = 3
        tokens[i, lengths[i]:] = pad_id
    return tokens, labels, lengths


def test_epoch_order_buckets_by_length_and_is_a_permutation():
    lengths = torch.randint(1, 1000, (203,), generator=torch.Generator().manual_seed(5))
    plain = epoch_order(203, 8, 11)
    assert torch.equal(plain, torch.randperm(203, generator=torch.Generator().manual_seed(11)))
    order = epoch_order(203, 8, 11, lengths=lengths, length_buckets=4)
    assert sorted(order.tolist()) == list(range(203)) and not torch.equal(order, plain)
    assert torch.equal(order, epoch_order(203, 8, 11, lengths=lengths, length_buckets=4))  # seeded
    # every full batch comes from one window of 4 batches of the plain permutation, sorted within it
    windows = {int(i): w for w, chunk in enumerate(plain.split(32)) for i in chunk}
    batches = order.split(8)
    for batch in batches[:-1]:
        assert len({windows[int(i)] for i in batch}) == 1
        assert torch.all(lengths[batch][1:] >= lengths[batch][:-1])
    assert set(batches[-1].tolist()) <= set(plain[192:].tolist())  # the partial batch stays last
    # bucketing shortens the padded batches: the mean of per-batch maxima drops
    padded = sum(float(lengths[b].max()) for b in plain.split(8)) / 26
    bucketed = sum(float(lengths[b].max()) for b in batches) / 26
    assert bucketed < 0.85 * padded


def test_trimmed_length_bucketed_batches_train_the_same_model_on_every_padding():
    """The encoder ignores appended padding, so with pad_id evaluation gives the plain result, and training on
    bucketed, trimmed batches does not depend on how far the split is padded."""
    tokens, labels, lengths = _padded_data(96, 0)
    model = _classifier("gma", max_seq_len=64)
    model.eval()
    wide = torch.cat([tokens, torch.zeros(96, 40, dtype=tokens.dtype)], 1)
    plain = evaluate(model, (tokens, labels), batch_size=16)
    for data in ((tokens, labels), (wide, labels)):
        trimmed = evaluate(model, data, batch_size=16, pad_id=0)
        assert trimmed["accuracy"] == plain["accuracy"] and math.isclose(trimmed["loss"], plain["loss"],
                                                                          rel_tol=1e-5)
    runs = []
    for data in ((tokens, labels), (wide, labels)):
        model = _classifier("gma", seed=3, max_seq_len=64)
        history = fit(model, data, epochs=2, lr=1e-2, batch_size=16, progress=False, pad_id=0, length_buckets=3,
                      seed=2)
        runs.append((history.step_loss, model.state_dict()))
    assert all(math.isclose(a, b, rel_tol=1e-4) for a, b in zip(runs[0][0], runs[1][0]))
    assert all(torch.allclose(runs[0][1][k], runs[1][1][k], atol=1e-5) for k in runs[0][1])


def _token_dataset():
    return torch.utils.data.TensorDataset(torch.zeros(4, 24, dtype=torch.long))


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(length_buckets=2), ValueError, "needs pad_id"),
    (dict(pad_id=0, length_buckets=-1), ValueError, "length_buckets"),
    (dict(pad_id=0, task="lm"), ValueError, "task='classify' only"),
    (dict(pad_id=-1), ValueError, "pad_id"),
    (dict(pad_id=0, val_data=_token_dataset()), TypeError, "val_data as a"),
])
def test_bucketing_arguments_raise_clear_errors(kwargs, error, message):
    tokens, labels, _ = _padded_data(16, 0)
    data = tokens if kwargs.get("task") == "lm" else (tokens, labels)
    with pytest.raises(error, match=message):
        fit(_classifier(max_seq_len=24), data, epochs=1, progress=False, **kwargs)
