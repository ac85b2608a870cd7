r"""The fast-weight capacity test: how many key-value pairs one attention layer can store and give back.

After Setting 1 of Schlag, Irie and Schmidhuber, "Linear Transformers Are Secretly Fast Weight Programmers"
(ICML 2021): a sequence holds ``S`` pairs, each of ``S`` distinct keys once with one of ``S`` distinct values, then
one query, one of the stored keys; one attention layer must return the value stored with it. Nothing else is in the
sequence, so what is measured is the memory, not the learning of a vocabulary or of where to look: softmax
attention keeps every pair, linear attention fails once ``S`` passes its feature dimension.

* **Task.** :func:`fast_weight_data` (or :func:`fast_weight_batch` with a generator): keys and values are two
  independent random permutations of ``0 .. S-1`` (every key and every value once), the query one position drawn
  uniformly; shapes in :class:`FastWeightBatch`.
* **Model.** :class:`FastWeightModel`: a pair's token is a trained key embedding beside its value's fixed random
  embedding (:func:`value_embeddings`, unit rows), each half of the token, the query token its key's embedding
  beside a learned query mark; one causal mixer of the registry (:func:`gma_teach.baselines.make_mixer`, one head
  of 64: key size 64) over the ``S + 1`` tokens, and a linear readout of the last position back to the value.
* **Loss and score.** :func:`reconstruction_loss`, ``0.5 |y - v|^2`` summed over the value's numbers and averaged
  over the batch (theirs); :func:`nearest_value` scores retrieval as the index of the nearest value embedding.
* **Stopping.** :class:`StoppingRule`: evaluate every ``eval_every`` steps; stop at an evaluation loss at or below
  ``target`` (1e-3), or when ``patience + 1`` evaluations in a row have not lowered the best (theirs: 10), or at
  ``max_steps``. :func:`train_fast_weight` trains one model that way (Adam, constant rate, fresh batches every
  step) and :func:`fast_weight_seed` runs one arm and one seed over a grid of ``S``.

**Their setting, read from their code** (``ischlag/fast-weight-transformers``, ``synthetic/main.py``,
``associativeRetrievalDataset.py``, ``softmaxAttention.py``, ``linearAttention.py`` and ``logs/``):

* vocabulary ``2S`` tokens (``S`` keys, ``S`` values); ``seq_len = S``, keys and values drawn without replacement,
  so every sequence holds all ``S`` keys; the query is a uniformly drawn stored key (evaluation: 20 fresh
  sequences, each asked every one of its ``S`` keys);
* key embeddings of size ``int(2S * 1.1)``, N(0, 1), trained; values one-hot of size ``S`` (an identity embedding,
  not trained); a pair's key is ``W_k [one-hot value; key embedding]`` (size 64), its value the one-hot itself;
  the query is ``W_q`` of the queried key's embedding; the output is the read value, compared with the one-hot;
* loss ``0.5 |y - v|^2`` summed over the value, batch mean; Adam at 1e-3, batch 32; evaluation every 100 steps;
  stop at an evaluation loss <= 0.001 or after more than 10 evaluations in a row without a new best, at most
  100,000 steps; one seed (1) per run;
* grid ``S = 20, 40, ..., 600`` (``--begin 20 --step 20``; their logs: softmax ``d64_softmax_cat``, linear
  ``d64_linear_sum``, FAVOR ``d64_favor{64,128,512}_sum``);
* linear attention ``elu + 1`` features (64); FAVOR with ``m = 64, 128, 512`` draws an orthogonal ``(64, m)``
  projection afresh at every forward and uses ``[exp(u - |x|^2/2), exp(-u - |x|^2/2)]``: ``2m`` features;
  softmax scaled by ``1/sqrt(64)``, the query not among the keys it reads.

**Where this test differs, and why:**

* *Values* are fixed random unit vectors of 32 numbers, not one-hot vectors of ``S``, and *key embeddings* have 32
  numbers, not ``2.2 S``: the registry's mixers read one token of their width (64), so a token holds the key in
  one half and the value in the other, as theirs concatenates ``[one-hot value; key embedding]``. The mixer
  projects keys to 64 numbers whatever the embedding's size, so a larger embedding adds no key the layer could not
  already form (and at ``S = 600`` theirs would make the embedding, not the memory, most of a step's cost on a
  CPU); 32 random unit vectors per value are told apart by nearest neighbour at every ``S`` of the grid once the
  read is close (the loss starts near 0.5 as theirs does).
* *The value path starts as the identity on the value half* (see :class:`FastWeightModel`): theirs is the
  identity, fixed; ours is the registry mixer's value and output projections and a readout, trained. A first form
  summed key and value in one 64-number token and took the query's key away in the readout: its gradient pulled
  every key embedding towards the others while attention was spread, and linear attention stayed on the plateau
  at ``S = 60`` for over 1,500 steps (theirs leaves it by step 300). With the halves apart it leaves it by step
  500.
* *The query* is a token of its own at the end of a causal sequence (its key beside a learned mark in the place
  of a value), so it also writes itself into the memory (and softmax reads it too) before reading: every mixer of
  the registry is a causal sequence-to-sequence map, and this is how it decodes.
* *Performer* (``performer``, :func:`gma_teach.baselines.favor_attention`) has ``m`` positive features drawn
  once, not ``2m`` hyperbolic ones drawn at every forward: our ``m = 128`` has the feature count of their ``m =
  64``. Its state is on the state-bytes axis either way.
* *Evaluation* reads a fixed set of ``n_eval`` sequences (one query each) drawn from a seed of its own, not
  ``20 S`` fresh queries: at ``S = 600`` theirs costs more than the 100 steps between evaluations.
* *Steps* stop at the study's ``max_steps`` (far below 100,000; their logs stop within a few thousand), and every
  arm runs several seeds.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch
from torch import nn
from tqdm.auto import tqdm

from .. import _checks
from ..baselines import make_mixer, mixer_state_bytes
from ..diagnostics import capture_responsibilities, gma_layers, information_report, lost_pair_split, slot_report
from ..models import auxiliary_loss

__all__ = ["FAST_WEIGHT_SIZES", "ROUTING_SEQUENCES", "FastWeightBatch", "FastWeightModel", "StoppingRule",
           "fast_weight_batch", "fast_weight_data", "fast_weight_seed", "nearest_value", "reconstruction_loss",
           "retrieval_scores", "routing_sample", "routing_summary", "slot_summary", "train_fast_weight",
           "value_embeddings"]

FAST_WEIGHT_SIZES = tuple(range(20, 601, 20))
"""Their grid of ``S`` (pairs in a sequence): 20, 40, ..., 600."""


@dataclass(frozen=True)
class FastWeightBatch:
    """Sequences of the capacity test.

    Attributes:
        keys, values: ``(B, S)`` int64, each row a permutation of ``0 .. S-1``; pair ``j`` stores ``values[:, j]``
            under ``keys[:, j]``.
        query: ``(B,)`` int64, the position of the pair asked for.
    """

    keys: torch.Tensor
    values: torch.Tensor
    query: torch.Tensor

    def __len__(self) -> int:
        return self.keys.shape[0]

    @property
    def n_pairs(self) -> int:
        return self.keys.shape[1]

    @property
    def asked(self) -> torch.Tensor:
        """The queried keys, ``(B,)``."""
        return self.keys.gather(1, self.query[:, None])[:, 0]

    @property
    def target(self) -> torch.Tensor:
        """The values stored with the queried keys, ``(B,)``."""
        return self.values.gather(1, self.query[:, None])[:, 0]

    def rows(self, start: int, stop: int) -> FastWeightBatch:
        """The sequences ``start .. stop-1``."""
        return FastWeightBatch(self.keys[start:stop], self.values[start:stop], self.query[start:stop])


def fast_weight_batch(batch_size: int, n_pairs: int, *, generator: torch.Generator) -> FastWeightBatch:
    """``batch_size`` sequences of ``n_pairs`` pairs (every key and every value once, each in a random order) and
    a query position drawn uniformly, from ``generator``."""
    batch_size = _checks.positive_int("batch_size", batch_size)
    n_pairs = _checks.integer("n_pairs", n_pairs, minimum=2)
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    keys = torch.rand(batch_size, n_pairs, generator=generator).argsort(dim=1)
    values = torch.rand(batch_size, n_pairs, generator=generator).argsort(dim=1)
    query = torch.randint(0, n_pairs, (batch_size,), generator=generator)
    return FastWeightBatch(keys, values, query)


def fast_weight_data(n_examples: int, n_pairs: int, *, seed: int) -> FastWeightBatch:
    """:func:`fast_weight_batch` of ``n_examples`` sequences from a generator seeded with ``seed`` (the same seed
    gives the same sequences)."""
    seed = _checks.integer("seed", seed, minimum=0)
    return fast_weight_batch(n_examples, n_pairs, generator=torch.Generator().manual_seed(seed))


def value_embeddings(n_values: int, dim: int, *, seed: int) -> torch.Tensor:
    """``(n_values, dim)`` float32 fixed random value embeddings: Gaussian rows scaled to unit length."""
    n_values = _checks.positive_int("n_values", n_values)
    dim = _checks.positive_int("dim", dim)
    seed = _checks.integer("seed", seed, minimum=0)
    table = torch.randn(n_values, dim, generator=torch.Generator().manual_seed(seed))
    return table / table.norm(dim=-1, keepdim=True)


class FastWeightModel(nn.Module):
    """One causal mixer that stores ``S`` pairs and answers one query.

    A token has two halves of ``d_model / 2`` numbers each (theirs concatenates too): a pair's token is its key's
    trained embedding (N(0, 2/d_model): about unit length) beside its value's fixed random unit embedding
    (:func:`value_embeddings`); the query's token is its key's embedding beside a learned mark (started as a
    random unit vector) in the place of a value. The mixer reads the ``S + 1`` tokens causally and a linear
    readout maps its output at the query to the value (``d_model / 2`` numbers).

    At initialization each projection reads its own half, as theirs does (their keys and queries are read from
    the key embedding, their values are the one-hot vectors themselves): the mixer's query and key projections
    read the key half with unit-variance entries (queries and keys of unit variance, their scale) and the value
    half with zeros; its value projection is the identity on the value half and zero on the key half, its output
    projection the identity, and the readout takes the value half. So a read that lands on the right pair gives
    back its value exactly from the first step, and no key enters the value path. (With key and value summed in
    one space, the value path carries the keys too, and a readout that takes the query's key away pulls every key
    embedding towards the others while attention is spread: the keys collapse and linear attention stays on the
    loss-0.5 plateau at ``S = 60`` for over 1,500 steps; with the halves apart it leaves it by step 500.)

    Args:
        n_pairs: ``S``, the number of keys and of values.
        mixer: a registered mixer name (:func:`gma_teach.baselines.make_mixer`); ``**options``: its options.
        d_model: the width and key size (one head); even: each half is ``d_model / 2``. value_seed: the value
            embeddings' seed.

    ``forward(batch)`` maps a :class:`FastWeightBatch` of ``B`` sequences to the read values
    ``(B, d_model / 2)``.
    """

    def __init__(self, n_pairs: int, mixer: str, *, d_model: int = 64, value_seed: int = 0, **options):
        super().__init__()
        self.n_pairs = _checks.integer("n_pairs", n_pairs, minimum=2)
        d_model = _checks.integer("d_model", d_model, minimum=2)
        if d_model % 2:
            raise ValueError(f"d_model must be even (a key half and a value half), got {d_model}")
        half = d_model // 2
        self.key_table = nn.Embedding(n_pairs, half)
        nn.init.normal_(self.key_table.weight, std=half ** -0.5)
        self.register_buffer("value_table", value_embeddings(n_pairs, half, seed=value_seed))
        self.query_mark = nn.Parameter(value_embeddings(1, half, seed=value_seed + 1)[0])
        self.mixer = make_mixer(mixer, d_model, 1, causal=True, **options)
        self.readout = nn.Linear(d_model, half)
        value_half = torch.cat([torch.zeros(half), torch.ones(half)])
        with torch.no_grad():
            for name, start in (("v_proj", torch.diag(value_half)), ("out_proj", torch.eye(d_model))):
                projection = getattr(self.mixer, name, None)
                if isinstance(projection, nn.Linear) and projection.weight.shape == (d_model, d_model):
                    projection.weight.copy_(start)
                    if projection.bias is not None:
                        projection.bias.zero_()
            for name in ("q_proj", "k_proj"):
                projection = getattr(self.mixer, name, None)
                if isinstance(projection, nn.Linear):
                    nn.init.normal_(projection.weight)
                    projection.weight[:, half:] = 0.0
                    if projection.bias is not None:
                        projection.bias.zero_()
            self.readout.weight.copy_(torch.cat([torch.zeros(half, half), torch.eye(half)], dim=1))
            self.readout.bias.zero_()

    def tokens(self, batch: FastWeightBatch) -> torch.Tensor:
        """The ``S`` pair tokens then the query token, ``(B, S + 1, d_model)``: ``[key; value]`` and
        ``[key; mark]``."""
        if batch.n_pairs != self.n_pairs:
            raise ValueError(f"batch has {batch.n_pairs} pairs, the model stores {self.n_pairs}")
        pairs = torch.cat([self.key_table(batch.keys), self.value_table[batch.values]], dim=-1)
        return torch.cat([pairs, self.query_tokens(batch.asked)[:, None]], dim=1)

    def query_tokens(self, keys: torch.Tensor) -> torch.Tensor:
        """The query token that asks for each of ``keys`` (int64 key ids of any shape ``(...)``):
        ``(..., d_model)``, the key's embedding beside the query mark."""
        embedded = self.key_table(keys)
        return torch.cat([embedded, self.query_mark.expand_as(embedded)], dim=-1)

    def forward(self, batch: FastWeightBatch) -> torch.Tensor:
        return self.readout(self.mixer(self.tokens(batch))[:, -1])

    def state_bytes(self) -> int:
        """The mixer's decoding state after the ``S + 1`` tokens (:func:`gma_teach.baselines.mixer_state_bytes`)."""
        return mixer_state_bytes(self.mixer, self.n_pairs + 1)


def reconstruction_loss(read: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """``0.5 |read - target|^2`` summed over the last axis, averaged over the rest (``(B, D)`` each -> scalar)."""
    if read.shape != target.shape:
        raise ValueError(f"read {tuple(read.shape)} and target {tuple(target.shape)} must have one shape")
    return 0.5 * (read - target).pow(2).sum(-1).mean()


def nearest_value(read: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """The index of the row of ``table (V, D)`` nearest (Euclidean) to each read value ``(B, D)``: ``(B,)``."""
    return torch.cdist(read.float(), table.float()).argmin(dim=-1)


@torch.no_grad()
def retrieval_scores(model: FastWeightModel, data: FastWeightBatch, *, batch_size: int = 256) -> dict:
    """``{"loss": mean reconstruction loss, "accuracy": share of queries whose nearest value is the stored one}``
    of ``model`` on ``data``."""
    was_training = model.training
    model.eval()
    loss, hits = 0.0, 0
    for start in range(0, len(data), batch_size):
        part = data.rows(start, start + batch_size)
        read = model(part)
        loss += float(reconstruction_loss(read, model.value_table[part.target])) * len(part)
        hits += int((nearest_value(read, model.value_table) == part.target).sum())
    model.train(was_training)
    return {"loss": loss / len(data), "accuracy": hits / len(data)}


class StoppingRule:
    """Stop at an evaluation loss at or below ``target``, or once more than ``patience`` evaluations in a row have
    not lowered the best loss (theirs: target 1e-3, patience 10)."""

    def __init__(self, target: float = 1e-3, patience: int = 10):
        self.target = _checks.positive_number("target", target)
        self.patience = _checks.integer("patience", patience, minimum=0)
        self.best, self.strikes = math.inf, 0

    def update(self, loss: float) -> str | None:
        """Read one evaluation loss; ``"target"`` or ``"plateau"`` when training should stop, else ``None``."""
        if loss < self.best:
            self.best, self.strikes = loss, 0
        else:
            self.strikes += 1
        if loss <= self.target:
            return "target"
        return "plateau" if self.strikes > self.patience else None


def train_fast_weight(model: FastWeightModel, *, seed: int, val: FastWeightBatch, lr: float = 1e-3,
                      batch_size: int = 32, max_steps: int = 5_000, eval_every: int = 100,
                      rule: StoppingRule | None = None, progress=False, label: str | None = None) -> dict:
    """Train ``model`` on fresh batches (a generator seeded with ``seed``) with Adam at ``lr`` until ``rule``
    (default :class:`StoppingRule`) stops it on the loss over ``val``, or ``max_steps``.

    Returns:
        ``{"steps", "stopped": "target" | "plateau" | "max_steps", "curve": {"steps", "loss", "accuracy"},
        "train_seconds"}``.
    """
    max_steps = _checks.positive_int("max_steps", max_steps)
    eval_every = _checks.positive_int("eval_every", eval_every)
    rule = rule or StoppingRule()
    generator = torch.Generator().manual_seed(_checks.integer("seed", seed, minimum=0))
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    curve = {"steps": [], "loss": [], "accuracy": []}
    stopped, step, started = "max_steps", 0, time.perf_counter()
    bar = tqdm(total=max_steps, desc=label or "fast weights", disable=not progress, leave=False)
    model.train()
    while step < max_steps:
        batch = fast_weight_batch(batch_size, model.n_pairs, generator=generator)
        loss = reconstruction_loss(model(batch), model.value_table[batch.target]) + auxiliary_loss(model)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        step += 1
        bar.update(1)
        if step % eval_every == 0:
            scores = retrieval_scores(model, val)
            for key, value in (("steps", step), ("loss", scores["loss"]), ("accuracy", scores["accuracy"])):
                curve[key].append(value)
            bar.set_postfix(loss=f"{scores['loss']:.4f}", accuracy=f"{scores['accuracy']:.3f}")
            verdict = rule.update(scores["loss"])
            if verdict is not None:
                stopped = verdict
                break
    bar.close()
    return {"steps": step, "stopped": stopped, "curve": curve, "train_seconds": time.perf_counter() - started}


ROUTING_SEQUENCES = 256
"""The number of test sequences, the first ones, that :func:`routing_sample` reads (256 x S key rows and 256 query
rows)."""


def routing_sample(model: FastWeightModel, data: FastWeightBatch) -> dict[str, torch.Tensor] | None:
    """A GMA model's routing on the first :data:`ROUTING_SEQUENCES` sequences of ``data``; ``None`` for another
    mixer.

    Returns:
        ``{"key": (B * S, K), "query": (B, K)}``: the key responsibilities of the ``S`` pair tokens (which slots
        each pair is written to) and the query responsibilities of the query token (which slots it reads).
    """
    if not gma_layers(model):
        return None
    part = data.rows(0, ROUTING_SEQUENCES)
    (key,) = capture_responsibilities(model, part, side="key").values()  # (B, 1, S + 1, K)
    (query,) = capture_responsibilities(model, part, side="query").values()
    return {"key": key[:, 0, :model.n_pairs].reshape(-1, key.shape[-1]), "query": query[:, 0, model.n_pairs]}


def routing_summary(trained: dict[str, torch.Tensor], untrained: dict[str, torch.Tensor]) -> dict:
    """Per side (``"key"``, ``"query"``) of two :func:`routing_sample` results (the model after and before
    training): the information its routing carries and the name chapter 11's rule gives it
    (:func:`gma_teach.diagnostics.information_report`, 20 shuffles).

    Returns:
        ``{side: {"bits", "share", "usage_entropy", "token_entropy", "mean_max_ratio", "untrained_bits",
        "shuffled_bits", "shuffled_sd", "state"}}``: ``bits`` is the mutual information between a token and its
        slot (at most ``log2 K``), ``share`` that over ``ln K``, the entropies as shares of ``ln K``.
    """
    summary = {}
    for side in ("key", "query"):
        report = information_report(trained[side], [untrained[side]])
        summary[side] = {**{name: report["trained"][name] for name in
                            ("bits", "share", "usage_entropy", "token_entropy", "mean_max_ratio")},
                         "untrained_bits": report["untrained"]["mean"], "shuffled_bits": report["shuffled"]["mean"],
                         "shuffled_sd": report["shuffled"]["std"], "state": report["state"]}
    return summary


def slot_summary(model: FastWeightModel, data: FastWeightBatch, sample: dict[str, torch.Tensor], *,
                 accuracy: float) -> dict:
    """How a GMA model's slots hold the pairs of the first :data:`ROUTING_SEQUENCES` sequences of ``data``, and
    where its lost pairs go (the slot diagnostics of :mod:`gma_teach.diagnostics`).

    Pair ``j``'s key is the slot its pair token is written to, the argmax of its key responsibilities, taken from
    ``sample``, :func:`routing_sample` of ``model`` on ``data`` (no second forward). Its query is the slot read by
    the query token that asks for key ``j`` (:meth:`FastWeightModel.query_tokens`), the argmax of its query
    responsibilities: one evaluation forward of the mixer over the ``S`` query tokens of each sequence, one for
    every stored key. The layer routes each token by its own projection (``Gamma^Q`` of a token depends on that
    token alone, not on its position or the tokens before it), so these are the responsibilities the query token
    has at the end of the sequence when key ``j`` is asked, for every ``j`` at once, not only the asked one; a
    ``RuntimeError`` says so where the asked keys' query responsibilities differ from those in ``sample``.

    Args:
        model: a trained :class:`FastWeightModel` with a GMA mixer (one head).
        data: its test sequences, the ones ``sample`` was read on.
        sample: :func:`routing_sample` of ``model`` on ``data``: ``{"key": (B * S, K), "query": (B, K)}``.
        accuracy: the measured retrieval accuracy (:func:`retrieval_scores` on ``data``; all of its sequences, one
            query each), read as ``accuracy * S`` pairs retrieved per sequence.

    Returns:
        :func:`gma_teach.diagnostics.slot_report`'s means over the ``B`` sequences of the one head, as floats:
        ``{"sequences", "n_slots", "occupied", "solitary", "solitary_share", "colliding", "collision_share",
        "agreement", "misrouted", "predicted_pairs", "predicted_share", "retrieved", "split"}``, where ``retrieved`` is
        ``accuracy * S`` and ``split`` is :func:`gma_teach.diagnostics.lost_pair_split` of it (``{"n_pairs",
        "lost", "collisions", "misrouted", "blur", "beyond_slots"}``; ``blur`` negative where the model retrieves
        more pairs than the slots predict). Counts are pairs (or slots) per sequence.
    """
    n_pairs = model.n_pairs
    part = data.rows(0, ROUTING_SEQUENCES)
    if sample["key"].shape[0] != len(part) * n_pairs:
        raise ValueError(f"sample holds {sample['key'].shape[0]} key rows; routing_sample of this model on data "
                         f"holds {len(part)} x {n_pairs}")
    n_slots = sample["key"].shape[-1]
    keys = sample["key"].reshape(len(part), 1, n_pairs, n_slots)  # (B, H = 1, S, K)
    with torch.no_grad():
        asking = model.query_tokens(part.keys)  # (B, S, d_model): the query for each stored key
    (queries,) = capture_responsibilities(model.mixer, asking, side="query").values()  # (B, 1, S, K)
    asked = queries[torch.arange(len(part)), 0, part.query]  # the query tokens the sequences end with
    if not torch.allclose(asked, sample["query"], atol=1e-5):
        raise RuntimeError("the query tokens routed apart do not match the query routing of the full sequences: "
                           "this mixer's query routing depends on more than the token, so the query of each key "
                           "needs a forward of its own sequence")
    report = slot_report(keys, queries)
    summary = {"sequences": report["sequences"], "n_slots": report["n_slots"],
               **{name: value[0] for name, value in report.items() if isinstance(value, list)}}
    accuracy = _checks.number("accuracy", accuracy)
    if not 0.0 <= accuracy <= 1.0:
        raise ValueError(f"accuracy must be a share in [0, 1], got {accuracy}")
    split = lost_pair_split(accuracy * n_pairs, n_pairs=n_pairs, colliding=summary["colliding"],
                            misrouted=summary["misrouted"])
    return {**summary, "retrieved": accuracy * n_pairs, "split": split.as_dict()}


def fast_weight_seed(sizes, mixer: str, options, seed: int, *, progress=False, label: str | None = None) -> dict:
    """One arm and one seed of a capacity study: a fresh model at every ``S`` of ``sizes["n_pairs"]``, trained by
    :func:`train_fast_weight` and scored on a test set of its own.

    Args:
        sizes: the study's setting: ``n_pairs`` (the grid of ``S``), ``d_model``, ``lr``,
            ``batch_size``, ``max_steps``, ``eval_every``, ``target_loss``, ``patience``, ``n_eval``, ``n_test``
            and ``data_seeds`` (``{"val", "test"}``: each split's seed is this plus ``S``, the same for every arm
            and seed).
        mixer, options: the arm.
        seed: the run's seed (its initialization, its training batches and its value embeddings, shared by every
            arm at this seed, so that arms pair on it).

    Returns:
        the run's record: ``{"seed", "lr", "n_pairs", "loss", "retrieval_accuracy", "steps", "stopped",
        "state_bytes", "parameters", "curves", "train_seconds"}``, the per-``S`` entries keyed by ``str(S)``; a GMA
        arm's record also holds ``"routing"``: :func:`routing_summary` at each ``S``, on the test sequences, and
        ``"slots"``: :func:`slot_summary` of the trained model at each ``S``, on the same sequences.
    """
    seed = _checks.integer("seed", seed, minimum=0)
    run = {"seed": seed, "lr": sizes["lr"], "n_pairs": list(sizes["n_pairs"]), "loss": {},
           "retrieval_accuracy": {}, "steps": {}, "stopped": {}, "state_bytes": {}, "parameters": {}, "curves": {},
           "train_seconds": {}}
    for n_pairs in sizes["n_pairs"]:
        torch.manual_seed(seed * 100_003 + n_pairs)
        model = FastWeightModel(n_pairs, mixer, d_model=sizes["d_model"], value_seed=seed, **dict(options))
        val = fast_weight_data(sizes["n_eval"], n_pairs, seed=sizes["data_seeds"]["val"] + n_pairs)
        test = fast_weight_data(sizes["n_test"], n_pairs, seed=sizes["data_seeds"]["test"] + n_pairs)
        untrained = routing_sample(model, test)
        trained = train_fast_weight(model, seed=seed * 100_003 + n_pairs, val=val, lr=sizes["lr"],
                                    batch_size=sizes["batch_size"], max_steps=sizes["max_steps"],
                                    eval_every=sizes["eval_every"],
                                    rule=StoppingRule(sizes["target_loss"], sizes["patience"]), progress=progress,
                                    label=f"{label or mixer} S={n_pairs} seed {seed}")
        scores, key = retrieval_scores(model, test), str(n_pairs)
        run["loss"][key], run["retrieval_accuracy"][key] = scores["loss"], scores["accuracy"]
        run["steps"][key], run["stopped"][key] = trained["steps"], trained["stopped"]
        run["state_bytes"][key] = model.state_bytes()
        run["parameters"][key] = sum(p.numel() for p in model.parameters())
        run["curves"][key], run["train_seconds"][key] = trained["curve"], trained["train_seconds"]
        if untrained is not None:
            sample = routing_sample(model, test)
            run.setdefault("routing", {})[key] = routing_summary(sample, untrained)
            run.setdefault("slots", {})[key] = slot_summary(model, test, sample, accuracy=scores["accuracy"])
    return run
