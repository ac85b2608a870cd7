"""Chapters 7-8 exercise checkers: each accepts a correct solution, rejects typical mistakes naming them, and reports
a stub as not attempted; chapter 7's cell skipper makes cells marked as needing Triton print a note instead."""
import numpy as np
import pytest
import torch

from gma_teach import kernels  # first: without CUDA it turns Triton's interpreter on
from gma_teach.exercises import ExerciseError, NotAttempted, ch07, ch08

HAVE_TRITON = kernels.is_available()
needs_triton = pytest.mark.skipif(not HAVE_TRITON, reason=f"Triton unavailable: {kernels.triton_status()}")

if HAVE_TRITON:
    import triton
    import triton.language as tl

    @triton.jit
    def _softmax_rows(x_ptr, y_ptr, M, K, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr, PAD: tl.constexpr):
        rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = tl.arange(0, BLOCK_K)
        mask = (rows[:, None] < M) & (cols[None, :] < K)
        x = tl.load(x_ptr + rows[:, None] * K + cols[None, :], mask=mask, other=PAD)
        x = tl.where(rows[:, None] < M, x, 0.0)
        p = tl.exp(x - tl.max(x, axis=1)[:, None])
        tl.store(y_ptr + rows[:, None] * K + cols[None, :], p / tl.sum(p, axis=1)[:, None], mask=mask)

    @triton.jit
    def _matmul(a_ptr, b_ptr, c_ptr, M, L, P, BLOCK: tl.constexpr, STEPS: tl.constexpr):
        rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        inner = tl.arange(0, BLOCK)
        acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
        for step in range(STEPS):
            at = step * BLOCK + inner
            a = tl.load(a_ptr + rows[:, None] * L + at[None, :], mask=(rows[:, None] < M) & (at[None, :] < L),
                        other=0.0)
            b = tl.load(b_ptr + at[:, None] * P + cols[None, :], mask=(at[:, None] < L) & (cols[None, :] < P),
                        other=0.0)
            acc += tl.dot(a, b)
        tl.store(c_ptr + rows[:, None] * P + cols[None, :], acc, mask=(rows[:, None] < M) & (cols[None, :] < P))


def masked_softmax(logits, pad=float("-inf")):
    rows, columns = logits.shape
    out = torch.empty_like(logits)
    _softmax_rows[(triton.cdiv(rows, 16),)](logits.contiguous(), out, rows, columns, BLOCK_M=16,
                                            BLOCK_K=max(16, triton.next_power_of_2(columns)), PAD=pad)
    return out


def matmul(a, b, *, first_block_only=False):
    m, inner = a.shape
    p = b.shape[1]
    c = torch.empty(m, p, device=a.device)
    steps = 1 if first_block_only else triton.cdiv(inner, 16)
    _matmul[(triton.cdiv(m, 16), triton.cdiv(p, 16))](a.contiguous(), b.contiguous(), c, m, inner, p, BLOCK=16,
                                                       STEPS=steps)
    return c


def stub(*args):
    raise NotImplementedError("Exercise")


# ----------------------------------------------------------------------------------------------- chapter 7
@needs_triton
def test_check_masked_softmax_accepts_the_masked_kernel(capsys):
    ch07.check_masked_softmax(masked_softmax)
    assert capsys.readouterr().out.startswith("Exercise 7.1: correct -- tails in both directions")


@needs_triton
def test_check_masked_softmax_names_padding_that_wins():
    with pytest.raises(ExerciseError, match=r"^Exercise 7.1: correct for a 32 x 16 block but wrong .* -inf"):
        ch07.check_masked_softmax(lambda logits: masked_softmax(logits, pad=0.0))


def test_check_masked_softmax_names_overflow():
    with pytest.raises(ExerciseError, match="subtract each row's maximum"):
        ch07.check_masked_softmax(lambda logits: torch.exp(logits) / torch.exp(logits).sum(-1, keepdim=True))


@needs_triton
def test_check_matmul_kernel_accepts_the_tiled_kernel(capsys):
    ch07.check_matmul_kernel(matmul)
    assert capsys.readouterr().out.startswith("Exercise 7.2: correct -- every tile")


@needs_triton
def test_check_matmul_kernel_names_a_missing_inner_loop():
    with pytest.raises(ExerciseError, match="first 16 columns .* loop over the inner dimension"):
        ch07.check_matmul_kernel(lambda a, b: matmul(a, b, first_block_only=True))


def test_check_matmul_kernel_names_unmasked_edges():
    def whole_tiles_only(a, b):  # right where the sizes are multiples of 32, zero beyond the last whole tile
        out = torch.zeros(a.shape[0], b.shape[1])
        m, inner, p = (size - size % 32 for size in (a.shape[0], a.shape[1], b.shape[1]))
        out[:m, :p] = a[:m, :inner] @ b[:inner, :p]
        return out

    with pytest.raises(ExerciseError, match="Exercise 7.2: correct for 32 x 32 x 32 but wrong .* load zeros"):
        ch07.check_matmul_kernel(whole_tiles_only)


def normalizer(k, means, variances, log_priors):
    return torch.softmax(torch.stack([
        -0.5 * (((k[:, h, :, None, :] - means[h]) ** 2 / variances[h]) + variances[h].log()).sum(-1)
        + log_priors[h] for h in range(k.shape[1])], 1), -1).sum(-2)


def test_check_normalizer_kernel_accepts_a_correct_normalizer(capsys):
    ch07.check_normalizer_kernel(normalizer)
    assert capsys.readouterr().out.startswith("Exercise 7.3: correct -- including a tail block")


def test_check_normalizer_kernel_names_a_tail_that_adds_padding():
    def padded_tail(k, means, variances, log_priors):  # the last block's padding rows counted as tokens at 0
        block = 64
        padded = torch.zeros(*k.shape[:2], -(-k.shape[2] // block) * block, k.shape[3])
        padded[:, :, :k.shape[2]] = k
        return normalizer(padded, means, variances, log_priors)

    with pytest.raises(ExerciseError, match="Exercise 7.3: correct for N=64 but wrong for N=37 .* rows >= N"):
        ch07.check_normalizer_kernel(padded_tail)


def test_check_softmax_backward_accepts_and_names_the_missing_coupling(capsys):
    ch07.check_softmax_backward(lambda g, dg: g * (dg - (g * dg).sum(-1, keepdim=True)))
    assert capsys.readouterr().out.startswith("Exercise 7.4: correct -- d_logits")
    with pytest.raises(ExerciseError, match="Exercise 7.4: that is gamma \\* d_gamma"):
        ch07.check_softmax_backward(lambda g, dg: g * dg)


def causal_memory_bound_below(profile, element_bytes, chunk, *, clamp=True, chunk_flops=True, fixed=True):
    """Exercise 7.5's answer in chapter 7b's model (d_r = d_v = 64), and three slips (clamp, chunk_flops, fixed)."""
    if profile["tf32"] is None:
        logit_peak = other_peak = profile["fp32"]
    else:
        logit_peak, other_peak = profile["tf32"] / 3, profile["tf32"] / (1 if element_bytes == 2 else 3)
    memory_seconds = 256 * element_bytes / profile["bandwidth"]  # read q, k, v and write o: (2*64 + 2*64) elements
    seconds_per_component = 512 / logit_peak + 256 / other_peak + (2 * chunk / other_peak if chunk_flops else 0)
    fixed_seconds = 2 * chunk * 64 / other_peak if chunk_flops and fixed else 0.0
    k = (memory_seconds - fixed_seconds) / seconds_per_component
    return max(0.0, k) if clamp else k


def test_check_causal_memory_bound_accepts_the_model_and_names_three_slips(capsys):
    ch07.check_causal_memory_bound(causal_memory_bound_below)
    assert capsys.readouterr().out.startswith("Exercise 7.5: correct -- the in-chunk products add work")
    with pytest.raises(ExerciseError, match="Exercise 7.5: .* bidirectional forward's K: add the in-chunk"):
        ch07.check_causal_memory_bound(lambda *a: causal_memory_bound_below(*a, chunk_flops=False))
    with pytest.raises(ExerciseError, match="a part that does not grow with K, 2 C d_v"):
        ch07.check_causal_memory_bound(lambda *a: causal_memory_bound_below(*a, fixed=False))
    with pytest.raises(ExerciseError, match="compute-bound at every K; return 0"):
        ch07.check_causal_memory_bound(lambda *a: causal_memory_bound_below(*a, clamp=False))
    with pytest.raises(ExerciseError, match="stops being memory-bound at K = 27.77, you return 28.77"):
        ch07.check_causal_memory_bound(lambda *a: causal_memory_bound_below(*a) + 1)
    with pytest.raises(ExerciseError, match="return K as a finite number"):
        ch07.check_causal_memory_bound(lambda *a: "many")


@pytest.mark.parametrize("check, number", [(ch07.check_masked_softmax, "7.1"), (ch07.check_matmul_kernel, "7.2"),
                                           (ch07.check_normalizer_kernel, "7.3"),
                                           (ch07.check_softmax_backward, "7.4"),
                                           (ch07.check_causal_memory_bound, "7.5"),
                                           (ch08.check_softmax_memory_prediction, "8.1"),
                                           (ch08.check_loglog_slope, "8.2")])
def test_a_stub_is_not_attempted_and_fails_when_strict(check, number, capsys):
    assert check(stub) is None
    assert capsys.readouterr().out == (f"Exercise {number}: not attempted yet (fill in the cell above and run it "
                                       "again)\n")
    with pytest.raises(NotAttempted):
        check(stub, strict=True)


class _FakeShell:
    def __init__(self):
        self.input_transformers_cleanup = []


def test_skip_cells_without_triton_replaces_marked_cells_only(monkeypatch):
    import IPython

    shell = _FakeShell()
    monkeypatch.setattr(kernels, "is_available", lambda device=None: False)
    monkeypatch.setattr(IPython, "get_ipython", lambda: shell)
    assert ch07.skip_cells_without_triton() is False
    assert ch07.skip_cells_without_triton() is False  # idempotent: registered once
    (transform,) = shell.input_transformers_cleanup
    marked = ["\n", "# needs Triton: launches the kernel\n", "kernel[grid](x)\n"]
    (replacement,) = transform(marked)
    assert replacement.startswith("print(") and "skipped" in replacement and "kernel[grid]" not in replacement
    plain = ["x = 1  # needs Triton later\n", "print(x)\n"]
    assert transform(plain) == plain


def test_skip_cells_without_triton_changes_nothing_when_triton_runs(monkeypatch):
    import IPython

    shell = _FakeShell()
    monkeypatch.setattr(kernels, "is_available", lambda device=None: True)
    monkeypatch.setattr(IPython, "get_ipython", lambda: shell)
    assert ch07.skip_cells_without_triton() is True
    assert shell.input_transformers_cleanup == []


# ----------------------------------------------------------------------------------------------- chapter 8
def test_check_softmax_memory_prediction_accepts_two_matrices_and_rejects_one(capsys):
    ch08.check_softmax_memory_prediction(lambda b, h, n, e: 2 * b * h * n * n * e)
    assert capsys.readouterr().out.startswith("Exercise 8.1: correct -- the peak holds two")
    with pytest.raises(ExerciseError, match=r"Exercise 8.1: B=1, H=2, N=384: you predict .* = 1.00 N x N"):
        ch08.check_softmax_memory_prediction(lambda b, h, n, e: b * h * n * n * e)
    with pytest.raises(ExerciseError, match="return a positive number of bytes"):
        ch08.check_softmax_memory_prediction(lambda b, h, n, e: float("nan"))


def test_check_loglog_slope_accepts_least_squares_and_rejects_end_points(capsys):
    ch08.check_loglog_slope(lambda n, v: float(np.polyfit(np.log(n), np.log(v), 1)[0]))
    assert capsys.readouterr().out.startswith("Exercise 8.2: correct -- your slope is the least-squares fit")

    def end_points(sizes, values):
        return float(np.log(values[-1] / values[0]) / np.log(sizes[-1] / sizes[0]))

    with pytest.raises(ExerciseError, match="Exercise 8.2: for values ~ N\\^1.0 with noise .* use every point"):
        ch08.check_loglog_slope(end_points)
    with pytest.raises(ExerciseError, match="return the slope as a number"):
        ch08.check_loglog_slope(lambda n, v: "one")


# ---------------------------------------------------------------------------------------- chapter 8, Exercise 8.3
def line_through_the_sweep(k_sweep, sweep_len, seq_len, n_components):
    """The answer: memory = a + b K at sweep_len tokens, fitted by least squares, scaled by N."""
    ks = np.array(sorted(k_sweep), dtype=float)
    per_k, rest = np.polyfit(ks, np.array([k_sweep[k] for k in sorted(k_sweep)], dtype=float), 1)
    return float((rest + per_k * n_components) * seq_len / sweep_len)


def test_check_gma_memory_extrapolation_accepts_the_scaled_line(capsys):
    ch08.check_gma_memory_extrapolation(line_through_the_sweep, strict=True)
    assert "Exercise 8.3: correct" in capsys.readouterr().out


def test_check_gma_memory_extrapolation_names_a_prediction_not_scaled_with_n():
    def unscaled(k_sweep, sweep_len, seq_len, n_components):
        return line_through_the_sweep(k_sweep, sweep_len, sweep_len, n_components)

    with pytest.raises(ExerciseError, match=r"Exercise 8\.3: .*factor N / sweep_len"):
        ch08.check_gma_memory_extrapolation(unscaled)


def test_check_gma_memory_extrapolation_rejects_a_prediction_that_ignores_k():
    def without_k(k_sweep, sweep_len, seq_len, n_components):
        return line_through_the_sweep(k_sweep, sweep_len, seq_len, min(k_sweep))

    with pytest.raises(ExerciseError, match=r"Exercise 8\.3: N=\d+, K=\d+: you predict"):
        ch08.check_gma_memory_extrapolation(without_k)


def test_check_gma_memory_extrapolation_stub_and_bad_returns(capsys):
    ch08.check_gma_memory_extrapolation(stub)
    assert "Exercise 8.3: not attempted yet" in capsys.readouterr().out
    with pytest.raises(NotAttempted):
        ch08.check_gma_memory_extrapolation(stub, strict=True)
    with pytest.raises(ExerciseError, match="positive number of bytes"):
        ch08.check_gma_memory_extrapolation(lambda *args: float("nan"))
