"""The Triton kernels (run by Triton's CPU interpreter here) against an independent float64 N x N spec.

The spec below broadcasts (x - mu) for the responsibilities and materializes the (N, N) affinity with a
lower-triangular mask: no GEMM form, no prefix sums, no shared code with the kernels. Sizes are odd on purpose
(N in {1, 17, 100}, K in {3, 40, 100, 256, 512}, d in {5, 16}) so that every tile has a masked tail; K = 256 and 512
span several K tiles. The shared-memory tests count, with Triton's own allocator, what every kernel needs on sm_75
(a T4) and sm_90 (an H100/H200) over the supported sizes.
"""
import ast
import itertools
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import gma_teach
from gma_teach import kernels
from gma_teach.gmm import random_gma_inputs

pytestmark = pytest.mark.skipif(not kernels.is_available("cpu"),
                                reason=f"Triton interpreter unavailable: {kernels.triton_status()}")

EPS = 1e-6
NAMES = ("q", "k", "v", "means", "variances", "log_priors")


def spec_responsibilities(x, means, variances, log_priors):
    """(B, H, N, K) from x (B, H, N, d) by the direct Gaussian log density, in x's dtype."""
    diff = x[:, :, :, None, :] - means[None, :, None, :, :]
    log_density = -0.5 * (diff * diff / variances[None, :, None] + variances.log()[None, :, None]).sum(-1)
    return torch.softmax(log_priors[None, :, None, :] + log_density, dim=-1)


def spec_gma(q, k, v, means, variances, log_priors, causal, eps=EPS):
    """O = A V / (A 1 + eps) with A = Gamma_Q Gamma_K^T (lower triangle when causal), materialized."""
    affinity = spec_responsibilities(q, means, variances, log_priors) @ \
        spec_responsibilities(k, means, variances, log_priors).transpose(-1, -2)
    if causal:
        affinity = torch.tril(affinity)
    return affinity @ v / (affinity.sum(-1, keepdim=True) + eps)


def make_inputs(batch, heads, n_q, n_k, d, d_v, n_components, dtype=torch.float32):
    return [t.requires_grad_() for t in random_gma_inputs(batch, heads, n_q, n_k, d, d_v, n_components, dtype=dtype)]


def forward_and_grads(fn, inputs, d_out):
    out = fn(*inputs)
    return out, torch.autograd.grad(out, inputs, d_out.to(out.dtype))


def assert_close_to_spec(inputs, causal, chunk_size=None, *, atol=2e-5, rtol=2e-4):
    out, grads = forward_and_grads(
        lambda *t: kernels.gma_triton(*t, causal=causal, eps=EPS, chunk_size=chunk_size), inputs,
        d_out := torch.randn(inputs[0].shape[:3] + inputs[2].shape[3:]))
    inputs64 = [t.detach().double().requires_grad_() for t in inputs]
    out64, grads64 = forward_and_grads(lambda *t: spec_gma(*t, causal), inputs64, d_out.double())
    assert out.dtype == inputs[2].dtype and out.shape == out64.shape
    torch.testing.assert_close(out.double(), out64, atol=atol, rtol=rtol)
    for name, grad, grad64, tensor in zip(NAMES, grads, grads64, inputs):
        assert grad.dtype == tensor.dtype and grad.shape == tensor.shape, name
        scale = max(grad64.abs().max().item(), 1.0)  # floor: some vanish (one causal token: O = v)
        torch.testing.assert_close(grad.double(), grad64, atol=atol * scale, rtol=rtol,
                                   msg=lambda m, name=name: f"{name}: {m}")


CASES = [  # batch, heads, n_q, n_k, d, d_v, K, causal, chunk_size
    (1, 2, 17, 17, 5, 7, 3, False, None),
    (2, 1, 100, 100, 16, 16, 40, False, None),
    (1, 2, 1, 100, 16, 5, 40, False, None),   # cross-attention, one query
    (1, 1, 100, 17, 5, 16, 3, False, None),   # cross-attention, more queries than keys
    (1, 1, 70, 70, 5, 7, 100, False, None),   # two K tiles, the second one partly padded
    (1, 2, 1, 1, 5, 7, 40, True, None),
    (1, 2, 17, 17, 16, 7, 40, True, 16),      # a full chunk and a 1-token tail
    (2, 1, 100, 100, 5, 16, 3, True, 32),
    (1, 1, 100, 100, 16, 5, 40, True, None),  # default chunk (64): 2 chunks
    (1, 1, 40, 40, 5, 7, 100, True, 16),      # three chunks, two K tiles
]
MANY_COMPONENTS = [  # K in several tiles: bidirectional, cross and causal
    (1, 2, 20, 20, 5, 7, 256, False, None),
    (1, 1, 9, 23, 5, 7, 256, False, None),
    (1, 2, 20, 20, 5, 7, 256, True, 16),
    pytest.param(1, 1, 20, 20, 5, 7, 512, False, None, marks=pytest.mark.slow),
    pytest.param(1, 1, 7, 20, 5, 7, 512, False, None, marks=pytest.mark.slow),
    pytest.param(1, 1, 20, 20, 5, 7, 512, True, 16, marks=pytest.mark.slow),
]


@pytest.mark.parametrize("batch, heads, n_q, n_k, d, d_v, n_components, causal, chunk_size", CASES)
def test_forward_and_every_gradient_match_float64_spec(batch, heads, n_q, n_k, d, d_v, n_components, causal,
                                                       chunk_size):
    inputs = make_inputs(batch, heads, n_q, n_k, d, d_v, n_components)
    assert_close_to_spec(inputs, causal, chunk_size)


@pytest.mark.parametrize("batch, heads, n_q, n_k, d, d_v, n_components, causal, chunk_size", MANY_COMPONENTS)
def test_many_components_match_float64_spec(batch, heads, n_q, n_k, d, d_v, n_components, causal, chunk_size):
    torch.manual_seed(n_components + n_q)
    assert_close_to_spec(make_inputs(batch, heads, n_q, n_k, d, d_v, n_components), causal, chunk_size)


def test_spec_agrees_with_package_naive_implementation():
    q, k, v, means, variances, log_priors = [t.detach().double() for t in make_inputs(1, 2, 17, 17, 5, 7, 3)]
    for causal in (False, True):
        naive = gma_teach.gma(q, k, v, means, variances, log_priors, causal=causal, eps=EPS, impl="naive")
        torch.testing.assert_close(spec_gma(q, k, v, means, variances, log_priors, causal), naive)


@pytest.mark.parametrize("causal", [False, True])
def test_gma_impl_triton_dispatches_to_the_kernels(causal):
    q, k, v, means, variances, log_priors = [t.detach() for t in make_inputs(2, 2, 33, 33, 5, 7, 3)]
    fused = gma_teach.gma(q, k, v, means, variances, log_priors, causal=causal, impl="triton")
    naive = gma_teach.gma(q.double(), k.double(), v.double(), means.double(), variances.double(),
                          log_priors.double(), causal=causal, impl="naive")
    torch.testing.assert_close(fused.double(), naive, atol=2e-5, rtol=2e-4)


@pytest.mark.parametrize("n_components", [3, 100])
def test_causal_leakage_is_exactly_zero(n_components):
    q, k, v, means, variances, log_priors = make_inputs(1, 2, 100, 100, 5, 7, n_components)
    t = 40  # positions <= t must not see anything at positions > t
    out = kernels.gma_triton(q, k, v, means, variances, log_priors, causal=True, eps=EPS, chunk_size=32)
    future = [x.detach().clone() for x in (q, k, v)]
    for x in future:
        x[:, :, t + 1:] += 10 * torch.randn_like(x[:, :, t + 1:])
    perturbed = kernels.gma_triton(*future, means, variances, log_priors, causal=True, eps=EPS, chunk_size=32)
    assert torch.equal(out[:, :, :t + 1], perturbed[:, :, :t + 1])
    assert not torch.equal(out[:, :, t + 1:], perturbed[:, :, t + 1:])
    d_q, d_k, d_v = torch.autograd.grad(out[:, :, t].sum(), (q, k, v))
    for name, grad in (("q", d_q), ("k", d_k), ("v", d_v)):
        assert torch.count_nonzero(grad[:, :, t + 1:]) == 0, f"gradient reaches the future through {name}"
        assert torch.count_nonzero(grad[:, :, :t + 1]) > 0, name


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
def test_half_precision_inputs(dtype, causal):
    inputs = make_inputs(1, 2, 100, 100, 16, 16, 40, dtype=dtype)
    tolerance = 4e-3 if dtype == torch.float16 else 3e-2  # the spec sees the same rounded inputs
    assert_close_to_spec(inputs, causal, atol=tolerance, rtol=tolerance)


@pytest.mark.parametrize("causal", [False, True])
def test_reductions_are_deterministic(causal):
    inputs = make_inputs(2, 2, 100, 100, 16, 16, 70)
    runs = [forward_and_grads(lambda *t: kernels.gma_triton(*t, causal=causal, eps=EPS, chunk_size=32), inputs,
                              torch.ones(2, 2, 100, 16)) for _ in range(2)]
    assert torch.equal(runs[0][0], runs[1][0])
    assert all(torch.equal(a, b) for a, b in zip(runs[0][1], runs[1][1]))


def test_bfloat16_outputs_are_rounded_to_nearest():
    """Under the interpreter the kernels compute bf16 inputs in fp32; the output must be that fp32 result rounded to
    nearest (torch's cast), not truncated (Triton's interpreter store), which would bias it by half an ulp."""
    q, k, v, means, variances, log_priors = [t.detach() for t in make_inputs(1, 2, 40, 40, 5, 16, 7,
                                                                             dtype=torch.bfloat16)]
    for causal in (False, True):
        out = kernels.gma_triton(q, k, v, means, variances, log_priors, causal=causal, eps=EPS)
        exact = kernels.gma_triton(q.float(), k.float(), v.float(), means, variances, log_priors, causal=causal,
                                   eps=EPS)
        assert out.dtype == torch.bfloat16
        assert torch.equal(out, exact.to(torch.bfloat16))
        assert not torch.equal(out, _truncate_to_bfloat16(exact))  # the check can tell the two apart


def _truncate_to_bfloat16(x):
    return (x.contiguous().view(torch.int32) & -65536).view(torch.float32).to(torch.bfloat16)


@pytest.mark.parametrize("n_components", [40, 100])
def test_fused_responsibilities_match_spec(n_components):
    x, _, _, means, variances, log_priors = [t.detach() for t in make_inputs(2, 2, 100, 1, 5, 1, n_components)]
    gamma = kernels.fused_responsibilities(x, means, variances, log_priors)
    expected = spec_responsibilities(x.double(), means.double(), variances.double(), log_priors.double())
    torch.testing.assert_close(gamma.double(), expected, atol=1e-6, rtol=1e-5)
    assert torch.equal(gamma, kernels.fused_responsibilities(x, means, variances, log_priors))
    torch.testing.assert_close(gamma, gma_teach.responsibilities(x, means, variances, log_priors), atol=1e-6,
                               rtol=1e-5)
    assert kernels.responsibilities is kernels.fused_responsibilities  # the name chapter 7 used before


def test_custom_op_passes_torch_opcheck():
    inputs = [t.detach() for t in make_inputs(1, 2, 17, 17, 5, 7, 3)]
    tables = kernels.mixture_tables(*inputs[3:])
    for causal in (False, True):
        args = (*inputs[:3], *(t.requires_grad_() for t in (tables[0].detach(), tables[1].detach(),
                                                              tables[2].detach())), causal, EPS, 16, torch.float32)
        torch.library.opcheck(torch.ops.gma_teach.gma_forward.default, args,
                              test_utils=("test_schema", "test_faketensor", "test_autograd_registration"))


def test_torch_compile_fullgraph_matches_eager():
    inputs = make_inputs(1, 2, 17, 17, 5, 7, 3)

    def loss(q, k, v, means, variances, log_priors):
        return kernels.gma_triton(2 * q, k, v, means, variances, log_priors, causal=True, eps=EPS).sin().sum()

    compiled = torch.compile(loss, backend="aot_eager", fullgraph=True)
    eager_loss, compiled_loss = loss(*inputs), compiled(*inputs)
    torch.testing.assert_close(compiled_loss, eager_loss)
    for a, b in zip(torch.autograd.grad(eager_loss, inputs), torch.autograd.grad(compiled_loss, inputs)):
        torch.testing.assert_close(a, b)


def test_layer_with_impl_triton_compiles_and_matches_chunked():
    layer = gma_teach.GaussianMixtureAttention(32, 2, 8, causal=True, impl="triton")
    reference = gma_teach.GaussianMixtureAttention(32, 2, 8, causal=True, impl="chunked")
    reference.load_state_dict(layer.state_dict())
    x = torch.randn(2, 50, 32)
    out = torch.compile(layer, backend="aot_eager")(x)
    expected = reference(x)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-4)
    out.square().mean().backward()
    expected.square().mean().backward()
    for (name, p), q in zip(layer.named_parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, q.grad, atol=1e-6, rtol=1e-4, msg=lambda m, name=name: f"{name}: {m}")


def test_status_reports_interpreter():
    assert "interpreted on CPU" in kernels.triton_status()
    assert "interpreted" in gma_teach.env_report()
    assert kernels.is_available("cpu") and not kernels.is_available("cuda")


def _bad(**changes):
    q, k, v, means, variances, log_priors = [t.detach() for t in make_inputs(1, 2, 17, 17, 5, 7, 3)]
    arguments = dict(q=q, k=k, v=v, means=means, variances=variances, log_priors=log_priors, causal=False, eps=EPS)
    arguments.update(changes)
    return arguments


@pytest.mark.parametrize("changes, error, words", [
    (dict(q=[[1.0]]), TypeError, "q must be a torch.Tensor"),
    (dict(q=torch.randn(17, 5)), ValueError, "q must have shape (B, H, N, features)"),
    (dict(k=torch.randn(1, 2, 17, 4)), ValueError, "k has feature dim 4 but means/variances have d=5"),
    (dict(v=torch.randn(1, 2, 16, 7)), ValueError, "v must have one row per key"),
    (dict(q=torch.randn(2, 2, 17, 5)), ValueError, "k must have the (B, H) = (2, 2) of q"),
    (dict(v=torch.randn(1, 1, 17, 7)), ValueError, "v must have the (B, H) = (1, 2) of q"),
    (dict(v=torch.randn(1, 2, 17, 7, dtype=torch.float64)), TypeError, "float64"),
    (dict(q=torch.ones(1, 2, 17, 5, dtype=torch.int64)), TypeError, "q must be a floating-point tensor"),
    (dict(q=torch.ones(1, 2, 17, 5, dtype=torch.float64)), TypeError, "q must be float16"),
    (dict(means=torch.randn(3, 3, 5)), ValueError, "means must have shape (H, K, d) = (2, K, 5)"),
    (dict(means=torch.randn(3, 5)), ValueError, "one mixture per head"),
    (dict(variances=torch.rand(2, 4, 5)), ValueError, "variances must have the shape of means"),
    (dict(log_priors=torch.randn(2, 4)), ValueError, "log_priors must have shape (2, 3)"),
    (dict(log_priors=torch.zeros(2, 3)), ValueError, "log_priors must be normalized"),
    (dict(variances=-torch.rand(2, 3, 5)), ValueError, "variances must be > 0"),
    (dict(eps=0.0), ValueError, "eps must be > 0"),
    (dict(eps=-1e-6), ValueError, "eps must be > 0"),
    (dict(eps=float("inf")), ValueError, "eps must be a positive number (finite)"),
    (dict(eps=float("nan")), ValueError, "eps must be a positive number (finite)"),
    (dict(eps="1e-6"), TypeError, "eps must be a positive number"),
    (dict(causal=1), TypeError, "causal must be a bool"),
    (dict(q=torch.randn(1, 2, 0, 5), k=torch.randn(1, 2, 0, 5), v=torch.randn(1, 2, 0, 7)), ValueError,
     "at least one token"),
    (dict(k=torch.randn(1, 2, 0, 5), v=torch.randn(1, 2, 0, 7)), ValueError, "k has shape (1, 2, 0, 5)"),
    (dict(means=torch.randn(2, 513, 5), variances=torch.ones(2, 513, 5),
          log_priors=torch.full((2, 513), -6.24)), ValueError, "K <= 512"),
    (dict(q=torch.randn(1, 2, 17, 129), k=torch.randn(1, 2, 17, 129), means=torch.randn(2, 3, 129),
          variances=torch.ones(2, 3, 129)), ValueError, "d, dv <= 128"),
    (dict(causal=True, q=torch.randn(1, 2, 16, 5)), ValueError, "causal=True needs as many queries as keys"),
    (dict(chunk_size=48), ValueError, "chunk_size must be None or one of"),
    (dict(means=torch.randn(2, 3, 5, device="meta")), ValueError, "device"),
])
def test_bad_input_raises_clear_errors(changes, error, words):
    with pytest.raises(error) as info:
        kernels.gma_triton(**_bad(**changes))
    assert words in str(info.value)


SHARED_RULES = [  # broken inputs that gma() and the kernels' entry refuse by one shared check (gmm.check_gma_inputs)
    dict(v=torch.randn(1, 2, 16, 7)),
    dict(causal=True, q=torch.randn(1, 2, 16, 5)),
    dict(k=torch.randn(1, 2, 17, 4)),
    dict(variances=torch.rand(2, 4, 5)),
    dict(log_priors=torch.randn(2, 4)),
    dict(log_priors=torch.zeros(2, 3)),
    dict(variances=torch.zeros(2, 3, 5)),
    dict(means=torch.randn(2, 3, 5, device="meta")),
]


@pytest.mark.parametrize("changes", SHARED_RULES)
def test_gma_and_the_kernels_refuse_bad_shapes_with_one_message(changes):
    arguments = _bad(**changes)
    messages = []
    for function in (kernels.gma_triton, lambda **a: gma_teach.gma(**a, impl="triton")):
        with pytest.raises(ValueError) as info:
            function(**arguments)
        messages.append(str(info.value))
    assert messages[0] == messages[1]


def test_check_values_false_skips_the_mixture_values_only():
    arguments = _bad(log_priors=torch.zeros(2, 3))  # unnormalized: refused by default (above)
    out = kernels.gma_triton(**arguments, check_values=False)
    assert out.shape == (1, 2, 17, 7) and torch.isfinite(out).all()
    with pytest.raises(ValueError, match="v must have one row per key"):
        kernels.gma_triton(**_bad(v=torch.randn(1, 2, 16, 7)), check_values=False)


def _run_python(code, **env):
    environment = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    environment.update(env)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_triton_imported_first_is_detected_and_still_interpreted():
    out = _run_python("import torch, triton, gma_teach.kernels as k\n"
                      "print(k.triton_status())\n"
                      "x = torch.randn(1, 1, 3, 2)\n"
                      "print(k.fused_responsibilities(x, torch.zeros(1, 2, 2), torch.ones(1, 2, 2), "
                      "torch.log(torch.full((1, 2), 0.5))))")
    assert "imported before" in out and "interpreted" in out and "0.5000" in out


def test_without_triton_the_package_imports_and_explains_how_to_install():
    code = ("import sys\n"
            "class Block:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'triton' or name.startswith('triton.'): raise ModuleNotFoundError(name)\n"
            "sys.meta_path.insert(0, Block())\n"
            "import torch, gma_teach, gma_teach.kernels as k\n"
            "print(k.is_available('cpu'), k.triton_status())\n"
            "x = torch.randn(1, 1, 3, 2)\n"
            "try:\n"
            "    gma_teach.gma(x, x, x, torch.zeros(1, 2, 2), torch.ones(1, 2, 2), torch.zeros(1, 2), impl='triton')\n"
            "except (ImportError, ValueError) as error:\n"
            "    print('raised', error)\n")
    out = _run_python(code)
    assert out.startswith("False not installed") and "raised" in out and "pip install triton" in out


def test_mixture_tables_are_the_gemm_form_of_gmm():
    _, _, _, means, variances, log_priors = [t.detach() for t in make_inputs(1, 2, 1, 1, 5, 1, 7)]
    w_sq, w_lin, bias = kernels.mixture_tables(means.double(), variances.double(), log_priors.double())
    assert w_sq.dtype == w_lin.dtype == bias.dtype == torch.float32
    x = torch.randn(2, 11, 5, dtype=torch.float64)
    logits = (x * x) @ w_sq.double().transpose(-1, -2) + x @ w_lin.double().transpose(-1, -2) + bias.double()[:, None]
    torch.testing.assert_close(torch.log_softmax(logits, -1),
                               gma_teach.log_responsibilities(x, means.double(), variances.double(),
                                                              log_priors.double()), atol=1e-5, rtol=1e-5)


def test_a_float64_mixture_with_float32_inputs_runs():
    q, k, v, means, variances, log_priors = [t.detach() for t in make_inputs(1, 2, 17, 17, 5, 7, 3)]
    out = kernels.gma_triton(q, k, v, means.double(), variances.double(), log_priors.double(), causal=True, eps=EPS)
    torch.testing.assert_close(out, kernels.gma_triton(q, k, v, means, variances, log_priors, causal=True, eps=EPS))


def test_supports_is_the_validated_grid():
    assert kernels.supports(torch.float32, 512, 128, 128, 128)
    assert kernels.supports(torch.bfloat16, 1, 1, 1, None)
    assert not kernels.supports(torch.float64, 8, 16, 16, None)
    assert not kernels.supports(torch.float32, 513, 16, 16, None)
    assert not kernels.supports(torch.float32, 8, 129, 16, None)
    assert not kernels.supports(torch.float32, 8, 16, 129, None)
    assert not kernels.supports(torch.float32, 8, 16, 16, 48)


def test_tile_sizes_shrink_for_wide_heads_and_small_gpus():
    assert kernels.tile_sizes(512, 64, 64, arch=90)["rows"] == 64
    assert kernels.tile_sizes(512, 128, 16, arch=90)["rows"] == 32
    assert kernels.tile_sizes(512, 128, 128, arch=75)["rows"] == 16
    assert kernels.tile_sizes(3, 16, 16, arch=90)["k_tile"] == 16  # never wider than K needs
    tiles = kernels.tile_sizes(512, 128, 128, arch=75, chunk_size=128)
    assert tiles["chunk"] == 16 and tiles["k_tile"] == 16


def test_a_chunk_size_above_the_tile_gives_the_same_result():
    """On a GPU with little shared memory a long chunk_size runs as shorter chunks: the result is the same."""
    inputs = [t.detach() for t in make_inputs(1, 2, 100, 100, 5, 7, 3)]
    long = kernels.gma_triton(*inputs, causal=True, eps=EPS, chunk_size=128)  # interpreted: chunks of 64
    short = kernels.gma_triton(*inputs, causal=True, eps=EPS, chunk_size=16)
    torch.testing.assert_close(long, short, atol=1e-6, rtol=1e-5)


# The widest tiles each GPU uses: one size per (architecture, tile class); shared memory grows with the tiles and
# with d_r, d_v, so the grid's largest d in a class bounds the class (the slow test below checks every class).
CORNERS = [(75, torch.float16, 128), (75, torch.float16, 64), (90, torch.bfloat16, 128), (90, torch.bfloat16, 64),
           (90, torch.float32, 64)]


@pytest.mark.parametrize("arch, dtype, width", CORNERS)
def test_every_kernel_fits_the_shared_memory_of_sm75_and_sm90(arch, dtype, width):
    needs = kernels.shared_memory(arch, dtype, 512, width, width, 128)
    limit = kernels.SHARED_MEMORY_LIMITS[arch]
    assert len(needs) >= 19 and min(needs.values()) >= 0
    too_big = {label: f"{value / 1024:.1f} KiB" for label, value in needs.items() if value > limit}
    assert not too_big, f"over sm_{arch}'s {limit // 1024} KiB: {too_big}"
    assert max(needs.values()) > limit // 4  # the count is real: the biggest kernel uses a good part of it


@pytest.mark.slow
@pytest.mark.parametrize("arch, dtype", [(75, torch.float16), (90, torch.bfloat16)])
def test_smaller_tiles_fit_too(arch, dtype):
    """The corners above bound the grid if shared memory grows with every tile dimension; this checks the smaller
    tile configurations too (one K tile or many, short chunks, every padded width; d_r != d_v pads each to its own
    power of two, so it is bounded by the square size of the wider)."""
    configurations = {}
    for n_components, width, chunk in itertools.product((3, 512), (17, 33, 65), (16, None)):
        tiles = kernels.tile_sizes(n_components, width, width, arch=arch, chunk_size=chunk)
        configurations.setdefault(tuple(sorted(tiles.items())), (n_components, width, chunk))
    limit = kernels.SHARED_MEMORY_LIMITS[arch]
    for n_components, width, chunk in configurations.values():
        needs = kernels.shared_memory(arch, dtype, n_components, width, width, chunk)
        assert max(needs.values()) <= limit, (n_components, width, chunk, needs)


@pytest.mark.slow
@pytest.mark.parametrize("arch, dtype", [(75, torch.float16), (90, torch.bfloat16)])
def test_the_kernels_compile_for_sm75_and_sm90_and_the_count_is_the_compilers(arch, dtype):
    """Two of the largest kernels compiled all the way to a cubin (no GPU needed): they compile, and the compiled
    kernel's shared memory is what the quick count (the allocation pass alone) says."""
    for label in ("key_token_backward (causal)", "output (causal)"):
        compiled = kernels.shared_memory(arch, dtype, 512, 64, 64, only=label, full_compile=True)
        assert compiled == kernels.shared_memory(arch, dtype, 512, 64, 64, only=label)
        assert 0 < compiled[label] <= kernels.SHARED_MEMORY_LIMITS[arch]


def test_shared_memory_refuses_an_unknown_dtype():
    with pytest.raises(TypeError, match="dtype must be one of"):
        kernels.shared_memory(90, torch.float64, 8, 16, 16)


def test_kernels_import_nothing_above_gmm():
    """The kernels build their tables from gma_teach.gmm and validate with _checks; they must not import mixing,
    layer or anything else above gmm (that made an import cycle)."""
    folder = Path(kernels.__file__).parent
    for path in folder.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level >= 2:
                names = {node.module} if node.module else {alias.name for alias in node.names}
                assert names <= {"gmm", "_checks"}, f"{path.name} imports {names} from gma_teach"
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("gma_teach"):
                raise AssertionError(f"{path.name} imports {node.module}")


# ------------------------------------------------------------------------------------------------------------------
# Chapter 7's exercise checkers: they accept right answers and name the problem in wrong ones. The answers here
# are plain torch (a checker only calls the reader's launcher), with the bugs a kernel would have.
# ------------------------------------------------------------------------------------------------------------------
from gma_teach import exercises  # noqa: E402


def _normalizer(k, means, variances, log_priors, pad_to=None):
    if pad_to is not None:  # the bug of an unmasked kernel: rows past N load as zeros and count
        n = k.shape[-2]
        k = torch.nn.functional.pad(k, (0, 0, 0, -n % pad_to))
    return gma_teach.responsibilities(k, means, variances, log_priors).sum(-2)


def test_normalizer_checker_accepts_the_answer_and_names_a_missing_tail_mask(capsys):
    exercises.check_normalizer_kernel(_normalizer)
    assert capsys.readouterr().out.startswith("Exercise 7.3: correct")
    with pytest.raises(exercises.ExerciseError, match="Mask the loads"):
        exercises.check_normalizer_kernel(lambda *args: _normalizer(*args, pad_to=16))


def test_masked_softmax_checker(capsys):
    exercises.check_masked_softmax(lambda x: torch.softmax(x, -1))
    assert "correct" in capsys.readouterr().out

    def padded_with_zeros(x):  # padded columns loaded as 0 instead of -inf (fine here only if all logits are < 0)
        width = max(16, 1 << (x.shape[-1] - 1).bit_length())
        padded = torch.nn.functional.pad(x, (0, width - x.shape[-1]))
        return torch.softmax(padded - padded.max(-1, keepdim=True).values, -1)[:, :x.shape[-1]]

    with pytest.raises(exercises.ExerciseError, match="-inf"):
        exercises.check_masked_softmax(padded_with_zeros)
    with pytest.raises(exercises.ExerciseError, match="maximum"):
        exercises.check_masked_softmax(lambda x: torch.exp(x) / torch.exp(x).sum(-1, keepdim=True))


def test_softmax_backward_checker(capsys):
    exercises.check_softmax_backward(lambda g, dg: g * (dg - (g * dg).sum(-1, keepdim=True)))
    assert "correct" in capsys.readouterr().out
    with pytest.raises(exercises.ExerciseError, match="couples the components"):
        exercises.check_softmax_backward(lambda g, dg: g * dg)
