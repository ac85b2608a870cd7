"""The Triton kernels' workloads (chapters 7 and 7b): the compiled kernels do the linear form's work on a GPU, while
Triton's interpreter on a CPU costs a fixed time per launch and per block step of a program, whatever the FLOPs.
The constants' docstrings are in the package's ``__init__``, where the API page reads them.
"""
from __future__ import annotations

import math

from ._devices import FLOAT32
from ._work import Point, Work, attention_work

# Triton's interpreter (a CPU without a GPU) runs every program of a launch in Python on numpy tiles, so its time is
# set by how many (row block x K tile) steps the programs take and how many launches there are, not by the FLOPs
# (on these sizes a FLOP count times a constant factor misses by 20 to 200 times). Fitted (least squares on the ratio)
# to 14 calls of gma_teach.kernels.gma_triton timed on one core (B=1, H=1-2, N=17-1024, d=5-64, K=3-128, causal or
# not, forward or forward + backward; six of them chapter 7b's timing cell at small): every one within a factor 1.5
# of the model (forward-only calls run faster than it says).
INTERPRETED_SECONDS_PER_BLOCK = 0.0125  # one (rows x K tile) block step of one program
INTERPRETED_SECONDS_PER_LAUNCH = 0.003  # one launch, beyond its block steps
INTERPRETED_CAUSAL_FACTOR = 1.5  # a causal block step against a bidirectional one
INTERPRETED_ROWS = 64  # rows per block and longest causal chunk
TRITON_COMPILE_SECONDS = 1.0  # one kernel specialization compiled on a GPU
TRITON_KERNELS_PER_DIRECTION = 11  # kernels a forward + backward compiles, one direction


def _tile(size: int) -> int:
    return max(16, 1 << max(0, size - 1).bit_length())  # the kernels' padded tile: a power of two, at least 16


def triton_gma_launches(batch_size: int, n_heads: int, n_q: int, n_k: int, n_components: int, *, causal: bool,
                        backward: bool, chunk_size: int | None = None) -> tuple[int, int]:
    """``(launches, block steps)`` of one :func:`gma_teach.kernels.gma_triton` call as interpreted on a CPU.

    A block step is one program's pass over one block of rows (``INTERPRETED_ROWS``, or the causal chunk) and one K
    tile: the forward computes the queries' and keys' log-normalizers, the keys' states and the output (four
    passes over the tokens), the backward recomputes the states of both sides and runs the query, key and two
    mixture-gradient kernels (six more, and a seventh for the causal in-chunk term of the queries).
    """
    rows = min(chunk_size or INTERPRETED_ROWS, INTERPRETED_ROWS) if causal else INTERPRETED_ROWS
    k_tiles = math.ceil(n_components / min(INTERPRETED_ROWS, _tile(n_components)))
    q_blocks, k_blocks = math.ceil(n_q / rows), math.ceil(n_k / rows)
    b_h = batch_size * n_heads
    launches, passes = 5, 2 * q_blocks + 2 * k_blocks  # log-normalizers (2), state, carry, output
    if backward:
        launches += 8 + int(causal)  # states (2), carries (2), query (+ in chunk), key, mixture (2)
        passes += 3 * q_blocks + 3 * k_blocks + int(causal) * q_blocks
    return launches, b_h * k_tiles * passes


def triton_gma_work(batch_size: int, n_heads: int, n_q: int, n_k: int, d_route: int, d_value: int,
                    n_components: int, *, causal: bool, backward: bool, on_cuda: bool,
                    chunk_size: int | None = None) -> Work:
    """One :func:`gma_teach.kernels.gma_triton` call: on a GPU the compiled kernels do the linear form's work
    (:func:`attention_work`) reading each input once; on a CPU the interpreter's time is counted per launch and
    per block step (:func:`triton_gma_launches`), as directly timed work."""
    linear = attention_work("gma_linear", batch_size, n_heads, max(n_q, n_k), d_route, d_value, n_components,
                            backward=backward)
    if on_cuda:
        launches = triton_gma_launches(batch_size, n_heads, n_q, n_k, n_components, causal=causal,
                                       backward=backward, chunk_size=chunk_size)[0]
        return Work(linear.flops, linear.bytes / 4, launches, linear.peak / 4)
    launches, blocks = triton_gma_launches(batch_size, n_heads, n_q, n_k, n_components, causal=causal,
                                           backward=backward, chunk_size=chunk_size)
    block_seconds = INTERPRETED_SECONDS_PER_BLOCK * (INTERPRETED_CAUSAL_FACTOR if causal else 1.0)
    return Work(0.0, 0.0, 10 * launches, linear.peak / 4,
                seconds=launches * INTERPRETED_SECONDS_PER_LAUNCH + blocks * block_seconds)


def ch07(p, on_cuda):
    # The chapter's own kernels are toys: a vector, a 37 x 5 matrix, 50 x 7 logits (a few programs each), then
    # its responsibility kernel and the package's on the demo sizes (one K tile of all components per program).
    d = p.demo
    b_h, n, k = d["batch_size"] * d["n_heads"], d["n_tokens"], d["n_components"]
    toys = math.ceil(p.vector_len / p.vector_block) + math.ceil(37 / 16) + math.ceil(50 / 16)
    mine = b_h * math.ceil(n / 32)  # my_responsibilities: blocks of 32 rows
    package = 2 * b_h * math.ceil(n / INTERPRETED_ROWS) * math.ceil(k / min(INTERPRETED_ROWS, _tile(k)))
    blocks, launches = toys + mine + package, 6
    if on_cuda:
        work = Work(4 * b_h * n * k * d["d_route"], FLOAT32 * b_h * n * (d["d_route"] + k) * 3, launches,
                    FLOAT32 * b_h * n * k)
        return [Point("toy kernels and the demo responsibilities", work), Point(
            "compile", Work(seconds=launches * TRITON_COMPILE_SECONDS), on="host")]
    seconds = launches * INTERPRETED_SECONDS_PER_LAUNCH + blocks * INTERPRETED_SECONDS_PER_BLOCK
    return [Point("toy kernels and the demo responsibilities", Work(0, 0, 100, FLOAT32 * b_h * n * k,
                                                                  seconds=seconds))]


def ch07b(p, on_cuda):
    """Chapter 7b reads chapter 7's preset: the demo (a forward, two causal forwards), the cases against the float64
    spec (each forward + backward, with two heads; the first two twice), the precision table and the timing."""
    d = p.demo
    demo_sizes = (d["batch_size"], d["n_heads"], d["n_tokens"], d["n_tokens"], d["d_route"], d["d_value"],
                  d["n_components"])
    demo = triton_gma_work(*demo_sizes, causal=False, backward=False, on_cuda=on_cuda)
    demo += triton_gma_work(*demo_sizes, causal=True, backward=False, on_cuda=on_cuda,
                            chunk_size=d["chunk_size"]) * 2
    points = [Point("demo: forward, causal forward twice", demo)]
    for i, (n_q, n_k, d_route, d_value, k, causal) in enumerate(p.cases):
        heads, calls = 2, 2 if i < 2 else 1  # max_errors' two heads; the first two cases print again
        kernel = triton_gma_work(1, heads, n_q, n_k, d_route, d_value, k, causal=causal, backward=True,
                                 on_cuda=on_cuda)
        spec = attention_work("gma_naive_causal" if causal else "gma_naive", 1, heads, max(n_q, n_k), d_route,
                              d_value, k, backward=True)  # float64 on the host: twice float32's bytes
        points.append(Point(f"case {n_q}x{n_k} K={k}", kernel * calls))
        points.append(Point(f"case {n_q}x{n_k} K={k}: float64 spec", Work(spec.flops * 2, spec.bytes * 2,
                                                                          spec.ops, spec.peak * 2) * calls,
                            on="host"))
    q = p.precision
    exact = Work(2 * 2 * q["n_tokens"] * q["n_components"] * 2 * q["d_route"] + 30 * q["n_tokens"]
                 * q["n_components"], 8 * 6 * q["n_tokens"] * q["n_components"], 30)
    rows = Work(6 * 2 * q["n_tokens"] * q["n_components"] * 2 * q["d_route"] + 60 * q["n_tokens"]
                * q["n_components"], 4 * 12 * q["n_tokens"] * q["n_components"], 60)  # six rows, splits thrice
    points.append(Point("precision table", (exact + rows) * 3, on="host"))
    t = p.timing
    sizes = (t["batch_size"], t["n_heads"])
    for n in t["seq_lens"]:
        calls = 1 + t["repeat"]  # compare_timings: one warm-up call, then the repeats
        for causal, form in ((False, "gma_linear"), (True, "gma_chunked")):
            kernel = triton_gma_work(*sizes, n, n, t["d_route"], t["d_value"], t["n_components"], causal=causal,
                                     backward=True, on_cuda=on_cuda)
            torch_form = attention_work(form, *sizes, n, t["d_route"], t["d_value"], t["n_components"],
                                        backward=True)
            points.append(Point(f"timing {'causal' if causal else 'bidirectional'} N={n}",
                                (kernel + torch_form) * calls, single_thread=True))
    if on_cuda:  # each new set of tiles compiles a direction's kernels anew
        calls = [(d["d_route"], d["d_value"], d["n_components"], causal) for causal in (False, True)]
        calls += [case[2:] for case in p.cases]
        calls += [(t["d_route"], t["d_value"], t["n_components"], causal) for causal in (False, True)]
        tiles = {(_tile(d_route), _tile(d_value), min(INTERPRETED_ROWS, _tile(k)), causal)
                 for d_route, d_value, k, causal in calls}
        points.append(Point("compile the kernels", Work(seconds=len(tiles) * TRITON_KERNELS_PER_DIRECTION
                                                        * TRITON_COMPILE_SECONDS), on="host"))
    return points
