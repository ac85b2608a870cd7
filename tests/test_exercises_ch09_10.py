"""Chapters 9-10 exercise checkers: each accepts a correct solution and rejects typical mistakes, naming them."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from gma_teach.exercises import (
    ExerciseError,
    check_listops_evaluator,
    check_listops_tokenizer,
    check_pack,
    check_perplexity,
    check_state_bytes,
)


def evaluate_with(median):
    def evaluate(source):
        stack, result = [], None
        for token in source.replace("(", " ").replace(")", " ").split():
            if token.startswith("["):
                stack.append((token, []))
                continue
            if token == "]":
                operator, args = stack.pop()
                value = {"[MIN": min, "[MAX": max, "[MED": median, "[SM": lambda a: sum(a) % 10}[operator](args)
            else:
                value = int(token)
            if stack:
                stack[-1][1].append(value)
            else:
                result = value
        return result
    return evaluate


def test_listops_evaluator_checker():
    assert "correct" in check_listops_evaluator(evaluate_with(lambda a: int(np.median(a))))
    with pytest.raises(ExerciseError, match="MED"):
        check_listops_evaluator(evaluate_with(lambda a: round(float(np.median(a)))))  # rounds instead of truncating
    with pytest.raises(ExerciseError, match="MED"):
        check_listops_evaluator(evaluate_with(lambda a: sorted(a)[len(a) // 2]))  # upper middle value
    with pytest.raises(ExerciseError, match="raised"):
        check_listops_evaluator(lambda source: int(source))
    with pytest.raises(ExerciseError, match="nesting"):
        check_listops_evaluator(lambda source: int(source.replace("(", " ").replace(")", " ").split()[1]))


def test_listops_tokenizer_checker():
    def tokenize(source):
        return source.replace("(", "").replace(")", "").replace("]", "X").split()

    assert "correct" in check_listops_tokenizer(tokenize)
    with pytest.raises(ExerciseError, match="parentheses"):
        check_listops_tokenizer(lambda s: s.replace("]", "X").split())
    with pytest.raises(ExerciseError, match="'X'"):
        check_listops_tokenizer(lambda s: s.replace("(", "").replace(")", "").split())


def test_pack_checker():
    def pack(stream, block_size):
        n = (len(stream) - 1) // block_size
        return torch.stack([stream[i * block_size: i * block_size + block_size + 1] for i in range(n)])

    assert "correct" in check_pack(pack)
    with pytest.raises(ExerciseError, match="block_size \\+ 1"):
        check_pack(lambda s, b: s[: len(s) // b * b].view(-1, b))
    with pytest.raises(ExerciseError, match="i \\* block_size"):
        check_pack(lambda s, b: s[: len(s) // (b + 1) * (b + 1)].view(-1, b + 1))


def test_perplexity_checker():
    def perplexity(logits, targets):
        return math.exp(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)).item())

    assert "correct" in check_perplexity(perplexity)
    with pytest.raises(ExerciseError, match="exponential"):
        check_perplexity(lambda l, t: F.cross_entropy(l.reshape(-1, l.shape[-1]), t.reshape(-1)).item())
    with pytest.raises(ExerciseError, match="1 / mean"):
        check_perplexity(lambda l, t: 1 / l.softmax(-1).gather(-1, t[..., None]).mean().item())


def test_state_bytes_checker():
    assert "correct" in check_state_bytes(lambda b, h, k, d, e: (b * h * k * d + b * h * k) * e)
    with pytest.raises(ExerciseError, match="normalizer"):
        check_state_bytes(lambda b, h, k, d, e: b * h * k * d * e)
