"""Synthetic sequence tasks small enough to train on a CPU in seconds (chapter 5).

Both tasks put a *query token* at the last position and ask for one class label there, so a one-block model must
move information from the rest of the sequence to the last position through its sequence mixer:

* :func:`majority_task` -- "are there more ``a`` tokens than ``b`` tokens?". Counting needs only a *pooled*
  summary of the sequence, which GMA's K-slot memory stores well: route ``a`` and ``b`` keys to different slots
  and the read-out sees the two counts.
* :func:`recall_task` -- associative recall: the sequence holds ``(key, value)`` pairs and the query names one key;
  the answer is that key's value. Softmax attention matches the query with every key; GMA must route each key to
  its own memory slot, so it struggles once there are many more distinct keys than components ``K``.

Tokens have one or more *fields* (``tokens[..., c]``); :class:`TaskModel` embeds each field with its own table and
adds them, so a recall token carries its key and its value at one position.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from . import _checks


@dataclass
class TaskData(torch.utils.data.Dataset):
    """A labelled set of sequences; a ``Dataset`` of ``(tokens (N, n_fields), label)`` pairs, so
    :func:`gma_teach.train.fit` and ``DataLoader`` accept it directly.

    Attributes:
        tokens: ``(n_samples, N, n_fields)`` int64; the query token is at position ``N - 1``.
        labels: ``(n_samples,)`` int64 in ``[0, n_classes)``.
        vocab_sizes: the number of ids in each field, ``len(vocab_sizes) == n_fields``.
        n_classes: the number of labels.
    """

    tokens: torch.Tensor
    labels: torch.Tensor
    vocab_sizes: tuple[int, ...]
    n_classes: int

    def __len__(self) -> int:
        return self.labels.shape[0]

    def __getitem__(self, index) -> tuple[torch.Tensor, torch.Tensor]:
        return self.tokens[index], self.labels[index]

    def batch(self, index) -> tuple[torch.Tensor, torch.Tensor]:
        """``(tokens[index], labels[index])``."""
        return self.tokens[index], self.labels[index]


def majority_task(n_samples: int, seq_len: int, *, n_distractors: int = 4, seed: int = 0) -> TaskData:
    """Sequences of ``a``, ``b`` and distractor tokens; the label says whether ``a`` outnumbers ``b``.

    Token ids: ``0`` = ``a``, ``1`` = ``b``, ``2 .. 1 + n_distractors`` = distractors, ``2 + n_distractors`` = the
    query token (last position only). Each sequence draws its own share ``p`` of ``a`` among the ``a``/``b`` tokens,
    so both labels are equally likely and some sequences are close calls. Ties never occur: a tied sequence has its
    first token changed (to ``a`` unless it already was ``a``, then to ``b``).

    Args:
        n_samples: number of sequences (>= 1).
        seq_len: positions per sequence including the query token (>= 2).
        n_distractors: number of distractor token types (>= 0); about half of the tokens are distractors.
        seed: seed of the generator; the same seed gives the same data.

    Returns:
        :class:`TaskData` with ``tokens`` of shape ``(n_samples, seq_len, 1)`` and 2 classes (1 means more ``a``).
    """
    _checks.integer("n_samples", n_samples, minimum=1)
    _checks.integer("seq_len", seq_len, minimum=2)
    _checks.integer("n_distractors", n_distractors, minimum=0)
    _checks.integer("seed", seed, minimum=0)
    generator = torch.Generator().manual_seed(seed)
    body = seq_len - 1
    share_a = torch.rand(n_samples, 1, generator=generator)
    a_or_b = (torch.rand(n_samples, body, generator=generator) >= share_a).long()  # 0 = a with probability p
    if n_distractors:
        distractor = torch.randint(2, 2 + n_distractors, (n_samples, body), generator=generator)
        is_distractor = torch.rand(n_samples, body, generator=generator) < 0.5
        tokens = torch.where(is_distractor, distractor, a_or_b)
    else:
        tokens = a_or_b
    tied = (tokens == 0).sum(1) == (tokens == 1).sum(1)
    tokens[tied, 0] = torch.where(tokens[tied, 0] == 0, 1, 0)
    labels = ((tokens == 0).sum(1) > (tokens == 1).sum(1)).long()
    query = torch.full((n_samples, 1), 2 + n_distractors, dtype=torch.long)
    tokens = torch.cat([tokens, query], dim=1).unsqueeze(-1)
    return TaskData(tokens, labels, (3 + n_distractors,), 2)


def recall_task(n_samples: int, n_pairs: int, *, n_keys: int, n_values: int, seed: int = 0) -> TaskData:
    """Associative recall: ``n_pairs`` (key, value) tokens with distinct keys, then a query naming one of the keys.

    Field 0 is the key id in ``[0, n_keys)``; field 1 is the value id in ``[0, n_values)``, or ``n_values`` (the
    "?" value) at the query position. The label is the value stored with the queried key.

    Args:
        n_samples: number of sequences (>= 1).
        n_pairs: stored pairs per sequence (>= 1, <= n_keys); sequences have ``n_pairs + 1`` positions.
        n_keys: size of the key vocabulary. Compare it with GMA's number of components ``K``.
        n_values: number of value classes (>= 2).
        seed: seed of the generator.

    Returns:
        :class:`TaskData` with ``tokens`` of shape ``(n_samples, n_pairs + 1, 2)`` and ``n_values`` classes.
    """
    _checks.integer("n_samples", n_samples, minimum=1)
    _checks.integer("n_pairs", n_pairs, minimum=1)
    _checks.integer("n_keys", n_keys, minimum=1)
    _checks.integer("n_values", n_values, minimum=2)
    _checks.integer("seed", seed, minimum=0)
    if n_pairs > n_keys:
        raise ValueError(f"n_pairs must be <= n_keys (keys are distinct), got n_pairs={n_pairs}, n_keys={n_keys}")
    generator = torch.Generator().manual_seed(seed)
    keys = torch.rand(n_samples, n_keys, generator=generator).argsort(dim=1)[:, :n_pairs]
    values = torch.randint(0, n_values, (n_samples, n_pairs), generator=generator)
    asked = torch.randint(0, n_pairs, (n_samples,), generator=generator)
    rows = torch.arange(n_samples)
    query = torch.stack([keys[rows, asked], torch.full((n_samples,), n_values)], dim=-1)
    tokens = torch.cat([torch.stack([keys, values], dim=-1), query[:, None, :]], dim=1)
    return TaskData(tokens, values[rows, asked], (n_keys, n_values + 1), n_values)


class TaskModel(nn.Module):
    """One pre-norm mixing block with a read-out at the last (query) position.

    ``h = e + mixer(norm(e))`` where ``e`` sums one embedding per token field; the logits are
    ``head(norm(h[:, -1]))``. With no position embedding, only the mixer can bring information to the query.
    Unlike :class:`gma_teach.models.EncoderClassifier` (one token id per position, positions, FFN, several layers),
    it takes multi-field tokens and nothing but the mixer, so a task's result is the mixer's alone.

    Args:
        vocab_sizes: ids per token field (``TaskData.vocab_sizes``).
        d_model: width of the embeddings.
        mixer: a module mapping ``(B, N, d_model)`` to ``(B, N, d_model)`` (GMA, softmax attention, ...).
        n_classes: number of output classes.
    """

    def __init__(self, vocab_sizes, d_model: int, mixer: nn.Module, n_classes: int):
        super().__init__()
        _checks.integer("d_model", d_model, minimum=1)
        _checks.integer("n_classes", n_classes, minimum=2)
        if not isinstance(mixer, nn.Module):
            raise TypeError(f"mixer must be a torch.nn.Module, got {type(mixer).__name__}")
        self.embeddings = nn.ModuleList(nn.Embedding(size, d_model) for size in vocab_sizes)
        self.mixer = mixer
        self.mixer_norm = nn.LayerNorm(d_model)
        self.head_norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, n_classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens ``(B, N, n_fields)`` (or ``(B, N)`` for one field) -> logits ``(B, n_classes)``."""
        if tokens.dim() == 2:
            tokens = tokens.unsqueeze(-1)
        if tokens.dim() != 3 or tokens.shape[-1] != len(self.embeddings):
            raise ValueError(
                f"tokens must have shape (B, N, {len(self.embeddings)}), got {tuple(tokens.shape)}"
            )
        embedded = sum(table(tokens[..., field]) for field, table in enumerate(self.embeddings))
        hidden = embedded + self.mixer(self.mixer_norm(embedded))
        return self.head(self.head_norm(hidden[:, -1]))



# ----------------------------------------------------------------------------------------------------------------
# Multi-query associative recall (chapter 12)
# ----------------------------------------------------------------------------------------------------------------
IGNORE_INDEX = -100
"""The label of every position that is not scored (``torch.nn.functional.cross_entropy``'s default ``ignore_index``)."""


@dataclass
class MQARData(torch.utils.data.Dataset):
    """Multi-query associative recall examples, a ``Dataset`` of ``(inputs (N,), labels (N,))`` pairs.

    Attributes:
        inputs: ``(n_examples, seq_len)`` int64 token ids in ``[0, vocab_size)``.
        labels: ``(n_examples, seq_len)`` int64; ``labels[b, t]`` is the token a causal model must predict after
            reading ``inputs[b, :t + 1]``. It is the recalled value at each query position and
            :data:`IGNORE_INDEX` everywhere else.
        vocab_size: the number of token ids.
        n_pairs: key-value pairs per example (each one is queried once).
    """

    inputs: torch.Tensor
    labels: torch.Tensor
    vocab_size: int
    n_pairs: int

    def __len__(self) -> int:
        return self.inputs.shape[0]

    def __getitem__(self, index) -> tuple[torch.Tensor, torch.Tensor]:
        return self.inputs[index], self.labels[index]


def mqar_gap_probabilities(n_slots: int, power_a: float = 0.01) -> torch.Tensor:
    """The power law over the query slots: ``p(g) ∝ a g^(a - 1)`` for slots ``g = 1 .. n_slots``, ``(n_slots,)``
    float64 summing to 1. With ``a = 0.01`` a query most often sits right after the context, and rarely far away."""
    _checks.integer("n_slots", n_slots, minimum=1)
    power_a = _checks.positive_number("power_a", power_a)
    if power_a > 1:
        raise ValueError(f"power_a must be in (0, 1] (1 is uniform), got {power_a}")
    weights = torch.arange(1, n_slots + 1, dtype=torch.float64) ** (power_a - 1)
    return weights / weights.sum()


def _first_of_random_order(uniform: torch.Tensor, count: int) -> torch.Tensor:
    """``uniform.argsort(dim=1)[:, :count]`` without sorting every row: the ``count`` smallest by ``topk``, and
    ``argsort`` only for the rows where two of the ``count + 1`` smallest draws are equal (float32 draws tie now and
    then, and ``argsort`` orders ties its own way), so the result is the same, draw for draw."""
    if count >= uniform.shape[1]:
        return uniform.argsort(dim=1)[:, :count]
    smallest = uniform.topk(count + 1, dim=1, largest=False, sorted=True)
    chosen = smallest.indices[:, :count].clone()
    tied = (smallest.values[:, 1:] == smallest.values[:, :-1]).any(dim=1)
    if tied.any():
        chosen[tied] = uniform[tied].argsort(dim=1)[:, :count]
    return chosen


def mqar(n_examples: int, seq_len: int, n_pairs: int, *, vocab_size: int, seed: int = 0, power_a: float = 0.01,
         random_fill: bool = True) -> MQARData:
    """Multi-query associative recall (MQAR) after the rules of Zoology (Arora, Eyuboglu et al., 2023).

    Each example starts with a context of ``n_pairs`` key-value pairs ``k_1 v_1 k_2 v_2 ...``: keys are drawn from
    the first half of the vocabulary ``[0, vocab_size // 2)``, values from the second half, and neither repeats
    within an example. Every key is then asked once: the rest of the sequence is cut into slots of two positions,
    each key's query takes the first position of a slot drawn from the power law
    :func:`mqar_gap_probabilities` (slots drawn without replacement, so queries never collide), and the model must
    answer with the key's value at the *next* position: ``labels`` holds the value at the query's own position and
    :data:`IGNORE_INDEX` everywhere else. Every other position holds a token drawn uniformly from the whole
    vocabulary (``random_fill=True``, as Zoology does) or 0.

    Args:
        n_examples: examples (>= 1).
        seq_len: positions per example; the context and the query slots must fit: ``4 * n_pairs <= seq_len``.
        n_pairs: key-value pairs per example (>= 1).
        vocab_size: token ids (even split into keys and values; needs ``n_pairs <= vocab_size // 2``).
        seed: seed of the generator; the same seed gives the same data. Use different seeds for different splits.
        power_a: exponent of the gap law, in ``(0, 1]`` (Zoology's 0.01).
        random_fill: fill the unused positions with random tokens (else with 0).

    Returns:
        :class:`MQARData` with ``inputs`` and ``labels`` of shape ``(n_examples, seq_len)``.
    """
    _checks.integer("n_examples", n_examples, minimum=1)
    _checks.integer("seq_len", seq_len, minimum=4)
    _checks.integer("n_pairs", n_pairs, minimum=1)
    _checks.integer("vocab_size", vocab_size, minimum=2)
    _checks.integer("seed", seed, minimum=0)
    _checks.boolean("random_fill", random_fill)
    if 4 * n_pairs > seq_len:
        raise ValueError(f"n_pairs={n_pairs} needs seq_len >= 4 * n_pairs = {4 * n_pairs} (a context of "
                         f"2 * n_pairs tokens, then a two-position slot per query), got seq_len={seq_len}")
    n_keys = vocab_size // 2
    if n_pairs > n_keys:
        raise ValueError(f"n_pairs={n_pairs} distinct keys need vocab_size >= 2 * n_pairs = {2 * n_pairs}, "
                         f"got vocab_size={vocab_size}")
    context = 2 * n_pairs
    n_slots = (seq_len - context) // 2
    probabilities = mqar_gap_probabilities(n_slots, power_a)
    generator = torch.Generator().manual_seed(seed)
    keys = _first_of_random_order(torch.rand(n_examples, n_keys, generator=generator), n_pairs)
    values = n_keys + _first_of_random_order(torch.rand(n_examples, vocab_size - n_keys, generator=generator),
                                             n_pairs)
    # Weighted draws without replacement: the n_pairs largest of log p + Gumbel noise (successive sampling).
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
    return MQARData(inputs, labels, vocab_size, n_pairs)
