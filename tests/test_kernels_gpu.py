"""The compiled Triton kernels on a CUDA GPU: larger sizes, bf16, torch.compile of a model. Skipped without CUDA.

Run with ``python -m pytest -m gpu tests/test_kernels_gpu.py``. The interpreter and the compiler can disagree
(triton issue #3738), so these checks are the ones that matter for the GPU path.
"""
import pytest
import torch
from test_kernels import EPS, NAMES, spec_gma

import gma_teach
from gma_teach import kernels
from gma_teach.gmm import random_gma_inputs

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
              pytest.mark.skipif(torch.cuda.is_available() and not kernels.is_available("cuda"),
                                 reason=f"compiled Triton unavailable: {kernels.triton_status()}")]

# fp32 and one half type: every (dtype, tile shape) pair costs a compilation of each kernel (seconds apiece).
HALF = torch.bfloat16 if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else torch.float16
DTYPES = [torch.float32, HALF]


def tolerance(dtype):
    """The tolerance of the precision in force: the kernels' logits run in tf32x3 on sm_80+ and in IEEE float32
    before (the same tolerance), their other products in one-pass TF32 for half inputs on sm_80+ (counted in the
    dtype's part). tests/test_tf32_tolerance.py emulates these cases on a CPU."""
    return kernels.tolerance(kernels.dot_precision("cuda", "tf32x3"), dtype)


def make_inputs(batch, heads, n_q, n_k, d, d_v, n_components, dtype):
    inputs = random_gma_inputs(batch, heads, n_q, n_k, d, d_v, n_components, dtype=dtype, spread=0.5, device="cuda")
    return [t.requires_grad_() for t in inputs]


def check_against_spec(inputs, causal, chunk_size=None):
    atol = tolerance(inputs[0].dtype)
    out = kernels.gma_triton(*inputs, causal=causal, eps=EPS, chunk_size=chunk_size)
    d_out = torch.randn_like(out, dtype=torch.float32)
    grads = torch.autograd.grad(out, inputs, d_out.to(out.dtype))
    inputs64 = [t.detach().double().requires_grad_() for t in inputs]
    out64 = spec_gma(*inputs64, causal)
    grads64 = torch.autograd.grad(out64, inputs64, d_out.double())
    assert out.dtype == inputs[2].dtype
    torch.testing.assert_close(out.double(), out64, atol=atol, rtol=atol)
    for name, grad, grad64 in zip(NAMES, grads, grads64):
        scale = max(grad64.abs().max().item(), 1.0)
        torch.testing.assert_close(grad.double(), grad64, atol=atol * scale, rtol=atol,
                                   msg=lambda m, name=name: f"{name}: {m}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch, heads, n_q, n_k, d, d_v, n_components, causal, chunk_size", [
    (2, 4, 1000, 1000, 64, 64, 128, False, None),
    (1, 2, 333, 1777, 32, 48, 40, False, None),     # cross-attention, odd sizes
    (2, 4, 1000, 1000, 64, 64, 128, True, None),
    (1, 2, 777, 777, 48, 40, 100, True, 32),
])
def test_forward_and_gradients_match_float64_spec(dtype, batch, heads, n_q, n_k, d, d_v, n_components, causal,
                                                  chunk_size):
    check_against_spec(make_inputs(batch, heads, n_q, n_k, d, d_v, n_components, dtype), causal, chunk_size)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("n_components, width", [(256, 64), (512, 128)])
def test_many_components_and_wide_heads(causal, n_components, width):
    """The paper's K=256 and the largest supported sizes run in the kernels on this GPU (K is tiled; no fallback)."""
    check_against_spec(make_inputs(1, 2, 513, 513, width, width, n_components, HALF), causal, 128)


def test_one_long_sequence_matches_the_chunked_torch_form():
    """A single long causal sequence (B*H = 2): the chunk passes are what fill the GPU."""
    q, k, v, means, variances, log_priors = [t.detach() for t in make_inputs(1, 2, 16384, 16384, 64, 64, 128,
                                                                             torch.float32)]
    out = kernels.gma_triton(q, k, v, means, variances, log_priors, causal=True, eps=EPS)
    expected = gma_teach.gma(q, k, v, means, variances, log_priors, causal=True, eps=EPS, impl="chunked")
    both = 2 * tolerance(torch.float32)  # each side within the tolerance of float64
    torch.testing.assert_close(out, expected, atol=both, rtol=both)


def test_the_shared_memory_count_matches_what_the_gpu_compiled():
    """kernels.shared_memory (Triton's allocator, run ahead of time) against the compiled kernels' own metadata."""
    major, minor = torch.cuda.get_device_capability()
    arch = 10 * major + minor
    inputs = make_inputs(1, 2, 300, 300, 64, 64, 128, torch.float32)
    kernels.gma_triton(*inputs, causal=True, eps=EPS).sum().backward()
    counted = kernels.shared_memory(arch, torch.float32, 128, 64, 64)
    from gma_teach.kernels import _triton_kernels

    compiled = [kernel.metadata.shared for cache in _triton_kernels.output_kernel.device_caches.values()
                for kernel in cache[0].values()]
    assert compiled and max(compiled) <= max(counted.values())
    assert max(counted.values()) <= kernels.SHARED_MEMORY_LIMITS.get(arch, 227 * 1024)


def test_causal_leakage_is_exactly_zero():
    q, k, v, means, variances, log_priors = make_inputs(2, 2, 700, 700, 64, 64, 128, torch.float32)
    t = 300
    out = kernels.gma_triton(q, k, v, means, variances, log_priors, causal=True, eps=EPS)
    future = [x.detach().clone() for x in (q, k, v)]
    for x in future:
        x[:, :, t + 1:] += 10 * torch.randn_like(x[:, :, t + 1:])
    perturbed = kernels.gma_triton(*future, means, variances, log_priors, causal=True, eps=EPS)
    assert torch.equal(out[:, :, :t + 1], perturbed[:, :, :t + 1])
    for grad in torch.autograd.grad(out[:, :, t].sum(), (q, k, v)):
        assert torch.count_nonzero(grad[:, :, t + 1:]) == 0


@pytest.mark.parametrize("causal", [False, True])
def test_deterministic(causal):
    inputs = make_inputs(2, 4, 2048, 2048, 64, 64, 128, HALF)
    runs = []
    for _ in range(2):
        out = kernels.gma_triton(*inputs, causal=causal, eps=EPS)
        runs.append((out, *torch.autograd.grad(out.float().square().sum(), inputs)))
    assert all(torch.equal(a, b) for a, b in zip(*runs))


def test_torch_compile_of_a_model_using_the_kernel():
    torch.manual_seed(0)
    dtype = HALF
    layer = gma_teach.GaussianMixtureAttention(128, 4, 64, causal=True, impl="triton").cuda()
    reference = gma_teach.GaussianMixtureAttention(128, 4, 64, causal=True, impl="chunked").cuda()
    reference.load_state_dict(layer.state_dict())
    x = torch.randn(2, 300, 128, device="cuda")
    compiled = torch.compile(layer)  # the kernels alone also compile with fullgraph=True (test_kernels.py)
    with torch.autocast("cuda", dtype=dtype):
        out = compiled(x)
    out.float().square().mean().backward()
    with torch.autocast("cuda", dtype=dtype):
        expected = reference(x)
    expected.float().square().mean().backward()
    atol = tolerance(dtype)  # both paths round to dtype under autocast; the gradients through two roundings
    torch.testing.assert_close(out.float(), expected.float(), atol=atol, rtol=atol)
    for (name, p), q in zip(layer.named_parameters(), reference.parameters()):
        scale = max(q.grad.abs().max().item(), 1e-3)
        torch.testing.assert_close(p.grad, q.grad, atol=2 * atol * scale, rtol=2 * atol,
                                   msg=lambda m, name=name: f"{name}: {m}")
