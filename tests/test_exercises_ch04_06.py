"""Chapters 4-6 exercise checkers: each accepts a correct solution and rejects typical mistakes, naming them."""
import pytest
import torch
import torch.nn.functional as F

from gma_teach.exercises import (
    ExerciseError,
    NotAttempted,
    check_causal_gma,
    check_flop_count,
    check_raw_for_variance,
    check_read_memory,
    check_recurrent_step,
    check_responsibility_jacobian,
    check_write_memory,
)


# ----------------------------------------------------------------------------------------------- chapter 4
def write_memory(gamma_k, v):
    return gamma_k.transpose(-1, -2) @ v, gamma_k.sum(-2)


def read_memory(gamma_q, memory, normalizer, eps):
    return (gamma_q @ memory) / (gamma_q @ normalizer.unsqueeze(-1) + eps)


def flop_count(form, n_q, n_k, n_components, d_value):
    if form == "naive":
        return 2 * n_q * n_k * n_components + 2 * n_q * n_k * d_value
    return 2 * n_k * n_components * d_value + 2 * n_q * n_components * d_value + 2 * n_q * n_components


def test_ch04_checkers_accept_the_reference_solutions(capsys):
    check_write_memory(write_memory)
    assert capsys.readouterr().out.startswith("Exercise 4.1: correct")
    check_read_memory(read_memory)
    assert capsys.readouterr().out.startswith("Exercise 4.2: correct")
    check_flop_count(flop_count)
    assert capsys.readouterr().out.startswith("Exercise 4.3: correct -- your formula matches")


@pytest.mark.parametrize(
    "wrong, message",
    [
        (lambda g, v: (v.transpose(-1, -2) @ g, g.sum(-2)), "V\\^T Gamma\\^K"),
        (lambda g, v: (g.transpose(-1, -2) @ v, g.sum(-1)), "sums over the components"),
        (lambda g, v: g.transpose(-1, -2) @ v, "return a pair"),
        (lambda g, v: (0.5 * g.transpose(-1, -2) @ v, g.sum(-2)), "memory .* entries differ"),
    ],
)
def test_check_write_memory_names_the_mistake(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_write_memory(wrong)


@pytest.mark.parametrize(
    "slip, fix",
    [
        (lambda g, v: (g.transpose(0, 1) @ v, g.sum(-2)), "transpose only the last two axes"),
        (lambda g, v: (torch.mm(g.mT, v), g.sum(-2)), "transpose only the last two axes"),
    ],
)
def test_a_shape_slip_names_the_shapes_got_and_needed(slip, fix):
    """Right without a batch axis, a RuntimeError with one: the message says which shapes came in and must go out."""
    with pytest.raises(ExerciseError) as raised:
        check_write_memory(slip)
    message = str(raised.value)
    assert message.startswith("Exercise 4.1: your function raised RuntimeError for gamma_k of shape (2, 11, 4) "
                              "and v of shape (2, 11, 3)")
    assert "memory of shape (2, 4, 3)" in message and "normalizer of shape (2, 4)" in message and fix in message


def test_a_dtype_slip_in_write_memory_is_named():
    with pytest.raises(ExerciseError, match="dtype=gamma_k.dtype"):
        check_write_memory(lambda g, v: (g.mT @ v, g.mT @ torch.ones(g.shape[-2], dtype=torch.float32)))


@pytest.mark.parametrize(
    "wrong, message",
    [
        (lambda gq, s, z, eps: gq @ s, "without dividing"),
        (lambda gq, s, z, eps: (gq @ s) / (gq @ z.unsqueeze(-1)), "add eps"),
        (lambda gq, s, z, eps: (gq @ s) / (z.sum(-1)[..., None, None] + eps), "entries differ"),
        (lambda gq, s, z, eps: 1 / 0, "raised ZeroDivisionError"),
    ],
)
def test_check_read_memory_names_the_mistake(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_read_memory(wrong)


@pytest.mark.parametrize(
    "wrong, message",
    [
        (lambda form, nq, nk, k, dv: flop_count(form, nq, nk, k, dv) // (2 if form == "naive" else 1),
         "2 FLOPs"),
        (lambda form, nq, nk, k, dv: flop_count(form, nq, nk, k, dv) - (2 * nq * k if form == "linear" else 0),
         "normalizer read"),
        (lambda form, nq, nk, k, dv: "many", "return a number"),
    ],
)
def test_check_flop_count_names_the_mistake(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_flop_count(wrong)


# ----------------------------------------------------------------------------------------------- chapter 5
def raw_for_variance(target, min_variance):
    y = target - min_variance
    return y + torch.log(-torch.expm1(-y))


def responsibility_jacobian(gamma):
    return torch.diag_embed(gamma) - gamma.unsqueeze(-1) * gamma.unsqueeze(-2)


def test_ch05_checkers_accept_the_reference_solutions(capsys):
    check_raw_for_variance(raw_for_variance)
    assert capsys.readouterr().out.startswith("Exercise 5.1: correct")
    check_responsibility_jacobian(responsibility_jacobian)
    assert capsys.readouterr().out.startswith("Exercise 5.2: correct")


@pytest.mark.parametrize(
    "wrong, message",
    [
        (lambda t, m: t + torch.log(-torch.expm1(-t)), "subtract min_variance"),
        (lambda t, m: torch.log(torch.expm1(t - m)), "non-finite raw value"),
        (lambda t, m: torch.log(t - m), "entries differ"),
    ],
)
def test_check_raw_for_variance_names_the_mistake(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_raw_for_variance(wrong)


@pytest.mark.parametrize(
    "wrong, message",
    [
        (lambda g: torch.diag_embed(g * (1 - g)), "only the diagonal"),
        (lambda g: torch.diag_embed(g) + g.unsqueeze(-1) * g.unsqueeze(-2), "entries differ"),
        (lambda g: g * (1 - g), "expected shape"),
        (lambda g: g.unsqueeze(-1) * g.unsqueeze(-2) - torch.diag_embed(g), "the sign is flipped"),
        # formulas for one vector: right for gamma of shape (K,), wrong once gamma has batch axes
        (lambda g: torch.diag(g) - torch.outer(g, g), r"gamma of shape \(3, 4\).*leading axes of gamma are a batch"),
        (lambda g: torch.diag_embed(g) - g[:, None] * g[None, :], "leading axes of gamma are a batch"),
        # all leading axes flattened into one, and never restored
        (lambda g: responsibility_jacobian(g.reshape(-1, g.shape[-1]) if g.dim() > 1 else g),
         r"J has shape \(6, 7, 7\), expected \(2, 3, 7, 7\): the leading axes of gamma are a batch"),
    ],
)
def test_check_responsibility_jacobian_names_the_mistake(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_responsibility_jacobian(wrong)


# ----------------------------------------------------------------------------------------------- chapter 6
def causal_gma(gamma_q, gamma_k, v, eps):
    memory = (gamma_k.unsqueeze(-1) * v.unsqueeze(-2)).cumsum(-3)
    normalizer = gamma_k.cumsum(-2)
    numerator = (gamma_q.unsqueeze(-1) * memory).sum(-2)
    return numerator / ((gamma_q * normalizer).sum(-1, keepdim=True) + eps)


def recurrent_step(gamma_q_t, gamma_k_t, v_t, memory, normalizer, eps):
    memory = memory + gamma_k_t.unsqueeze(-1) * v_t.unsqueeze(-2)
    normalizer = normalizer + gamma_k_t
    output = (gamma_q_t.unsqueeze(-1) * memory).sum(-2) / ((gamma_q_t * normalizer).sum(-1, keepdim=True) + eps)
    return output, memory, normalizer


def test_ch06_checkers_accept_the_reference_solutions(capsys):
    check_causal_gma(causal_gma)
    assert capsys.readouterr().out.startswith("Exercise 6.1: correct")
    check_recurrent_step(recurrent_step)
    assert capsys.readouterr().out.startswith("Exercise 6.2: correct")


def _bidirectional(gamma_q, gamma_k, v, eps):
    return read_memory(gamma_q, *write_memory(gamma_k, v), eps)


def _exclusive(gamma_q, gamma_k, v, eps):
    shifted = F.pad(gamma_k[..., :-1, :], (0, 0, 1, 0)), F.pad(v[..., :-1, :], (0, 0, 1, 0))
    return causal_gma(gamma_q, *shifted, eps)


def _suffix_leak(gamma_q, gamma_k, v, eps):
    output = causal_gma(gamma_q, gamma_k, v, eps)
    return output + 1e-3 * v[..., -1:, :].sum(-1, keepdim=True)


@pytest.mark.parametrize(
    "wrong, message",
    [
        (_bidirectional, "the future leaks"),
        (_suffix_leak, "the future leaks"),
        (_exclusive, "include token i"),
        (lambda gq, gk, v, eps: causal_gma(gq, gk, v, eps)[..., :-1, :], "expected shape"),
    ],
)
def test_check_causal_gma_names_the_mistake(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_causal_gma(wrong)


def _read_before_write(gamma_q_t, gamma_k_t, v_t, memory, normalizer, eps):
    output = (gamma_q_t.unsqueeze(-1) * memory).sum(-2) / ((gamma_q_t * normalizer).sum(-1, keepdim=True) + eps)
    return output, memory + gamma_k_t.unsqueeze(-1) * v_t.unsqueeze(-2), normalizer + gamma_k_t


def _growing_state(gamma_q_t, gamma_k_t, v_t, memory, normalizer, eps):
    output, memory, normalizer = recurrent_step(gamma_q_t, gamma_k_t, v_t, memory, normalizer, eps)
    return output, torch.cat([memory, memory[..., :1, :]], dim=-2), normalizer


def _forgetful(gamma_q_t, gamma_k_t, v_t, memory, normalizer, eps):
    return recurrent_step(gamma_q_t, gamma_k_t, v_t, 0 * memory, 0 * normalizer, eps)


@pytest.mark.parametrize(
    "wrong, message",
    [
        (_read_before_write, "before writing"),
        (_growing_state, "keep its size"),
        (_forgetful, "entries differ"),
        (lambda *args: recurrent_step(*args)[0], "return a triple"),
    ],
)
def test_check_recurrent_step_names_the_mistake(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        check_recurrent_step(wrong)


def _stub(*args):
    raise NotImplementedError


@pytest.mark.parametrize(
    "check, number",
    [
        (check_write_memory, "4.1"),
        (check_read_memory, "4.2"),
        (check_flop_count, "4.3"),
        (check_raw_for_variance, "5.1"),
        (check_responsibility_jacobian, "5.2"),
        (check_causal_gma, "6.1"),
        (check_recurrent_step, "6.2"),
    ],
)
def test_a_stub_is_reported_as_not_attempted_and_strict_makes_it_fail(check, number, capsys):
    assert check(_stub) is None
    assert capsys.readouterr().out.startswith(f"Exercise {number}: not attempted yet")
    with pytest.raises(NotAttempted):
        check(_stub, strict=True)


def test_checkers_reject_a_non_callable():
    with pytest.raises(TypeError, match="fn must be a function"):
        check_causal_gma("causal_gma")
