"""The kernels' checks hold under the precision a GPU uses, emulated on a CPU (no GPU and no Triton needed).

On sm_80 and newer GPUs, ``tl.dot`` on float32 tiles rounds its operands to TF32 (10 explicit mantissa bits) unless
told otherwise; Triton's interpreter ignores that, so CPU runs never see it. Here every GEMM of the GEMM form of GMA
(the logits on ``[x*x, x]``, the write ``Γ^K^T V``, the read ``Γ^Q memory``, the in-chunk ``Γ^Q Γ^K^T``, and in the
backward every product of autograd) runs on operands rounded to TF32 (round to nearest even, and truncated, the
worse case), with float32 accumulation, at the sizes of chapters 7 and 7b (every scale) and of
``tests/test_kernels_gpu.py``. The results are compared with float64 (:func:`gma_teach.gma`, ``impl="naive"``) and
must stay within :func:`gma_teach.kernels.tolerance` of the precision in force; chapter 7's old ``atol=1e-5`` must
fail under one-pass TF32, which is why the tolerance follows the precision.
"""
import pytest
import torch

import gma_teach
from gma_teach import kernels
from gma_teach.gmm import gemm_coefficients

OLD_ATOL = 1e-5  # chapter 7's check before the tolerance followed the precision
ROUNDINGS = ("nearest", "truncate")


def round_tf32(t: torch.Tensor, rounding: str = "nearest") -> torch.Tensor:
    """float32 ``t`` rounded to TF32 (the 13 low mantissa bits cleared), returned as float32: to nearest with ties
    to even, or truncated toward zero."""
    bits = t.float().contiguous().view(torch.int32)
    if rounding == "nearest":
        bits = bits + 0xFFF + ((bits >> 13) & 1)
    return (bits & -0x2000).view(torch.float32)


def tf32_matmul(a, b, precision, rounding):
    """``a @ b`` with float32 accumulation on operands rounded as ``tl.dot(input_precision=precision)`` does."""
    if precision == "ieee":
        return a @ b
    a_high, b_high = round_tf32(a, rounding), round_tf32(b, rounding)
    product = a_high @ b_high
    if precision == "tf32x3":  # the two cross terms of the split operands, then the main one
        a_low, b_low = round_tf32(a - a_high, rounding), round_tf32(b - b_high, rounding)
        product = (a_low @ b_high + a_high @ b_low) + product
    return product


class EmulatedMatmul(torch.autograd.Function):
    """:func:`tf32_matmul` whose backward products are rounded the same way."""

    @staticmethod
    def forward(ctx, a, b, precision, rounding):
        ctx.save_for_backward(a, b)
        ctx.precision, ctx.rounding = precision, rounding
        return tf32_matmul(a, b, precision, rounding)

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return (tf32_matmul(grad, b.transpose(-1, -2), ctx.precision, ctx.rounding),
                tf32_matmul(a.transpose(-1, -2), grad, ctx.precision, ctx.rounding), None, None)


def responsibilities(x, means, variances, log_priors, precision, rounding):
    """The kernels' responsibilities (B, H, N, K): the GEMM form's logits, then a float32 softmax."""
    weight, bias = gemm_coefficients(means, variances, log_priors)  # (H, K, 2 d): [w_sq, w_lin]
    d = x.shape[-1]
    x, weight, bias = x.float(), weight.float().transpose(-1, -2).expand(*x.shape[:2], -1, -1), bias.float()
    logits = (EmulatedMatmul.apply(x * x, weight[..., :d, :], precision, rounding)
              + EmulatedMatmul.apply(x, weight[..., d:, :], precision, rounding))
    return torch.softmax(logits + bias[:, None, :], -1)


def emulated_gma(q, k, v, means, variances, log_priors, *, causal, chunk=64, logit_precision, precision,
                 rounding, eps=1e-6):
    """GMA as the kernels compute it, (B, H, N, d_v) in float32: the responsibilities at ``logit_precision``, the
    memory write and read (and, causal, chunks of ``chunk`` tokens with a carried state and a masked in-chunk
    block) at ``precision``; every normalizer is a float32 sum, as in the kernels."""
    def mm(a, b):
        return EmulatedMatmul.apply(a, b, precision, rounding)

    gamma_q = responsibilities(q, means, variances, log_priors, logit_precision, rounding)
    gamma_k = responsibilities(k, means, variances, log_priors, logit_precision, rounding)
    v = v.float()
    if not causal:
        memory, normalizer = mm(gamma_k.transpose(-1, -2), v), gamma_k.sum(-2)
        return mm(gamma_q, memory) / ((gamma_q * normalizer[..., None, :]).sum(-1, keepdim=True) + eps)
    outputs, memory, normalizer = [], 0.0, 0.0
    for start in range(0, q.shape[-2], chunk):
        g_q, g_k, v_c = (t[..., start:start + chunk, :] for t in (gamma_q, gamma_k, v))
        affinity = mm(g_q, g_k.transpose(-1, -2)).tril()
        numerator = affinity.new_zeros(*g_q.shape[:-1], v.shape[-1]) if start == 0 else mm(g_q, memory)
        denominator = (g_q * normalizer[..., None, :]).sum(-1) if start else 0.0
        outputs.append((numerator + mm(affinity, v_c)) / (denominator + affinity.sum(-1) + eps)[..., None])
        memory = memory + mm(g_k.transpose(-1, -2), v_c)
        normalizer = normalizer + g_k.sum(-2)
    return torch.cat(outputs, -2)


def mixture(heads, n_components, d, generator, mean_scale=1.0):
    means = mean_scale * torch.randn(heads, n_components, d, generator=generator, dtype=torch.float64)
    variances = 0.3 + 1.7 * torch.rand(heads, n_components, d, generator=generator, dtype=torch.float64)
    log_priors = torch.log_softmax(torch.randn(heads, n_components, generator=generator, dtype=torch.float64), -1)
    return means, variances, log_priors


def test_round_tf32_keeps_10_mantissa_bits_to_nearest_even():
    one_ulp = 2.0 ** -10  # TF32's spacing just above 1
    values = torch.tensor([1.0, 1 + one_ulp / 2, 1 + 1.5 * one_ulp, 1 + one_ulp / 2 + 2.0 ** -20, -(1 + 0.75 * one_ulp),
                           3.0e-3], dtype=torch.float32)
    nearest = round_tf32(values).tolist()
    assert nearest[:5] == [1.0, 1.0, 1 + 2 * one_ulp, 1 + one_ulp, -(1 + one_ulp)]  # ties to even, then nearest
    assert round_tf32(values, "truncate").tolist()[:5] == [1.0, 1.0, 1 + one_ulp, 1.0, -1.0]
    assert abs(nearest[5] - 3.0e-3) <= 3.0e-3 * 2.0 ** -11 and nearest[5] != 3.0e-3
    torch.testing.assert_close(round_tf32(round_tf32(values)), round_tf32(values), rtol=0, atol=0)


def test_the_tolerance_follows_the_precision_in_force(monkeypatch):
    assert kernels.dot_precision("cpu") == kernels.dot_precision("cpu", "tf32") == "ieee"  # the interpreter
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 0))
    assert kernels.dot_precision("cuda") == "tf32" and kernels.dot_precision("cuda", "tf32x3") == "tf32x3"
    monkeypatch.setenv("TRITON_F32_DEFAULT", "ieee")
    assert kernels.dot_precision("cuda") == "ieee"
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 5))
    assert kernels.dot_precision("cuda", "tf32") == "ieee"  # a T4 has no TF32
    assert kernels.tolerance("tf32") > 100 * kernels.tolerance("tf32x3") == 100 * kernels.tolerance("ieee")
    assert kernels.tolerance("ieee", torch.bfloat16) > kernels.tolerance("ieee", torch.float16) > kernels.tolerance(
        "ieee")
    with pytest.raises(ValueError, match="input_precision must be None or one of"):
        kernels.dot_precision("cpu", "fp64")
    with pytest.raises(ValueError, match="precision must be one of"):
        kernels.tolerance("bf16")


CHAPTER_7_DEMOS = {scale: gma_teach.preset("ch07", scale).demo for scale in ("tiny", "small", "medium", "full")}


@pytest.mark.parametrize("rounding", ROUNDINGS)
@pytest.mark.parametrize("scale", ["tiny", "small", "full"])
def test_chapter_7_responsibility_checks_hold_under_one_pass_tf32(scale, rounding):
    """Chapter 7's kernel (rung 4) uses tl.dot's default: one-pass TF32 on sm_80+. Its checks against float64,
    against the package's kernel (tf32x3) and of the rows' sums hold at tolerance('tf32'); the old 1e-5 fails."""
    demo = CHAPTER_7_DEMOS[scale]
    generator = torch.Generator().manual_seed(7)
    means, variances, log_priors = mixture(demo["n_heads"], demo["n_components"], demo["d_route"], generator)
    x = torch.randn(demo["batch_size"], demo["n_heads"], demo["n_tokens"], demo["d_route"], generator=generator)
    reference = gma_teach.responsibilities(x.double(), means, variances, log_priors)
    mine = responsibilities(x, means, variances, log_priors, "tf32", rounding)
    packaged = responsibilities(x, means, variances, log_priors, "tf32x3", rounding)
    atol = kernels.tolerance("tf32")
    error = (mine.double() - reference).abs().max().item()
    assert OLD_ATOL < error < atol / 3, error  # the old check fails; the new one holds with a margin of 3
    assert (mine - packaged).abs().max().item() < atol / 3
    assert (mine.sum(-1) - 1).abs().max().item() < atol
    tokens, table = torch.randn(50, 12, generator=generator), torch.randn(7, 12, generator=generator)  # rung 3
    logits_error = (tf32_matmul(tokens, table.T, "tf32", rounding).double() - tokens.double() @ table.double().T)
    assert OLD_ATOL < logits_error.abs().max().item() < atol / 3


def _errors(inputs, causal, chunk, logit_precision, precision, rounding, dtype=torch.float32):
    """Largest error of the output and of each gradient (divided by its largest entry, floored at 1) of the
    emulated kernels against float64, on inputs stored in ``dtype`` (outputs and gradients rounded to it)."""
    q, k, v, means, variances, log_priors = inputs
    q, k, v = (t.to(dtype).float().requires_grad_() for t in (q, k, v))
    mixture32 = [t.float().requires_grad_() for t in (means, variances, log_priors)]  # as the kernels get them
    mixture64 = [t.detach().double().requires_grad_() for t in mixture32]
    out = emulated_gma(q, k, v, *mixture32, causal=causal, chunk=chunk, logit_precision=logit_precision,
                       precision=precision, rounding=rounding)
    inputs64 = [t.detach().double().requires_grad_() for t in (q, k, v)] + mixture64
    out64 = gma_teach.gma(*inputs64, causal=causal, impl="naive")
    d_out = torch.randn(out64.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    grads = torch.autograd.grad(out.to(dtype).float(), [q, k, v, *mixture32], d_out.float())
    grads64 = torch.autograd.grad(out64, inputs64, d_out)
    errors = [(out.to(dtype).double() - out64).abs().max().item()]
    for index, (grad, grad64) in enumerate(zip(grads, grads64)):
        grad = grad.to(dtype) if index < 3 else grad
        errors.append(((grad.double() - grad64).abs().max() / grad64.abs().max().clamp_min(1)).item())
    return errors


def _inputs(batch, heads, n_q, n_k, d, d_v, n_components, seed, mean_scale=1.0):
    generator = torch.Generator().manual_seed(seed)
    tensors = [torch.randn(batch, heads, n, width, generator=generator, dtype=torch.float64)
               for n, width in ((n_q, d), (n_k, d), (n_k, d_v))]
    return tensors + list(mixture(heads, n_components, d, generator, mean_scale))


CHAPTER_7B_CASES = sorted({case for scale in ("tiny", "small", "full")
                           for case in gma_teach.preset("ch07", scale).cases})


@pytest.mark.parametrize("case", CHAPTER_7B_CASES)
def test_chapter_7b_kernel_checks_hold_at_the_kernels_precision(case):
    """Chapter 7b's checks of the package's kernels (float32 inputs: tf32x3 for every product on sm_80+) hold at
    tolerance('tf32x3'), output and every gradient, as they do in IEEE float32; one-pass TF32 would not."""
    n_q, n_k, d, d_v, n_components, causal = case
    inputs = _inputs(1, 2, n_q, n_k, d, d_v, n_components, seed=n_q + n_components)
    atol = kernels.tolerance("tf32x3")
    for precision in ("tf32x3", "ieee"):
        errors = _errors(inputs, causal, 64, precision, precision, "nearest")
        assert max(errors) < atol / 3, (precision, errors)
    if n_q * n_k > 1000:
        one_pass = _errors(inputs, causal, 64, "tf32", "tf32", "nearest")
        assert max(one_pass) > atol, one_pass


GPU_CASES = [  # tests/test_kernels_gpu.py: batch, heads, n_q, n_k, d, d_v, K, causal, chunk
    (2, 4, 1000, 1000, 64, 64, 128, False, 64),
    (1, 2, 333, 1777, 32, 48, 40, False, 64),
    (2, 4, 1000, 1000, 64, 64, 128, True, 64),
    (1, 2, 777, 777, 48, 40, 100, True, 32),
]


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("case", GPU_CASES)
def test_gpu_test_tolerances_hold_at_the_kernels_precision(case, dtype):
    """tests/test_kernels_gpu.py's checks at its sizes, as the kernels compute on sm_80+: tf32x3 logits, and the
    other products tf32x3 (float32 inputs) or one-pass tf32 (half inputs), truncated (the worse rounding)."""
    *sizes, causal, chunk = case
    inputs = _inputs(*sizes, seed=sum(sizes), mean_scale=0.5)
    precision = "tf32x3" if dtype == torch.float32 else "tf32"
    errors = _errors(inputs, causal, chunk, "tf32x3", precision, "truncate", dtype)
    assert max(errors) < kernels.tolerance("tf32x3", dtype) / 2, errors


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("causal, n_components, width", [(False, 256, 64), (True, 256, 64), (False, 512, 128),
                                                         (True, 512, 128)])
def test_gpu_test_tolerances_hold_for_many_components_and_wide_heads(causal, n_components, width, dtype):
    """tests/test_kernels_gpu.py's largest sizes (K up to 512, d_r = d_v = 128, half inputs, chunks of 128)."""
    inputs = _inputs(1, 2, 513, 513, width, width, n_components, seed=n_components + width, mean_scale=0.5)
    errors = _errors(inputs, causal, 128, "tf32x3", "tf32", "truncate", dtype)
    assert max(errors) < kernels.tolerance("tf32x3", dtype) / 2, errors


@pytest.mark.slow
def test_gpu_test_tolerance_holds_for_one_long_sequence():
    """tests/test_kernels_gpu.py compares the kernels with the chunked torch form in float32 over 16384 tokens at
    twice the tolerance: each side stays within one tolerance of float64."""
    q, k, v, means, variances, log_priors = _inputs(1, 2, 16384, 16384, 64, 64, 128, seed=16384, mean_scale=0.5)
    mixture32 = [t.float() for t in (means, variances, log_priors)]
    q, k, v = (t.float() for t in (q, k, v))
    exact = gma_teach.gma(q.double(), k.double(), v.double(), *(t.double() for t in mixture32), causal=True,
                          impl="chunked")
    with torch.no_grad():
        emulated = emulated_gma(q, k, v, *mixture32, causal=True, logit_precision="tf32x3", precision="tf32x3",
                                rounding="truncate")
    torch_float32 = gma_teach.gma(q, k, v, *mixture32, causal=True, impl="chunked")
    atol = kernels.tolerance("tf32x3")
    assert (emulated.double() - exact).abs().max().item() < atol / 2
    assert (torch_float32.double() - exact).abs().max().item() < atol / 2


def test_chapter_7_normalizer_checker_passes_a_right_kernel_under_tf32(monkeypatch):
    """Exercise 7.3's checker accepts a right answer computed in one-pass TF32 (tl.dot's default on sm_80+); with
    the float32 tolerance it would reject it."""
    from gma_teach.exercises import ExerciseError, ch07

    def normalizer(k, means, variances, log_priors):
        return responsibilities(k, means, variances, log_priors, "tf32", "truncate").sum(-2)

    with pytest.raises(ExerciseError):  # on this CPU tl.dot is IEEE float32: TF32's errors are too large
        ch07.check_normalizer_kernel(normalizer)
    monkeypatch.setattr(kernels, "dot_precision", lambda device, input_precision=None: "tf32")  # an sm_80+ GPU
    ch07.check_normalizer_kernel(normalizer)
