"""The chapters' workloads (all but chapters 7, 7b and 12): each chapter's list of points at a preset's sizes, read
through :class:`PresetSizes`, and the training runs that chapters, answers pages and experiments share (chapter 5's
task model, the ListOps and Text classifiers, the small LM). Each workload function takes the chapter's preset sizes
``p`` and ``on_cuda`` and returns its :class:`~gma_teach.cost.Point` list. The constants' docstrings are in the
package's ``__init__``, where the API page reads them.
"""
from __future__ import annotations

import math

from ..environment import preset
from ._devices import CPU_CACHE_BYTES, FLOAT32
from ._work import Point, Work, attention_work, block_work, training_work

LISTOPS_SECONDS_PER_TOKEN = 22e-6  # the generator on one core: 2.8 ms a tree of 126 tokens, 17.5 ms of 1089
CHAPTER_FIXED_SECONDS = 5.0  # a kernel start, the imports and the figures of a chapter, on the host


def sweep_point(label, work, calls, *, single_thread=True):
    """A timed sweep point: ``calls`` calls of ``work`` (warm-up, repeats, the peak-memory call), one thread unless
    told."""
    return Point(label, work * calls, single_thread=single_thread)


class PresetSizes:
    """A preset's sizes as the cost model reads them (``sizes.seq_lens``, ...): the one accessor through which every
    chapter's model reads :data:`gma_teach.presets.PRESETS`, so that a key the model needs and the preset lacks (a
    renamed key) fails here, naming the preset, the scale and the key."""

    def __init__(self, name: str, scale_name: str, **overrides):
        self.name, self.sizes = name, preset(name, scale_name)
        for key, value in overrides.items():  # a chapter's live runs replace some entries (e.g. fewer steps)
            if not hasattr(self.sizes, key):
                raise AttributeError(f"override {key!r} names no key of preset {name!r}; its keys: "
                                     f"{sorted(vars(self.sizes))}")
            setattr(self.sizes, key, value)

    def __getattr__(self, key):  # called only for a key that is not an attribute of this object
        try:
            return getattr(self.sizes, key)
        except AttributeError:
            raise AttributeError(f"the cost model reads key {key!r} of preset {self.name!r} at scale "
                                 f"{self.sizes.scale!r}, which has no such key; its keys: "
                                 f"{sorted(vars(self.sizes))}") from None


def preset_sizes(name: str, scale_name: str, **overrides) -> PresetSizes:
    """The sizes of preset ``name`` at ``scale_name`` with ``overrides`` replacing entries, read through
    :class:`PresetSizes`."""
    return PresetSizes(name, scale_name, **overrides)


def ch01(p, on_cuda):
    points = []
    for n in p.seq_lens:
        calls = 2 + p.repeat + 1  # warm-up, timed repeats, the peak-memory call
        for form in ("softmax", "sdpa", "gma_linear"):
            work = attention_work(form, p.batch_size, p.n_heads, n, p.d_head, p.d_head, p.n_components)
            points.append(sweep_point(f"{form} N={n}", work, calls, single_thread=False))
    return points


SKLEARN_SECONDS = 3.0  # importing scikit-learn and its first mixture fit
ADAM_STEP_OPS = 250  # one of chapter 2's Adam steps


def ch02(p, on_cuda):
    em = Work(20 * p.n_samples * p.n_components * p.d_route, 0, 30) * p.n_em_iter
    adam = Work(30 * p.n_samples * p.n_components * p.d_route, 0, ADAM_STEP_OPS) * p.n_adam_steps
    trap = Work(4 * p.trap_points * 128 * 32, 3 * FLOAT32 * p.trap_points * 128 * 32, 20,
                FLOAT32 * p.trap_points * 128 * 32 * 2)
    shifts = Work(3 * 4 * p.trap_points * 4 * 2 * p.trap_d_route, 0, 15) * (3 * len(p.trap_shifts))
    return [Point("EM", em, on="host"), Point("Adam", adam, on="host"), Point("direct form memory", trap, on="host"),
            Point("cancellation table", shifts, on="host"), Point("scikit-learn", Work(seconds=SKLEARN_SECONDS),
                                                                  on="host")]


def ch03(p, on_cuda):
    ranks = Work(sum(2 * 10 * p.rank_tokens**3 for _ in p.rank_components), 0, 10 * len(p.rank_components))
    return [Point("ranks", ranks, on="host")]


def ch04(p, on_cuda):
    points = []
    for n in p.seq_lens:
        if n <= p.naive_max_len:  # the FLOP counter runs both orders on the host
            count = attention_work("gma_naive", 1, 1, n, 1, p.d_value, p.n_components)
            points.append(Point(f"flop count N={n}", count, on="host"))
        calls = 1 + p.repeat + 1
        for form in ("gma_naive", "gma_linear", "sdpa"):
            if form == "gma_naive" and n > p.naive_max_len:
                continue
            work = attention_work(form, p.batch_size, p.n_heads, n, p.d_route, p.d_value, p.n_components)
            points.append(sweep_point(f"{form} N={n}", work, calls))
    return points


def task_run(p, label, mixer, seq_len, n_components, n_evals, on_cuda):
    """One run of chapter 5's one-block ``TaskModel`` on one thread, evaluated ``n_evals`` times on the test split. A
    run whose largest activation fits :data:`CPU_CACHE_BYTES` (the chapter's at small: a (B, H, N, K) or (B, H, N, N)
    tensor of 1-4 MiB) reads it back from the caches, as the recall model does: no streamed bytes."""
    work = training_work(n_steps=p.n_steps, batch_size=p.batch_size, seq_len=seq_len, d_model=p.d_model, n_layers=1,
                         d_ff=0, n_heads=p.n_heads, mixer=mixer, output_size=max(p.n_values, 2),
                         n_eval_tokens=n_evals * p.n_test * seq_len, n_components=n_components)
    widest = max(p.d_model, p.n_heads * (n_components if mixer == "gma" else seq_len))
    if FLOAT32 * p.batch_size * seq_len * widest <= CPU_CACHE_BYTES:
        work = Work(work.flops, 0.0, work.ops, work.peak)
    return Point(label, work, single_thread=True, amp=on_cuda)


def ch05(p, on_cuda):
    points = [Point("Lipschitz sweep", Work(60 * p.n_probe * p.n_components * p.d_probe, 0, 400)
                    * len(p.min_variances), on="host", single_thread=True)]
    tasks = {"majority": p.seq_len, "recall": 2 * p.n_pairs + 1}
    for task, seq_len in tasks.items():
        for mixer in ("gma", "softmax"):  # evaluated every sixth of the run
            points.append(task_run(p, f"train {mixer} ({task})", mixer, seq_len, p.n_components, 6, on_cuda))
    return points


def ch06(p, on_cuda):
    points = []
    limits = {"gma_naive_causal": p.naive_max_len, "gma_cumsum": p.cumsum_max_len, "gma_chunked": math.inf}
    for n in p.seq_lens:
        for form, limit in limits.items():
            if n <= limit:
                work = attention_work(form, p.batch_size, p.n_heads, n, p.d_route, p.d_value, p.n_components,
                                      chunk_size=p.chunk_size)
                points.append(sweep_point(f"{form} N={n}", work, 1 + p.repeat + 1))
    for c in p.chunk_sizes:
        work = attention_work("gma_chunked", p.batch_size, p.n_heads, p.seq_lens[-1], p.d_route, p.d_value,
                              p.n_components, chunk_size=c)
        points.append(Point(f"chunk size {c}", work, single_thread=False))
    decode = Work(2 * 12 * p.d_model**2, 0, 60) * (2 * p.decode_len)  # GMA steps and softmax KV-cache steps
    points.append(Point("decoding", decode, on="host"))
    return points


def ch08(p, on_cuda):
    points = []
    sizes = dict(d_model=p.d_model, n_heads=p.n_heads, batch_size=p.batch_size, n_features=p.n_features,
                 linformer_k=p.linformer_k)
    calls = 1 + p.repeat + 1
    for mixer in p.mixers:
        for n in p.seq_lens:
            if mixer == "softmax" and n > p.softmax_max_len:
                continue
            work = block_work(mixer, seq_len=n, n_components=p.n_components, on_cuda=on_cuda, **sizes)
            points.append(Point(f"{mixer} N={n}", work * calls))
    for k in p.k_values:
        points.append(Point(f"gma K={k}", block_work("gma", seq_len=p.k_sweep_len, n_components=k, on_cuda=on_cuda,
                                                     **sizes) * calls))
    points.append(Point("gma K=256 at 2N", block_work("gma", seq_len=2 * p.k_sweep_len, n_components=256,
                                                      on_cuda=on_cuda, **sizes)
                        * 3))
    return points


TEXT_MEAN_FILL = 0.57
"""The share of its cut (``max_length``) a Text stand-in example fills on average (145 of 256 bytes, measured on the
``small`` training split): a batch in length buckets is about that long."""


def classification_points(experiment, q, mixers, seeds, on_cuda, n_classes):
    """The ListOps or Text runs of ``mixers`` at sizes ``q`` (a preset of that experiment), each over ``seeds``,
    with ListOps' data generation first."""
    points = []
    if experiment == "listops":
        n_trees = q.n_train + q.n_val + q.n_test
        mean_tokens = (q.min_length + q.max_length) / 2
        points.append(Point("generate ListOps", Work(seconds=n_trees * mean_tokens * LISTOPS_SECONDS_PER_TOKEN),
                            on="host"))
        n_val = q.n_val
    else:
        n_val = q.n_test
    steps = q.epochs * math.ceil(q.n_train / q.batch_size)
    length = q.max_length
    if getattr(q, "length_buckets", 0):  # batches of similar lengths, each cut after its longest: the mean length
        length = (q.min_length + q.max_length) / 2 if experiment == "listops" else TEXT_MEAN_FILL * q.max_length
    evals = (q.epochs * n_val + q.n_test) * length
    for mixer in mixers:
        work = training_work(n_steps=steps, batch_size=q.batch_size, seq_len=length, d_model=q.d_model,
                             n_layers=q.n_layers, d_ff=q.d_ff, n_heads=q.n_heads, mixer=mixer, output_size=n_classes,
                             n_eval_tokens=evals, n_components=q.n_components, n_features=q.n_features,
                             linformer_k=q.linformer_k)
        points.append(Point(f"{experiment} {mixer} x{len(seeds)} seeds", work * len(seeds), amp=on_cuda))
    return points


def ch09(p, on_cuda):
    lp = preset_sizes("listops", p.live_scale, **p.live_listops)
    tp = preset_sizes("text", p.live_scale, **p.live_text)
    stats = Work(seconds=p.n_stats * (lp.min_length + lp.max_length) / 2 * LISTOPS_SECONDS_PER_TOKEN)
    return [Point("ListOps statistics", stats, on="host"),
            *classification_points("listops", lp, p.mixers, p.seeds, on_cuda, 10),
            *classification_points("text", tp, p.mixers, p.text_seeds, on_cuda, 4)]


LM_VOCAB = {"stdlib": 13_000, "wikitext-103": 50_257, "wikitext-2": 50_257}  # compacted stdlib: ~13k GPT-2 ids
TOKENIZE_SECONDS_PER_TOKEN = 2e-6  # GPT-2 BPE (tiktoken) and packing, one core
LM_TRAIN_TOKENS = {"stdlib": 1_200_000, "wikitext-103": 118_000_000, "wikitext-2": 2_400_000}
LM_VAL_TOKENS = {"stdlib": 25_000, "wikitext-103": 250_000, "wikitext-2": 250_000}  # a validation split's tokens


def lm_points(q, runs, on_cuda, *, cached_first=False):
    """Tokenizing the corpus, then one LM run at sizes ``q`` (a preset of ``"lm"``) for each ``(label, mixer, K)``
    of ``runs``; ``cached_first``: the first run is an earlier chapter's, reused."""
    vocab = LM_VOCAB.get(q.source, 50_257)
    val_tokens = q.max_val_tokens or LM_VAL_TOKENS.get(q.source, 250_000)
    evals = (q.n_steps // q.eval_every + 1) * val_tokens
    tokenize = Work(seconds=LM_TRAIN_TOKENS.get(q.source, 1e6) * TOKENIZE_SECONDS_PER_TOKEN)
    points = [Point("tokenize the corpus", tokenize, on="host")]
    for i, (label, mixer, k) in enumerate(runs):
        work = training_work(n_steps=q.n_steps, batch_size=q.batch_size, seq_len=q.seq_len, d_model=q.d_model,
                             n_layers=q.n_layers, d_ff=q.d_ff, n_heads=q.n_heads, mixer=mixer, vocab_size=vocab,
                             n_eval_tokens=evals, n_components=k, n_features=q.n_features)
        points.append(Point(label, work, amp=on_cuda, cached=cached_first and i == 0))
    return points


def ch10(p, on_cuda):
    q = preset_sizes("lm", p.live_scale, **p.live_lm)
    runs = [(f"lm gma K={q.n_components}", "gma", q.n_components)]
    runs += [(f"lm gma K={k}", "gma", k) for k in q.n_components_sweep if k != q.n_components]
    runs += [(f"lm {mixer}", mixer, q.n_components) for mixer in p.mixers]
    return lm_points(q, runs, on_cuda)


def ch11(p, on_cuda):
    q = preset_sizes("lm", p.lm_scale, **preset_sizes("ch10", p.lm_scale).live_lm)  # the model chapter 10 saved
    live = ("variance and balance", "balance", "information")  # the routers trained live beside chapter 10's
    runs = [(f"lm gma K={q.n_components} (chapter 10's)", "gma", q.n_components)]
    runs += [(f"lm gma K={q.n_components}, routing: {name}", "gma", q.n_components) for name in live]
    points = lm_points(q, runs, on_cuda, cached_first=True)
    forward = training_work(n_steps=0, batch_size=q.batch_size, seq_len=q.seq_len, d_model=q.d_model,
                            n_layers=q.n_layers, d_ff=q.d_ff, n_heads=q.n_heads, mixer="gma",
                            vocab_size=LM_VOCAB.get(q.source, 50_257), n_eval_tokens=p.n_tokens,
                            n_components=q.n_components)
    n_routers = 1 + len(live)
    reads = n_routers * (1 + p.untrained_seeds) + p.untrained_seeds  # each router, its untrained draws, the control
    points.append(Point(f"read the routing ({n_routers} trained models, {reads - n_routers} untrained)",
                        forward * reads))
    shuffles = Work(10 * p.n_tokens * q.n_components, 0, 30) * (2 * p.n_shuffles * (1 + p.untrained_seeds))
    information = Work(10 * p.n_tokens * q.n_components * q.n_heads, 0, 30) * (n_routers * p.information_shuffles)
    points.append(Point("permutation and shuffled baselines", shuffles + information, on="host"))
    return points
