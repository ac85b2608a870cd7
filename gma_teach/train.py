"""The one training loop of the book (chapters 9 and 10): ``fit`` and ``evaluate``.

* Data and the step. The task names what one step computes (:data:`TASKS`). ``task="classify"``: a pair
  ``(tokens (S, N) int64, labels (S,))`` or a ``Dataset`` of such pairs; the model maps tokens to logits
  ``(B, n_classes)``. ``task="lm"``: blocks ``(S, N + 1)`` (inputs ``[:-1]``, targets ``[1:]``, as
  :func:`gma_teach.data.wikitext.pack` makes them) or a ``Dataset`` of 1-D blocks; the model maps ``(B, N)`` to
  logits ``(B, N, V)``. ``task="queries"``: a pair ``(tokens (S, N), labels (S, N))`` whose labels are
  ``-100`` except at the positions scored (the queries of associative recall); the model's
  ``logits_at(tokens, where)`` gives the logits of those positions only (:meth:`gma_teach.models.DecoderLM.logits_at`).
* Optimization. AdamW (weight decay on the weights of ``nn.Linear`` layers only), linear warmup then cosine decay
  to ``min_lr_ratio * lr`` (:func:`~gma_teach.train.lr_at`), gradient clipping, mixed precision on CUDA (bf16
  where the GPU has it, else fp16 with a gradient scaler: a Colab T4 has no bf16).
* Batches. The order of epoch ``e`` is a permutation drawn from ``seed + e`` (:func:`~gma_teach.train.epoch_order`). For
  sequences of very different lengths (ListOps at LRA's 500-2,000 tokens), ``pad_id`` cuts each batch after its
  longest sequence and ``length_buckets`` groups sequences of similar length, so a batch pads little.
* Reproducibility. A checkpoint holds the
  model, optimizer, scheduler, scaler, RNG states and history, so ``resume=True`` continues an interrupted run
  and ends with exactly the weights of an uninterrupted one (same device).
* Selection. With ``val_data``, the weights of the best evaluation (highest accuracy / lowest loss) are restored
  at the end, unless ``keep="last"`` (for a validation split that is the test split).
* Progress bars come from ``tqdm.auto`` (a widget in notebooks) and are off when ``progress=False`` or the
  environment variable ``CI`` is set.
"""
from __future__ import annotations

import copy
import math
import os
import time
from dataclasses import asdict, dataclass, field

import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from . import _checks
from .environment import seed_everything

TASKS = ("classify", "lm", "queries")
"""What one training step can compute, by name (``classify``, ``lm``, ``queries``): a classifier's loss, a language
model's next-token loss, or a language model's loss at marked positions only."""

IGNORED_LABEL = -100
"""The label of a position ``task="queries"`` does not score (``torch.nn.functional.cross_entropy``'s default)."""


@dataclass
class History:
    """What :func:`fit` measured.

    Attributes:
        task, metric_name: ``"classify"``/``"accuracy"``, ``"queries"``/``"accuracy"`` or ``"lm"``/``"perplexity"``.
        steps, epochs: optimizer steps and (fractional) epochs at each evaluation.
        train_loss: mean training loss since the previous evaluation.
        val_loss, val_metric: validation loss and metric at each evaluation (empty without ``val_data``).
        step_loss, learning_rate: every optimizer step's loss and learning rate.
        best_metric, best_step: the selected evaluation (``None`` without ``val_data``).
        tokens_per_second: training tokens per second of training time (evaluation excluded).
        peak_memory_bytes: CUDA peak allocated memory during training; ``None`` on a CPU.
        train_seconds: training time in seconds (this call plus resumed parts).
        train_auxiliary_loss: mean of ``model.auxiliary_loss()`` since the previous evaluation (empty when the model
            has none); it is added to the training loss, never to ``train_loss`` or ``val_loss``.
        monitor: what ``monitor(model)`` returned at each evaluation (empty without a monitor).
        label: a name for plots.
    """

    task: str
    metric_name: str
    steps: list = field(default_factory=list)
    epochs: list = field(default_factory=list)
    train_loss: list = field(default_factory=list)
    val_loss: list = field(default_factory=list)
    val_metric: list = field(default_factory=list)
    step_loss: list = field(default_factory=list)
    learning_rate: list = field(default_factory=list)
    best_metric: float | None = None
    best_step: int | None = None
    tokens_per_second: float = 0.0
    peak_memory_bytes: int | None = None
    train_seconds: float = 0.0
    train_tokens: int = 0
    train_auxiliary_loss: list = field(default_factory=list)
    monitor: list = field(default_factory=list)
    label: str = ""

    def to_dict(self) -> dict:
        """A JSON-ready dict."""
        return asdict(self)


# ------------------------------------------------------------------------------------------------ schedule
def lr_at(step, *, total_steps, warmup, base_lr, min_lr_ratio=0.1):
    """Learning rate of optimizer step ``step`` (0-based): linear warmup over ``warmup`` steps to ``base_lr``, then
    cosine decay to ``min_lr_ratio * base_lr`` at ``total_steps - 1``."""
    if step < warmup:
        return base_lr * (step + 1) / warmup
    span = max(1, total_steps - 1 - warmup)
    progress = min(1.0, (step - warmup) / span)
    return base_lr * (min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


# ------------------------------------------------------------------------------------------------ data
class _PairDataset(torch.utils.data.Dataset):
    def __init__(self, *tensors):
        self.tensors = tensors

    def __len__(self):
        return len(self.tensors[0])

    def __getitem__(self, index):
        items = tuple(t[index] for t in self.tensors)
        return items if len(items) > 1 else items[0]


def _as_dataset(data, task, name):
    if isinstance(data, torch.utils.data.Dataset):
        return data
    if task == "queries":
        if not (isinstance(data, (tuple, list)) and len(data) == 2 and all(isinstance(t, torch.Tensor) for t in data)
                and data[0].dim() == 2 and data[0].shape == data[1].shape):
            got = (tuple(tuple(t.shape) for t in data) if isinstance(data, (tuple, list))
                   and all(isinstance(t, torch.Tensor) for t in data) else type(data).__name__)
            raise ValueError(f"{name} for task='queries' must be (tokens (S, N), labels (S, N)) tensors or a "
                             f"Dataset, got {got}")
        return _PairDataset(*data)
    if task == "classify":
        if not (isinstance(data, (tuple, list)) and len(data) == 2 and all(isinstance(t, torch.Tensor) for t in data)):
            raise TypeError(f"{name} for task='classify' must be (tokens (S, N), labels (S,)) tensors or a Dataset, "
                            f"got {type(data).__name__}")
        tokens, labels = data
        if tokens.dim() != 2 or labels.dim() != 1 or len(tokens) != len(labels):
            raise ValueError(f"{name}: tokens must be (S, N) and labels (S,), got {tuple(tokens.shape)} and "
                             f"{tuple(labels.shape)}")
        return _PairDataset(tokens, labels)
    if not isinstance(data, torch.Tensor) or data.dim() != 2 or data.shape[1] < 2:
        shape = tuple(data.shape) if isinstance(data, torch.Tensor) else type(data).__name__
        raise ValueError(f"{name} for task='lm' must be blocks (S, N + 1) with N >= 1 or a Dataset, got {shape}")
    return _PairDataset(data)


def _batch(dataset, indices, pad_id=None):
    """The items ``indices`` of ``dataset`` stacked; with ``pad_id`` (classify), the tokens are cut after the
    batch's last position that is not ``pad_id``, so a batch of short sequences is short."""
    items = [dataset[int(i)] for i in indices]
    batch = torch.utils.data.default_collate(items)
    if pad_id is None:
        return batch
    tokens, labels = batch
    return tokens[:, :max(int(_sequence_lengths(tokens, pad_id).max()), 1)], labels


def _sequence_lengths(tokens, pad_id):
    """Per row of ``tokens (S, N)``: the position just after its last token that is not ``pad_id`` (its length
    when the padding is on the right)."""
    positions = torch.arange(1, tokens.shape[1] + 1, device=tokens.device)
    return ((tokens != pad_id) * positions).amax(1)


def _dataset_lengths(dataset, pad_id, name):
    """:func:`_sequence_lengths` of a classify dataset given as a ``(tokens, labels)`` pair."""
    if not (isinstance(dataset, _PairDataset) and len(dataset.tensors) == 2):
        raise TypeError(f"pad_id needs {name} as a (tokens (S, N), labels (S,)) pair of tensors, got "
                        f"{type(dataset).__name__}")
    return _sequence_lengths(dataset.tensors[0], pad_id)


def epoch_order(n_items, batch_size, seed, *, lengths=None, length_buckets=0):
    """The item order of one epoch (batch ``i`` is ``order[i * batch_size:(i + 1) * batch_size]``).

    A permutation drawn from ``seed``. With ``length_buckets = b > 0`` and ``lengths (n_items,)``, each run of ``b``
    batches of that permutation is sorted by length, so that a batch holds sequences of similar length (and,
    trimmed, pads little); then the full batches are shuffled (from the same generator) and the last, partial
    batch stays last. ``length_buckets=0`` gives the permutation itself.
    """
    _checks.integer("length_buckets", length_buckets, minimum=0)
    generator = torch.Generator().manual_seed(seed)
    order = torch.randperm(n_items, generator=generator)
    if length_buckets == 0:
        return order
    if lengths is None or len(lengths) != n_items:
        raise ValueError(f"length_buckets={length_buckets} needs lengths of the {n_items} items, got "
                         f"{None if lengths is None else len(lengths)}")
    window = batch_size * length_buckets
    order = torch.cat([chunk[lengths[chunk].argsort(stable=True)] for chunk in order.split(window)])
    n_full = n_items // batch_size
    full = order[:n_full * batch_size].view(n_full, batch_size)
    full = full[torch.randperm(n_full, generator=generator)]
    return torch.cat([full.flatten(), order[n_full * batch_size:]])


def _correct(logits, labels, count_correct: bool) -> int:
    """How many arg-max predictions are right, or 0 without counting (a training step, which discards it: no
    arg-max and no wait for the device)."""
    return int((logits.argmax(-1) == labels).sum()) if count_correct else 0


def _loss_and_count(model, batch, task, device, *, count_correct=True):
    """Mean loss of a batch, the number of predictions in it and (classify, queries; with ``count_correct``) the
    number correct."""
    if task == "classify":
        tokens, labels = (t.to(device) for t in batch)
        logits = model(tokens)
        loss = F.cross_entropy(logits.float(), labels)
        return loss, labels.numel(), _correct(logits, labels, count_correct), tokens.numel()
    if task == "queries":
        tokens, labels = (t.to(device) for t in batch)
        where = labels != IGNORED_LABEL
        logits, targets = model.logits_at(tokens, where), labels[where]
        loss = F.cross_entropy(logits.float(), targets)
        return loss, targets.numel(), _correct(logits, targets, count_correct), tokens.numel()
    blocks = batch.to(device)
    logits = model(blocks[:, :-1])
    loss = F.cross_entropy(logits.float().flatten(0, 1), blocks[:, 1:].flatten())
    return loss, blocks[:, 1:].numel(), 0, blocks[:, :-1].numel()


def _autocast_dtype(device, amp):
    if not amp or device.type != "cuda":
        return None
    return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16


def _progress_enabled(progress):
    return bool(progress) and not os.environ.get("CI")


# ------------------------------------------------------------------------------------------------ evaluate
@torch.no_grad()
def evaluate(model, data, *, task="classify", batch_size=64, device=None, amp=None, progress=False, pad_id=None):
    """Loss and metric of ``model`` on ``data`` (same formats as :func:`fit`).

    ``pad_id`` (classify, a model whose logits do not change with appended padding): read the sequences in order
    of length, each batch cut after its longest one. The result is the same up to rounding, and faster when the
    lengths vary.

    Returns:
        ``{"loss": mean loss per prediction, "accuracy": ...}`` (classify, queries) or ``{"loss", "perplexity"}``
        (lm).
    """
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, got {task!r}")
    _checks.positive_int("batch_size", batch_size)
    device = torch.device(device) if device is not None else next(model.parameters()).device
    dataset = _as_dataset(data, task, "data")
    dtype = _autocast_dtype(device, torch.cuda.is_available() if amp is None else amp)
    was_training = model.training
    model.eval()
    total_loss, total_count, total_correct = 0.0, 0, 0

    if pad_id is not None and task != "classify":
        raise ValueError(f"pad_id applies to task='classify' only, got task={task!r}")
    order = (_dataset_lengths(dataset, pad_id, "data").argsort(stable=True) if pad_id is not None
             else torch.arange(len(dataset)))
    starts = range(0, len(dataset), batch_size)
    try:
        for start in tqdm(starts, desc="evaluate", leave=False, disable=not _progress_enabled(progress)):
            batch = _batch(dataset, order[start:start + batch_size], pad_id)
            with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
                loss, count, correct, _ = _loss_and_count(model, batch, task, device)
            total_loss += float(loss) * count
            total_count += count
            total_correct += correct
    finally:
        model.train(was_training)
    if total_count == 0:
        raise ValueError("data is empty")
    loss = total_loss / total_count
    if task in ("classify", "queries"):
        return {"loss": loss, "accuracy": total_correct / total_count}
    return {"loss": loss, "perplexity": math.exp(min(loss, 50.0))}


# ------------------------------------------------------------------------------------------------ fit
def _optimizer(model, lr, weight_decay):
    decay = {id(m.weight) for m in model.modules() if isinstance(m, nn.Linear)}
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if id(p) in decay], "weight_decay": weight_decay},
              {"params": [p for p in params if id(p) not in decay], "weight_decay": 0.0}]
    return torch.optim.AdamW([g for g in groups if g["params"]], lr=lr)


def _rng_state(device):
    state = {"cpu": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def _set_rng_state(state, device):
    torch.set_rng_state(state["cpu"])
    if device.type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"], device)


def save_atomically(path, payload) -> None:
    """``torch.save(payload, path)`` through a temporary file in the same folder and an atomic rename, so a reader
    never sees half a file and an interrupted save leaves the previous one intact."""
    tmp = f"{path}.tmp{os.getpid()}"
    torch.save(payload, tmp)
    os.replace(tmp, path)


def fit(model, train_data, *, val_data=None, epochs=None, steps=None, lr=3e-4, weight_decay=0.01, warmup=0,
        batch_size=32, clip_norm=1.0, amp=None, seed=0, checkpoint_path=None, resume=False, task="classify",
        progress=True, device=None, eval_every=None, min_lr_ratio=0.1, label="", monitor=None, pad_id=None,
        length_buckets=0, keep="best"):
    """Train ``model`` in place and return its :class:`History`.

    Args:
        train_data, val_data: see the module docstring.
        epochs or steps: how long (exactly one of them). With ``epochs``, evaluation after every epoch; with
            ``steps``, every ``eval_every`` steps (default: an epoch, at most ``steps``).
        lr, weight_decay, warmup (steps), min_lr_ratio: AdamW and the schedule :func:`~gma_teach.train.lr_at`.
        batch_size, clip_norm (``None``: no clipping).
        amp: mixed precision; default ``True`` on CUDA (bf16, or fp16 + GradScaler), ignored on a CPU.
        seed: seeds dropout and the batch order.
        checkpoint_path: save a checkpoint at every evaluation (and at the end).
        resume: continue from ``checkpoint_path`` if it exists.
        task: one of :data:`TASKS` (``"classify"``, ``"lm"`` or ``"queries"``).
        progress: tqdm progress bar (off when ``CI`` is set).
        device: default: where the model's parameters are.
        label: a name stored in the history (for plots).
        monitor: ``monitor(model) -> JSON-ready value`` called at every evaluation (after the validation pass),
            stored in ``history.monitor``; e.g. the routing health of :func:`gma_teach.diagnostics.routing_health`.
        pad_id: (classify, a model whose logits do not change with appended padding, such as
            :class:`~gma_teach.models.EncoderClassifier`) cut every batch after its longest sequence, in training
            and evaluation. Without it every batch is as long as the split's tensors.
        length_buckets: with ``pad_id``, batches of similar lengths (see :func:`~gma_teach.train.epoch_order`);
            0 (default): the plain permutation of each epoch.
        keep: ``"best"`` (default) restores, at the end, the weights of the best evaluation on ``val_data``;
            ``"last"`` keeps the final weights. Choose ``"last"`` when ``val_data`` is the test split (LRA's
            convention), so that no checkpoint is chosen on the test set.

    If the model has a method ``auxiliary_loss()`` (a GMA model's usage-balancing loss, computed from its last
    forward pass), its value is added to every training step's loss.
    """
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, got {task!r}")
    if (epochs is None) == (steps is None):
        raise ValueError(f"give exactly one of epochs and steps, got epochs={epochs!r}, steps={steps!r}")
    _checks.positive_int("batch_size", batch_size)
    _checks.positive_number("lr", lr)
    if weight_decay < 0:
        raise ValueError(f"weight_decay must be >= 0, got {weight_decay}")
    _checks.integer("warmup", warmup, minimum=0)
    if clip_norm is not None:
        _checks.positive_number("clip_norm", clip_norm)
    if resume and checkpoint_path is None:
        raise ValueError("resume=True needs checkpoint_path")
    _checks.integer("length_buckets", length_buckets, minimum=0)
    if pad_id is not None:
        _checks.integer("pad_id", pad_id, minimum=0)
        if task != "classify":
            raise ValueError(f"pad_id applies to task='classify' only, got task={task!r}")
    if length_buckets and pad_id is None:
        raise ValueError(f"length_buckets={length_buckets} needs pad_id (the token that pads the sequences)")
    if keep not in ("best", "last"):
        raise ValueError(f"keep must be 'best' or 'last', got {keep!r}")
    if monitor is not None and not callable(monitor):
        raise TypeError(f"monitor must be callable (model -> value), got {type(monitor).__name__}")
    auxiliary = getattr(model, "auxiliary_loss", None)
    device = torch.device(device) if device is not None else next(model.parameters()).device
    model.to(device)
    train_set = _as_dataset(train_data, task, "train_data")
    val_set = _as_dataset(val_data, task, "val_data") if val_data is not None else None
    if len(train_set) == 0:
        raise ValueError("train_data is empty")
    steps_per_epoch = math.ceil(len(train_set) / batch_size)
    lengths = _dataset_lengths(train_set, pad_id, "train_data") if pad_id is not None else None
    if pad_id is not None and val_set is not None:
        _dataset_lengths(val_set, pad_id, "val_data")  # a wrong format fails now, not at the first evaluation
    total_steps = epochs * steps_per_epoch if epochs is not None else _checks.positive_int("steps", steps)
    if epochs is not None:
        _checks.positive_int("epochs", epochs)
        eval_every = steps_per_epoch
    else:
        eval_every = (min(total_steps, steps_per_epoch) if eval_every is None
                      else _checks.positive_int("eval_every", eval_every))

    optimizer = _optimizer(model, lr, weight_decay)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: lr_at(s, total_steps=total_steps, warmup=warmup, base_lr=1.0, min_lr_ratio=min_lr_ratio))
    dtype = _autocast_dtype(device, torch.cuda.is_available() if amp is None else amp)
    scaler = torch.amp.GradScaler("cuda", enabled=dtype == torch.float16)
    metric_name = "perplexity" if task == "lm" else "accuracy"
    history = History(task=task, metric_name=metric_name, label=label)
    best_state, step = None, 0

    if resume and os.path.exists(checkpoint_path):
        checkpoint = torch.load(checkpoint_path, map_location=device, weights_only=False)
        if checkpoint["total_steps"] != total_steps:
            raise ValueError(f"checkpoint {checkpoint_path} was made for {checkpoint['total_steps']} steps, this run "
                             f"has {total_steps}")
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        schedule.load_state_dict(checkpoint["schedule"])
        scaler.load_state_dict(checkpoint["scaler"])
        history = History(**checkpoint["history"])
        best_state, step = checkpoint["best_state"], checkpoint["step"]
        _set_rng_state(checkpoint["rng"], device)
    else:
        seed_everything(seed)


    bar = tqdm(total=total_steps, initial=step, desc=label or f"fit ({task})", disable=not _progress_enabled(progress))
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    model.train()
    window_loss, window_count, window_tokens, started = 0.0, 0, 0, time.perf_counter()
    window_auxiliary = 0.0
    order_epoch, order = None, None
    while step < total_steps:
        epoch, position = divmod(step, steps_per_epoch)
        if epoch != order_epoch:
            order_epoch = epoch
            order = epoch_order(len(train_set), batch_size, seed + epoch, lengths=lengths,
                                length_buckets=length_buckets)
        batch = _batch(train_set, order[position * batch_size:(position + 1) * batch_size], pad_id)
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            loss, _, _, n_tokens = _loss_and_count(model, batch, task, device, count_correct=False)
            extra = auxiliary() if auxiliary is not None else None
        loss_value = float(loss.detach())
        if not math.isfinite(loss_value):
            bar.close()
            raise FloatingPointError(f"training loss became {loss_value} at step {step}; lower lr or check the data")
        if extra is not None:
            window_auxiliary += float(extra.detach()) if isinstance(extra, torch.Tensor) else float(extra)
            loss = loss + extra
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        if clip_norm is not None:
            scaler.unscale_(optimizer)
            nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
        scaler.step(optimizer)
        scaler.update()
        history.learning_rate.append(schedule.get_last_lr()[0])
        schedule.step()
        step += 1
        history.step_loss.append(loss_value)
        window_loss, window_count, window_tokens = window_loss + loss_value, window_count + 1, window_tokens + n_tokens
        bar.update(1)
        bar.set_postfix(loss=f"{loss_value:.4f}")
        if step % eval_every == 0 or step == total_steps:
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            history.train_seconds += time.perf_counter() - started
            history.train_tokens += window_tokens
            history.steps.append(step)
            history.epochs.append(step / steps_per_epoch)
            history.train_loss.append(window_loss / window_count)
            if auxiliary is not None:
                history.train_auxiliary_loss.append(window_auxiliary / window_count)
            if val_set is not None:
                result = evaluate(model, val_set, task=task, batch_size=batch_size, device=device,
                                  amp=dtype is not None, pad_id=pad_id)
                history.val_loss.append(result["loss"])
                history.val_metric.append(result[metric_name])
                better = (history.best_metric is None or
                          (result[metric_name] > history.best_metric if task != "lm"
                           else result[metric_name] < history.best_metric))
                if better:
                    history.best_metric, history.best_step = result[metric_name], step
                    best_state = copy.deepcopy(model.state_dict())
                bar.set_postfix(loss=f"{history.train_loss[-1]:.4f}", **{metric_name: f"{result[metric_name]:.4f}"})
            if monitor is not None:
                history.monitor.append(monitor(model))
                model.train()
            if checkpoint_path is not None:
                save_atomically(checkpoint_path, {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                                        "schedule": schedule.state_dict(), "scaler": scaler.state_dict(),
                                        "history": history.to_dict(), "best_state": best_state, "step": step,
                                        "total_steps": total_steps, "rng": _rng_state(device)})
            window_loss, window_count, window_tokens, started = 0.0, 0, 0, time.perf_counter()
            window_auxiliary = 0.0
    bar.close()
    history.tokens_per_second = history.train_tokens / max(history.train_seconds, 1e-12)
    if device.type == "cuda":
        history.peak_memory_bytes = int(torch.cuda.max_memory_allocated(device))
    if best_state is not None and keep == "best":
        model.load_state_dict(best_state)
    return history
