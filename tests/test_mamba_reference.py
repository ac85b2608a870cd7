"""Our Mamba-1 mixer against an independent implementation: Hugging Face ``transformers``' ``MambaMixer``.

Same weights, same float64 input, the reference's pure-PyTorch path on CPU (``slow_forward`` in transformers 4.x;
the torch fallbacks of ``causal_conv1d_fn`` and ``selective_scan_fn`` in 5.x). The reference is built from a
``MambaConfig`` (the hub is never read). Parameter mapping, ours -> theirs::

    in_proj (weight, bias)   -> in_proj     (2 d_inner, d_model); the first half of its output is x, the second z
    conv (weight, bias)      -> conv1d      (d_inner, 1, d_conv), depthwise, padding d_conv - 1, first L outputs kept
    x_proj.weight            -> x_proj      (dt_rank + 2 d_state, d_inner), no bias; split in the order dt, B, C
    dt_proj (weight, bias)   -> dt_proj     (d_inner, dt_rank); dt = softplus(W dt_low + bias)
    a_log                    -> A_log       (d_inner, d_state); A = -exp(A_log), rounded to float32 by both
    skip                     -> D           (d_inner,)
    out_proj (weight, bias)  -> out_proj    (d_model, d_inner)

Ours has biases on ``in_proj`` and ``out_proj``; the reference has them only with ``use_bias=True`` (default
False), so the reference is built with ``use_bias=True`` (and, once, with the default and our biases zeroed).

The two agree to about 2e-9 in float64 (outputs of order 0.3), not 1e-16: the reference's scan casts B and the
conv output to float32 before forming ``dt * B * u`` (``discrete_B = ... B.float()``, ``deltaB_u = ...
hidden_states.float()``), so those two factors carry float32 rounding even in a float64 run. With those two casts
removed the outputs agree to ~1e-16. The tolerances below are ``assert_close``'s float64 defaults (1e-7), which
that rounding stays well under; a change of 1e-3 to any single weight of either copy exceeds them.
"""
import pytest
import torch

transformers = pytest.importorskip("transformers")
modeling_mamba = pytest.importorskip("transformers.models.mamba.modeling_mamba")

from gma_teach.baselines import make_mixer  # noqa: E402  (after the importorskip)

RTOL = ATOL = 1e-7  # torch.testing.assert_close's defaults for float64


def _pair(d_model, d_state, d_conv, expand, dt_rank=None, *, seed=0, dt_shift=0.0, use_bias=True):
    """Ours with every parameter drawn (no default such as D = 1 or A = 1..S hides a swapped mapping), and the
    reference holding copies of the same weights; both in float64, eval mode."""
    torch.manual_seed(seed)
    ours = make_mixer("mamba", d_model, 1, causal=True, d_state=d_state, d_conv=d_conv, expand=expand,
                      dt_rank=dt_rank)
    with torch.no_grad():  # drawn in float32, so the reference's float32 casts of weights are exact
        ours.a_log.copy_(torch.log(0.5 + 3 * torch.rand_like(ours.a_log)))
        ours.skip.copy_(torch.randn_like(ours.skip))
        # dt = softplus(...) of order 1, not the initial 1e-3..1e-1: the scan's terms then weigh in the output
        ours.dt_proj.bias.copy_(2 * torch.rand_like(ours.dt_proj.bias) - 1 + dt_shift)
        if not use_bias:
            ours.in_proj.bias.zero_()
            ours.out_proj.bias.zero_()
    config = transformers.MambaConfig(
        hidden_size=d_model, state_size=d_state, conv_kernel=d_conv, expand=expand, time_step_rank=ours.dt_rank,
        use_bias=use_bias, use_conv_bias=True, hidden_act="silu", use_mambapy=False, use_associative_scan=False,
        num_hidden_layers=1)
    reference = modeling_mamba.MambaMixer(config, layer_idx=0)
    weights = {"in_proj.weight": ours.in_proj.weight, "conv1d.weight": ours.conv.weight,
               "conv1d.bias": ours.conv.bias, "x_proj.weight": ours.x_proj.weight,
               "dt_proj.weight": ours.dt_proj.weight, "dt_proj.bias": ours.dt_proj.bias, "A_log": ours.a_log,
               "D": ours.skip, "out_proj.weight": ours.out_proj.weight}
    if use_bias:
        weights.update({"in_proj.bias": ours.in_proj.bias, "out_proj.bias": ours.out_proj.bias})
    reference.load_state_dict({name: value.detach().clone() for name, value in weights.items()}, strict=True)
    return ours.double().eval(), reference.double().eval()


def _input(length, d_model, seed=1):
    return torch.randn(2, length, d_model, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


CASES = {
    "d12-s5-k3-e2-L9": dict(sizes=(12, 5, 3, 2), length=9),
    "d12-s5-k3-e2-L37": dict(sizes=(12, 5, 3, 2), length=37),  # past our default chunk of 32 tokens
    # dt ~ 3: a chunk's log decay passes our max_log_decay (60), so our scan also splits chunks in halves
    "d20-s7-k4-e3-r3-L37-large-dt": dict(sizes=(20, 7, 4, 3, 3), length=37, dt_shift=3.0),
    "d12-s5-k3-e2-L9-no-bias": dict(sizes=(12, 5, 3, 2), length=9, use_bias=False),  # the reference's default
}


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_mamba_mixer_equals_transformers_reference(case):
    torch.set_num_threads(1)
    options = {key: case[key] for key in ("dt_shift", "use_bias") if key in case}
    ours, reference = _pair(*case["sizes"], **options)
    assert ours.chunk_size == 32  # the L = 37 cases cross a chunk boundary
    x = _input(case["length"], case["sizes"][0])
    with torch.no_grad():
        expected = reference(x)
        torch.testing.assert_close(ours(x), expected, rtol=RTOL, atol=ATOL)
        torch.testing.assert_close(ours(x, sequential=True), expected, rtol=RTOL, atol=ATOL)


def test_mamba_mixer_input_gradient_equals_transformers_reference():
    torch.set_num_threads(1)
    ours, reference = _pair(12, 5, 3, 2)
    x = _input(37, 12)
    cotangent = torch.randn(2, 37, 12, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    grads = []
    for mixer in (ours, reference):
        xi = x.clone().requires_grad_(True)
        (mixer(xi) * cotangent).sum().backward()
        grads.append(xi.grad)
    torch.testing.assert_close(grads[0], grads[1], rtol=RTOL, atol=ATOL)
    assert grads[0].abs().max() > 1e-2  # a gradient that is there to compare
