"""Chapters 1-3's exercise checkers: each accepts a correct solution and rejects wrong ones with a message that
names the problem. The solutions here are written independently of the package (plain torch)."""
import math

import pytest
import torch

from gma_teach.exercises import ExerciseError, ch01, ch02, ch03


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


def test_ch01_checkers_accept_reference_solutions():
    assert "correct" in ch01.check_softmax_attention(softmax_attention)
    assert "correct" in ch01.check_causal_attention(causal_attention)


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


def test_ch02_checkers_accept_reference_solutions():
    assert "correct" in ch02.check_log_responsibilities(log_responsibilities)
    assert "reproduces" in ch02.check_gemm_coefficients(gemm_coefficients)


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


def test_ch03_checkers_accept_reference_solutions():
    assert "correct" in ch03.check_affinity(affinity)
    assert "correct" in ch03.check_affinity_rank(affinity_rank)


@pytest.mark.parametrize(
    "wrong, message",
    [
        (lambda q, k, eps: q @ k.T, "not normalized"),
        (lambda q, k, eps: (q @ k.T) / ((q @ k.T).sum(0, keepdim=True) + eps), "over queries"),
        (lambda q, k, eps: (q @ k.T) / (q @ k.T).sum(-1, keepdim=True), "eps=0.5 is missing"),
        (lambda q, k, eps: affinity(q, k, eps)[:, :-1], "expected shape"),
        (lambda q, k, eps: -affinity(q, k, eps), "negative"),
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
