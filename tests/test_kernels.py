"""The Triton kernels (run by Triton's CPU interpreter here) against an independent float64 N x N spec.

The spec below broadcasts (x - mu) for the responsibilities and materializes the (N, N) affinity with a
lower-triangular mask: no GEMM form, no prefix sums, no shared code with the kernels. Sizes are odd on purpose
(N in {1, 17, 100}, K in {3, 40}, d in {5, 16}) so that every tile has a masked tail.
"""
import os
import subprocess
import sys

import pytest
import torch

import gma_teach
from gma_teach import kernels

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
    inputs = [torch.randn(batch, heads, n_q, d), torch.randn(batch, heads, n_k, d), torch.randn(batch, heads, n_k, d_v),
              torch.randn(heads, n_components, d), 0.3 + 1.7 * torch.rand(heads, n_components, d),
              torch.log_softmax(torch.randn(heads, n_components), -1)]
    inputs = [t.to(dtype) if i < 3 else t for i, t in enumerate(inputs)]
    return [t.requires_grad_() for t in inputs]


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
        torch.testing.assert_close(grad.double(), grad64, atol=atol * scale, rtol=rtol, msg=lambda m: f"{name}: {m}")


CASES = [  # batch, heads, n_q, n_k, d, d_v, K, causal, chunk_size
    (1, 2, 17, 17, 5, 7, 3, False, None),
    (2, 1, 100, 100, 16, 16, 40, False, None),
    (1, 2, 1, 100, 16, 5, 40, False, None),   # cross-attention, one query
    (1, 1, 100, 17, 5, 16, 3, False, None),   # cross-attention, more queries than keys
    (1, 2, 1, 1, 5, 7, 40, True, None),
    (1, 2, 17, 17, 16, 7, 40, True, 16),      # a full chunk and a 1-token tail
    (2, 1, 100, 100, 5, 16, 3, True, 32),
    (1, 1, 100, 100, 16, 5, 40, True, None),  # default chunk (64): 2 chunks
]


@pytest.mark.parametrize("batch, heads, n_q, n_k, d, d_v, n_components, causal, chunk_size", CASES)
def test_forward_and_every_gradient_match_float64_spec(batch, heads, n_q, n_k, d, d_v, n_components, causal,
                                                       chunk_size):
    inputs = make_inputs(batch, heads, n_q, n_k, d, d_v, n_components)
    assert_close_to_spec(inputs, causal, chunk_size)


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


def test_causal_leakage_is_exactly_zero():
    q, k, v, means, variances, log_priors = make_inputs(1, 2, 100, 100, 5, 7, 3)
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


def test_reductions_are_deterministic():
    inputs = make_inputs(2, 2, 100, 100, 16, 16, 40)
    runs = [forward_and_grads(lambda *t: kernels.gma_triton(*t, causal=False, eps=EPS), inputs,
                              torch.ones(2, 2, 100, 16)) for _ in range(2)]
    assert torch.equal(runs[0][0], runs[1][0])
    assert all(torch.equal(a, b) for a, b in zip(runs[0][1], runs[1][1]))


class _SmallGPU:
    """Stands in for a kernel on a GPU whose shared memory only fits tiles of at most ``limit`` rows."""

    def __init__(self, kernel, block_name, limit):
        self.kernel, self.block_name, self.limit, self.tried = kernel, block_name, limit, []

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.tried.append(kwargs[self.block_name])
            if kwargs[self.block_name] > self.limit:
                from triton.runtime.errors import OutOfResources
                raise OutOfResources(kwargs[self.block_name] * 1024, self.limit * 1024, "shared memory")
            return self.kernel[grid](*args, **kwargs)
        return launch


@pytest.mark.parametrize("kernel_name, block_name, causal", [("causal_forward_kernel", "CHUNK", True),
                                                             ("write_kernel", "BLOCK_N", False)])
def test_tiles_shrink_when_they_do_not_fit(monkeypatch, kernel_name, block_name, causal):
    from gma_teach.kernels import _ops

    inputs = [t.detach() for t in make_inputs(1, 2, 100, 100, 5, 7, 3)]
    expected = kernels.gma_triton(*inputs, causal=causal, eps=EPS)
    small = _SmallGPU(getattr(_ops.kernels, kernel_name), block_name, limit=16)
    monkeypatch.setattr(_ops.kernels, kernel_name, small)
    monkeypatch.setattr(_ops, "_FITTING_BLOCK", {})
    torch.testing.assert_close(kernels.gma_triton(*inputs, causal=causal, eps=EPS), expected, atol=1e-6, rtol=1e-5)
    assert small.tried == [64, 32, 16]
    kernels.gma_triton(*inputs, causal=causal, eps=EPS)
    assert small.tried == [64, 32, 16, 16]  # remembered


@pytest.mark.parametrize("causal", [False, True])
def test_tiles_that_never_fit_fall_back_to_torch_with_a_warning(monkeypatch, causal):
    from gma_teach.kernels import _ops

    inputs = make_inputs(1, 2, 40, 40, 5, 7, 3)
    d_out = torch.randn(1, 2, 40, 7)
    expected = forward_and_grads(lambda *t: kernels.gma_triton(*t, causal=causal, eps=EPS), inputs, d_out)
    for name in ("write_kernel", "causal_forward_kernel", "query_backward_kernel", "causal_key_backward_kernel"):
        monkeypatch.setattr(_ops.kernels, name, _SmallGPU(getattr(_ops.kernels, name), "BLOCK_K", limit=8))
    monkeypatch.setattr(_ops, "_FITTING_BLOCK", {})
    with pytest.warns(RuntimeWarning, match="do not fit this GPU") as caught:
        got = forward_and_grads(lambda *t: kernels.gma_triton(*t, causal=causal, eps=EPS), inputs, d_out)
    assert {"forward", "backward"} <= {word for w in caught for word in ("forward", "backward")
                                       if f"computing the {word}" in str(w.message)}
    torch.testing.assert_close(got[0], expected[0], atol=1e-5, rtol=1e-4)
    for a, b in zip(got[1], expected[1]):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def test_fused_responsibility_kernel_matches_spec():
    x, _, _, means, variances, log_priors = [t.detach() for t in make_inputs(2, 2, 100, 1, 5, 1, 40)]
    gamma = kernels.responsibilities(x, means, variances, log_priors)
    expected = spec_responsibilities(x.double(), means.double(), variances.double(), log_priors.double())
    torch.testing.assert_close(gamma.double(), expected, atol=1e-6, rtol=1e-5)
    assert torch.equal(gamma, kernels.responsibilities(x, means, variances, log_priors))


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
        torch.testing.assert_close(p.grad, q.grad, atol=1e-6, rtol=1e-4, msg=lambda m: f"{name}: {m}")


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
    (dict(k=torch.randn(1, 2, 17, 4)), ValueError, "k must have shape"),
    (dict(v=torch.randn(1, 2, 16, 7)), ValueError, "v must have shape"),
    (dict(v=torch.randn(1, 2, 17, 7, dtype=torch.float64)), TypeError, "float64"),
    (dict(q=torch.ones(1, 2, 17, 5, dtype=torch.int64)), TypeError, "q must be float16"),
    (dict(means=torch.randn(3, 3, 5)), ValueError, "means must have shape (H, K, d)"),
    (dict(variances=torch.rand(2, 4, 5)), ValueError, "variances must have the shape of means"),
    (dict(log_priors=torch.randn(2, 4)), ValueError, "log_priors must have shape (H, K)"),
    (dict(variances=-torch.rand(2, 3, 5)), ValueError, "variances must be strictly positive"),
    (dict(eps=0.0), ValueError, "eps must be a positive"),
    (dict(eps=-1e-6), ValueError, "eps must be a positive"),
    (dict(causal=True, q=torch.randn(1, 2, 16, 5)), ValueError, "causal GMA needs as many queries as keys"),
    (dict(chunk_size=48), ValueError, "chunk_size must be None or one of"),
    (dict(means=torch.randn(2, 3, 5, device="meta")), ValueError, "must be on one device"),
])
def test_bad_input_raises_clear_errors(changes, error, words):
    with pytest.raises(error) as info:
        kernels.gma_triton(**_bad(**changes))
    assert words in str(info.value)


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
                      "print(k.responsibilities(x, torch.zeros(1, 2, 2), torch.ones(1, 2, 2), torch.zeros(1, 2)))")
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


def test_normalizer_checker_accepts_the_answer_and_names_a_missing_tail_mask():
    assert "correct" in exercises.check_normalizer_kernel(_normalizer)
    with pytest.raises(exercises.ExerciseError, match="Mask the loads"):
        exercises.check_normalizer_kernel(lambda *args: _normalizer(*args, pad_to=16))


def test_masked_softmax_checker():
    assert "correct" in exercises.check_masked_softmax(lambda x: torch.softmax(x, -1))

    def padded_with_zeros(x):  # padded columns loaded as 0 instead of -inf (fine here only if all logits are < 0)
        width = max(16, 1 << (x.shape[-1] - 1).bit_length())
        padded = torch.nn.functional.pad(x, (0, width - x.shape[-1]))
        return torch.softmax(padded - padded.max(-1, keepdim=True).values, -1)[:, :x.shape[-1]]

    with pytest.raises(exercises.ExerciseError, match="-inf"):
        exercises.check_masked_softmax(padded_with_zeros)
    with pytest.raises(exercises.ExerciseError, match="maximum"):
        exercises.check_masked_softmax(lambda x: torch.exp(x) / torch.exp(x).sum(-1, keepdim=True))


def test_softmax_backward_checker():
    assert "correct" in exercises.check_softmax_backward(
        lambda g, dg: g * (dg - (g * dg).sum(-1, keepdim=True)))
    with pytest.raises(exercises.ExerciseError, match="couples the components"):
        exercises.check_softmax_backward(lambda g, dg: g * dg)
