"""Chapters 1-3's exercise checkers: each accepts a correct solution and rejects wrong ones with a message that
names the problem. The solutions here are written independently of the package (plain torch)."""
import math

import pytest
import torch

from gma_teach.exercises import ExerciseError, NotAttempted, ch01, ch02, ch03, checker
from gma_teach.exercises._common import call_reader, correct_message, not_attempted_message


# ----------------------------------------------------------------------------------------------- the protocol
def _stub(*args):
    raise NotImplementedError("your code here")


@pytest.mark.parametrize(
    "check, number",
    [
        (ch01.check_softmax_attention, "1.1"),
        (ch01.check_causal_attention, "1.2"),
        (ch02.check_log_responsibilities, "2.1"),
        (ch02.check_gemm_coefficients, "2.2"),
        (ch03.check_affinity, "3.1"),
        (ch03.check_affinity_rank, "3.2"),
    ],
)
def test_a_stub_is_reported_as_not_attempted_and_strict_makes_it_fail(check, number, capsys):
    assert check.exercise == number
    assert check(_stub) is None
    assert capsys.readouterr().out == (
        f"Exercise {number}: not attempted yet (fill in the cell above and run it again)\n"
    )
    with pytest.raises(NotAttempted):
        check(_stub, strict=True)


def test_a_wrong_answer_names_its_exercise():
    with pytest.raises(ExerciseError, match=r"^Exercise 1\.2: no causal mask"):
        ch01.check_causal_attention(softmax_attention)


def test_checker_decorator_prints_the_remark_and_keeps_the_check_signature(capsys):
    @checker("12.3")
    def check_double(fn, *, seed=0):
        """Doc."""
        if call_reader(fn, 2) != 4:
            raise ExerciseError("double it")
        return "remark" if seed == 0 else None

    check_double(lambda x: 2 * x)
    check_double(lambda x: 2 * x, seed=1)
    assert capsys.readouterr().out == "Exercise 12.3: correct -- remark\nExercise 12.3: correct\n"
    assert check_double.__doc__ == "Doc." and check_double.__name__ == "check_double"
    with pytest.raises(ExerciseError, match=r"^Exercise 12\.3: double it$"):
        check_double(lambda x: x)
    assert not_attempted_message("12.3").startswith("Exercise 12.3: not attempted yet")


def test_a_long_remark_wraps_to_the_page():
    remark = "the in-chunk products add work but no traffic, so the causal kernel meets the ridge sooner"
    lines = correct_message("7.5", remark).split("\n")
    assert len(lines) == 2 and all(len(line) <= 75 for line in lines)
    assert lines[0].startswith("Exercise 7.5: correct -- the in-chunk") and lines[1].startswith("    ")
    assert " ".join(line.strip() for line in lines) == f"Exercise 7.5: correct -- {remark}"
    assert correct_message("7.5") == "Exercise 7.5: correct"
    assert len(not_attempted_message("12.3")) <= 75


@pytest.mark.parametrize("number", ["4", "4.1a", 4.1, "Exercise 4.1"])
def test_checker_decorator_rejects_a_malformed_number(number):
    with pytest.raises(ValueError, match="exercise must be a number like '4.1'"):
        checker(number)


def test_call_reader_turns_a_bug_into_an_exercise_error_and_a_stub_into_not_attempted():
    with pytest.raises(ExerciseError, match="your function raised ZeroDivisionError"):
        call_reader(lambda: 1 / 0)
    with pytest.raises(NotAttempted):
        call_reader(_stub)
    with pytest.raises(TypeError, match="fn must be a function, got str"):
        call_reader("not a function")


# ----------------------------------------------------------------------------------------------- chapter 1
def softmax_attention(q, k, v):
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    return torch.softmax(scores, dim=-1) @ v


def causal_attention(q, k, v):
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    n_q, n_k = scores.shape[-2:]
    future = torch.ones(n_q, n_k, dtype=torch.bool, device=q.device).triu(1)
    return torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1) @ v


def unscaled_attention(q, k, v):
    return torch.softmax(q @ k.transpose(-1, -2), dim=-1) @ v


def naive_exp_attention(q, k, v):
    weights = torch.exp(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]))
    return weights / weights.sum(-1, keepdim=True) @ v


def mask_after_softmax(q, k, v):
    weights = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), dim=-1)
    return weights.tril() @ v


def test_ch01_checkers_accept_reference_solutions(capsys):
    assert ch01.check_softmax_attention(softmax_attention) is None
    assert capsys.readouterr().out.startswith("Exercise 1.1: correct")
    ch01.check_causal_attention(causal_attention)
    assert capsys.readouterr().out.startswith("Exercise 1.2: correct")


@pytest.mark.parametrize(
    "wrong, message",
    [
        (unscaled_attention, "sqrt(d)"),
        (naive_exp_attention, "overflow"),
        (lambda q, k, v: torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), -2) @ v, "wrong axis"),
        (lambda q, k, v: v[..., :-1, :], "expected shape"),
        (lambda q, k, v: 1 / 0, "ZeroDivisionError"),
    ],
)
def test_ch01_softmax_checker_names_the_problem(wrong, message):
    with pytest.raises(ExerciseError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ch01.check_softmax_attention(wrong)


@pytest.mark.parametrize(
    "wrong, message", [(mask_after_softmax, "future leaks"), (softmax_attention, "no causal mask")]
)
def test_ch01_causal_checker_names_the_problem(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        ch01.check_causal_attention(wrong)


# ----------------------------------------------------------------------------------------------- chapter 2
def _log_joint(x, means, variances, log_priors):
    diff = x[:, None, :] - means[None]
    return log_priors - 0.5 * (diff**2 / variances + torch.log(2 * math.pi * variances)).sum(-1)


def log_responsibilities(x, means, variances, log_priors):
    return torch.log_softmax(_log_joint(x, means, variances, log_priors), dim=-1)


def gemm_coefficients(means, variances, log_priors):
    weight = torch.cat([-0.5 / variances, means / variances], dim=-1)
    constant = log_priors - 0.5 * (torch.log(2 * math.pi * variances) + means**2 / variances).sum(-1)
    return weight, constant


def test_ch02_checkers_accept_reference_solutions(capsys):
    ch02.check_log_responsibilities(log_responsibilities)
    assert capsys.readouterr().out.startswith("Exercise 2.1: correct")
    ch02.check_gemm_coefficients(gemm_coefficients)
    assert capsys.readouterr().out.startswith("Exercise 2.2: correct -- [x*x, x] @ W.T + c reproduces")


@pytest.mark.parametrize(
    "wrong, message",
    [
        (lambda *a: torch.softmax(_log_joint(*a), -1), "not their logarithm"),
        (lambda *a: _log_joint(*a), "normalize each row|not normalized"),
        (lambda *a: torch.log(torch.softmax(_log_joint(*a), -1)), "non-finite"),
        (
            lambda *a: torch.log(torch.exp(_log_joint(*a)) / torch.exp(_log_joint(*a)).sum(-1, keepdim=True)),
            "non-finite",
        ),
    ],
)
def test_ch02_log_responsibility_checker_names_the_problem(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        ch02.check_log_responsibilities(wrong)


def _without_two_pi(means, variances, log_priors):
    weight, constant = gemm_coefficients(means, variances, log_priors)
    return weight, constant + 0.5 * means.shape[-1] * math.log(2 * math.pi)


def _without_prior(means, variances, log_priors):
    weight, constant = gemm_coefficients(means, variances, log_priors)
    return weight, constant - log_priors


def _flipped_quadratic(means, variances, log_priors):
    weight, constant = gemm_coefficients(means, variances, log_priors)
    d = means.shape[-1]
    return torch.cat([-weight[:, :d], weight[:, d:]], -1), constant


@pytest.mark.parametrize(
    "wrong, message",
    [
        (_without_two_pi, "normalizing constant"),
        (_without_prior, "log prior"),
        (_flipped_quadratic, "wrong sign"),
        (lambda m, v, p: gemm_coefficients(m, v, p)[0], "pair"),
        (lambda m, v, p: (gemm_coefficients(m, v, p)[0].T, gemm_coefficients(m, v, p)[1]), "expected shape"),
    ],
)
def test_ch02_gemm_checker_names_the_problem(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        ch02.check_gemm_coefficients(wrong)


# ----------------------------------------------------------------------------------------------- chapter 3
def affinity(gamma_q, gamma_k, eps):
    scores = gamma_q @ gamma_k.T
    return scores / (scores.sum(-1, keepdim=True) + eps)


def affinity_rank(gamma_q, gamma_k):
    singular_values = torch.linalg.svdvals(gamma_q @ gamma_k.T)
    tolerance = singular_values.max() * max(gamma_q.shape[0], gamma_k.shape[0]) * torch.finfo(gamma_q.dtype).eps
    return int((singular_values > tolerance).sum())


def test_ch03_affinity_checker_asks_for_different_numbers_of_queries_and_keys_first():
    shapes = []

    def recording(gamma_q, gamma_k, eps):
        shapes.append((gamma_q.shape[0], gamma_k.shape[0]))
        return affinity(gamma_q, gamma_k, eps)

    ch03.check_affinity(recording)
    assert shapes[0][0] != shapes[0][1] and any(n_q == n_k for n_q, n_k in shapes)


def test_ch03_checkers_accept_reference_solutions(capsys):
    ch03.check_affinity(affinity)
    assert capsys.readouterr().out.startswith("Exercise 3.1: correct")
    ch03.check_affinity_rank(affinity_rank)
    assert capsys.readouterr().out.startswith("Exercise 3.2: correct")


@pytest.mark.parametrize(
    "wrong, message",
    [
        (lambda q, k, eps: q @ k.T, "not normalized"),
        (lambda q, k, eps: (q @ k.T) / ((q @ k.T).sum(0, keepdim=True) + eps), "over queries"),
        (lambda q, k, eps: (q @ k.T) / (q @ k.T).sum(-1, keepdim=True), "eps=0.5 is missing"),
        (lambda q, k, eps: affinity(q, k, eps)[:, :-1], "expected shape"),
        (lambda q, k, eps: -affinity(q, k, eps), "negative"),
        (lambda q, k, eps: affinity(k, q, eps), r"shape \(11, 5\) for N_q=5 queries, N_k=11 keys: it is transposed"),
        (lambda q, k, eps: affinity(q, k, eps).T, "it is transposed"),
        # right on every rectangular case, transposed on the square one: caught by its values, not its shape
        (lambda q, k, eps: affinity(q, k, eps) if q.shape[0] != k.shape[0] else affinity(k, q, eps),
         r"A is transposed \(N_q=7 queries, N_k=7 keys\)"),
        (lambda q, k, eps: affinity(q, k, eps) if q.shape[0] != k.shape[0] else affinity(q, k, eps).T,
         "A is transposed"),
    ],
)
def test_ch03_affinity_checker_names_the_problem(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        ch03.check_affinity(wrong)


@pytest.mark.parametrize(
    "wrong, message",
    [
        (lambda q, k: min(q.shape[0], k.shape[0]), "rounding noise"),
        (lambda q, k: q.shape[1], "expected 5"),
        (lambda q, k: "3", "as an int"),
    ],
)
def test_ch03_rank_checker_names_the_problem(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        ch03.check_affinity_rank(wrong)
