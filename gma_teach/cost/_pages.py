"""The other pages the book executes, the answers, the statistics primer and Part IV's findings: each page's fixed
cost, its fixed-size work (checkers, records, figures) and, for the answers that train or time at their chapter's
sizes, that sized work. The constants' docstrings are in the package's ``__init__``, where the API page reads them.
"""
from __future__ import annotations

from ._chapters import LM_VAL_TOKENS, LM_VOCAB, lm_points, preset_sizes, sweep_point, task_run
from ._work import Point, Work, attention_work, block_work, training_work

PAGE_FIXED_SECONDS = 2.0  # a kernel start, the imports and a few figures
PAGE_SECONDS = {"statistics_primer": 6.3, "part_iv_findings": 0.6, "answers01": 0.4, "answers02": 0.6,
                "answers03": 1.6, "answers04": 1.8, "answers05": 0.5, "answers06": 2.3, "answers07": 1.2,
                "answers08": 0.2, "answers09": 1.5, "answers10": 0.5, "answers11": 0.2, "answers12": 1.0}
ANSWER_10_KS = (4, 8, 16)  # the values of K answers/10 passes to ch10.check_k_sweep


def _answers01(p, on_cuda):
    """Exercise 1.3: eager softmax timed (a warm-up and three repeats) and its peak measured at the three lengths
    below chapter 1's longest."""
    return [sweep_point(f"softmax N={n}", attention_work("softmax", p.batch_size, p.n_heads, n, p.d_head, p.d_head),
                        1 + 3 + 1, single_thread=False) for n in p.seq_lens[-4:-1]]


def _answers05(p, on_cuda):
    """Exercise 5.3: GMA at K = n_keys / 8, n_keys / 2, n_keys and softmax on ``exercise_recall``'s task, chapter 5's
    model, steps and one thread, each evaluated once."""
    n_keys, seq_len = p.exercise_recall["n_keys"], 2 * p.exercise_recall["n_pairs"] + 1
    runs = [("gma", k) for k in (max(2, n_keys // 8), n_keys // 2, n_keys)] + [("softmax", p.n_components)]
    return [task_run(p, f"train {mixer} K={k}" if mixer == "gma" else f"train {mixer}", mixer, seq_len, k, 1,
                     on_cuda) for mixer, k in runs]


def _answers06(p, on_cuda):
    """Exercise 6.3's measurement: the chunked causal form's peak at chapter 6's longest length, each chunk size."""
    return [Point(f"chunk size {c}", attention_work("gma_chunked", p.batch_size, p.n_heads, p.seq_lens[-1], p.d_route,
                                                    p.d_value, p.n_components, chunk_size=c), single_thread=False)
            for c in p.chunk_sizes]


def _answers08(p, on_cuda):
    """Exercises 8.2 and 8.3: chapter 8's protocol for Performer over its lengths and for GMA over its K (one timed
    call each, with a warm-up and the peak), and GMA at K = 256 and twice the K sweep's length."""
    sizes = dict(d_model=p.d_model, n_heads=p.n_heads, batch_size=p.batch_size, on_cuda=on_cuda)
    points = [Point(f"performer N={n}", block_work("performer", seq_len=n, n_features=p.n_features, **sizes) * 3)
              for n in p.seq_lens]
    points += [Point(f"gma K={k}", block_work("gma", seq_len=p.k_sweep_len, n_components=k, **sizes) * 3)
               for k in p.k_values]
    return points + [Point("gma K=256 at 2N", block_work("gma", seq_len=2 * p.k_sweep_len, n_components=256,
                                                         **sizes) * 3)]


def _answers10(p, on_cuda):
    """Exercise 10.2: one LM a value of :data:`ANSWER_10_KS` at ``exercise_lm``'s sizes on chapter 10's data (tokenized
    there), each evaluated once more by the checker."""
    q = preset_sizes("lm", p.live_scale, **p.exercise_lm)
    tokenize, *runs = lm_points(q, [(f"lm gma K={k}", "gma", k) for k in ANSWER_10_KS], on_cuda)
    tokenize.cached = True
    val_tokens = q.max_val_tokens or LM_VAL_TOKENS.get(q.source, 250_000)
    checks = [training_work(n_steps=0, batch_size=q.batch_size, seq_len=q.seq_len, d_model=q.d_model,
                            n_layers=q.n_layers, d_ff=q.d_ff, n_heads=q.n_heads, mixer="gma",
                            vocab_size=LM_VOCAB.get(q.source, 50_257), n_eval_tokens=val_tokens, n_components=k)
              for k in ANSWER_10_KS]
    return [tokenize, *runs, Point("the checker's evaluations", sum(checks, Work()), amp=on_cuda)]


def _page(name, sized=None):
    """A page's points: its sized work (``sized(p, on_cuda)``, if any) and its fixed-size work of
    :data:`PAGE_SECONDS`."""
    def points(p, on_cuda):
        fixed = Point("checkers, records and figures", Work(seconds=PAGE_SECONDS[name]), on="host")
        return [*(sized(p, on_cuda) if sized is not None else []), fixed]
    return points


SIZED_WORK = {"answers01": _answers01, "answers05": _answers05, "answers06": _answers06, "answers08": _answers08,
              "answers10": _answers10}
PAGES = {name: _page(name, SIZED_WORK.get(name)) for name in PAGE_SECONDS}
