"""Chapters 9-10 exercise checkers: each accepts a correct solution, rejects typical mistakes naming them, and
reports a stub as not attempted (strict: raises)."""
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from gma_teach import train
from gma_teach.exercises import (
    ExerciseError,
    NotAttempted,
    check_chunked_causal_gma,
    check_cross_attention_gma,
    check_k_sweep,
    check_listops_evaluator,
    check_listops_tokenizer,
    check_multi_head_gma,
    check_pack,
    check_perplexity,
    check_state_bytes,
)
from gma_teach.mixing import read_memory, write_memory
from gma_teach.models import DecoderLM


def stub(*args):
    raise NotImplementedError("Exercise")


def assert_protocol(check, solution, capsys, *args):
    """The solution passes, a stub is reported as not attempted (and raises with strict=True)."""
    check(solution, *args)
    assert capsys.readouterr().out.startswith(f"Exercise {check.exercise}: correct")
    assert check(stub, *args) is None
    assert "not attempted yet" in capsys.readouterr().out
    with pytest.raises(NotAttempted):
        check(stub, *args, strict=True)


# ------------------------------------------------------------------------------------------ 9.1 and 9.2
def split_heads(layer, t, width):
    return t.unflatten(-1, (layer.n_heads, width)).transpose(1, 2)


def multi_head(layer, x, context=None, mask=None, *, transpose=True, swap=False):
    """An independent forward from the layer's parts (optionally with a named mistake)."""
    source = x if context is None else context
    if transpose:
        q = split_heads(layer, layer.q_proj(x), layer.d_route)
        k = split_heads(layer, layer.k_proj(source), layer.d_route)
        v = split_heads(layer, layer.v_proj(source), layer.d_value)
    else:
        def split(t, width):
            return t.reshape(t.shape[0], layer.n_heads, t.shape[1], width)
        q, k, v = (split(layer.q_proj(x), layer.d_route), split(layer.k_proj(source), layer.d_route),
                   split(layer.v_proj(source), layer.d_value))
    if swap:
        q, k = k, q
    gamma_q, gamma_k = layer.mixture(q), layer.mixture(k)
    if mask is not None:
        gamma_k = gamma_k * mask[:, None, :, None]
    output = read_memory(gamma_q, *write_memory(gamma_k, v), layer.eps)
    return layer.out_proj(output.transpose(1, 2).flatten(-2))


def test_multi_head_gma_checker(capsys):
    assert_protocol(check_multi_head_gma, multi_head, capsys)
    with pytest.raises(ExerciseError, match="^Exercise 9.1: .*transposed"):
        check_multi_head_gma(lambda layer, x: multi_head(layer, x, transpose=False))
    with pytest.raises(ExerciseError, match="^Exercise 9.1: .*swapped"):
        check_multi_head_gma(lambda layer, x: multi_head(layer, x, swap=True))
    with pytest.raises(ExerciseError, match="^Exercise 9.1: .*from the layer's parts"):
        check_multi_head_gma(lambda layer, x: layer(x))

    def no_out_proj(layer, x):
        q, k = split_heads(layer, layer.q_proj(x), layer.d_route), split_heads(layer, layer.k_proj(x), layer.d_route)
        v = split_heads(layer, layer.v_proj(x), layer.d_value)
        output = read_memory(layer.mixture(q), *write_memory(layer.mixture(k), v), layer.eps)
        return output.transpose(1, 2).flatten(-2)

    with pytest.raises(ExerciseError, match="out_proj"):
        check_multi_head_gma(no_out_proj)


def test_cross_attention_gma_checker(capsys):
    assert_protocol(check_cross_attention_gma, multi_head, capsys)
    with pytest.raises(ExerciseError, match="^Exercise 9.2: padded context tokens still write"):
        check_cross_attention_gma(lambda layer, x, context, mask: multi_head(layer, x, context))

    with pytest.raises(ExerciseError, match="normalizer"):
        check_cross_attention_gma(_zero_values)


def _zero_values(layer, x, context, mask):
    q = split_heads(layer, layer.q_proj(x), layer.d_route)
    k = split_heads(layer, layer.k_proj(context), layer.d_route)
    v = split_heads(layer, layer.v_proj(context), layer.d_value) * mask[:, None, :, None]
    output = read_memory(layer.mixture(q), *write_memory(layer.mixture(k), v), layer.eps)
    return layer.out_proj(output.transpose(1, 2).flatten(-2))


# ---------------------------------------------------------------------------------------------------- 10.1
def chunked(gamma_q, gamma_k, v, eps, chunk_size, *, carry=True, leak=False):
    n_tokens = gamma_q.shape[-2]
    n_chunks = -(-n_tokens // chunk_size)
    pad = n_chunks * chunk_size - n_tokens

    def chunks(t):
        return F.pad(t, (0, 0, 0, pad)).unflatten(-2, (n_chunks, chunk_size))

    queries, keys, values = chunks(gamma_q), chunks(gamma_k), chunks(torch.cat([v, torch.ones_like(v[..., :1])], -1))
    per_chunk = keys.transpose(-1, -2) @ values  # (..., n_chunks, K, d_v + 1)
    if leak:  # inclusive prefix minus the chunk's own sum: rounding lets the chunk's later tokens in
        carried = per_chunk.cumsum(-3) - per_chunk
    else:
        carried = torch.cat([torch.zeros_like(per_chunk[..., :1, :, :]), per_chunk.cumsum(-3)[..., :-1, :, :]], -3)
    carried = carried if carry else torch.zeros_like(carried)
    inside = (queries @ keys.transpose(-1, -2)).tril()
    both = queries @ carried + inside @ values
    output = both[..., :-1] / (both[..., -1:] + eps)
    return output.flatten(-3, -2)[..., :n_tokens, :]


def prefix_sums(gamma_q, gamma_k, v, eps, chunk_size):
    memory = (gamma_k.unsqueeze(-1) * v.unsqueeze(-2)).cumsum(-3)  # (..., N, K, d_v): the memory-hungry form
    return (gamma_q.unsqueeze(-2) @ memory).squeeze(-2) / ((gamma_q * gamma_k.cumsum(-2)).sum(-1, keepdim=True) + eps)


def test_chunked_causal_gma_checker(capsys):
    assert_protocol(check_chunked_causal_gma, chunked, capsys)
    with pytest.raises(ExerciseError, match="^Exercise 10.1: each chunk only sees its own tokens"):
        check_chunked_causal_gma(lambda *args: chunked(*args, carry=False))
    with pytest.raises(ExerciseError, match="^Exercise 10.1: the future leaks"):
        check_chunked_causal_gma(lambda *args: chunked(*args, leak=True))
    with pytest.raises(ExerciseError, match="^Exercise 10.1: .*MiB at its peak"):
        check_chunked_causal_gma(prefix_sums)

    def multiples_only(gamma_q, gamma_k, v, eps, chunk_size):
        shape = (*gamma_q.shape[:-2], gamma_q.shape[-2] // chunk_size, chunk_size, gamma_q.shape[-1])
        gamma_q.reshape(shape)  # fails unless N is a multiple of C
        return chunked(gamma_q, gamma_k, v, eps, chunk_size)

    with pytest.raises(ExerciseError, match="pad the last chunk"):
        check_chunked_causal_gma(multiples_only)


# ---------------------------------------------------------------------------------------------------- 10.2
@pytest.fixture(scope="module")
def tiny_lm_data():
    """Blocks of 13 ids over a vocabulary of 11, 70% of them id 5: a few steps learn better than uniform."""
    generator = torch.Generator().manual_seed(0)
    stream = torch.randint(0, 11, (48 * 13,), generator=generator)
    stream[torch.rand(len(stream), generator=generator) < 0.7] = 5
    blocks = stream.view(48, 13)
    return SimpleNamespace(train=blocks[:40], val=blocks[40:])


@pytest.fixture(scope="module")
def trained(tiny_lm_data):
    models = {}
    for k in (2, 4):
        torch.manual_seed(k)
        model = DecoderLM(11, 16, 1, 2, mixer="gma", max_seq_len=12, d_ff=32, mixer_options={"n_components": k})
        history = train.fit(model, tiny_lm_data.train, steps=12, lr=2e-2, batch_size=8, task="lm", progress=False)
        models[k] = (model.eval(), history.tokens_per_second)
    return models


def sweep_from(trained, data, *, loss="val", state="all"):
    def sweep(ks):
        rows = []
        for k in ks:
            model, speed = trained[k]
            measured = train.evaluate(model, data.val if loss == "val" else data.train, task="lm", batch_size=8)
            states = [block.mixer.init_state(1) for block in model.blocks]
            state_bytes = {"all": sum(s.nbytes() for s in states),
                           "memory": sum(s.memory.numel() * s.memory.element_size() for s in states)}[state]
            rows.append({"n_components": k, "model": model, "val_loss": measured["loss"], "tokens_per_second": speed,
                         "state_bytes": state_bytes})
        return rows
    return sweep


def test_k_sweep_checker(trained, tiny_lm_data, capsys):
    assert_protocol(check_k_sweep, sweep_from(trained, tiny_lm_data), capsys, [2, 4], tiny_lm_data)
    with pytest.raises(ExerciseError, match="^Exercise 10.2: K=2: val_loss .* not the training loss"):
        check_k_sweep(sweep_from(trained, tiny_lm_data, loss="train"), [2, 4], tiny_lm_data)
    with pytest.raises(ExerciseError, match="left out the normalizer"):
        check_k_sweep(sweep_from(trained, tiny_lm_data, state="memory"), [2, 4], tiny_lm_data)
    def one_model(ks):  # the K=2 model reported under every K
        rows = sweep_from(trained, tiny_lm_data)([ks[0]] * len(ks))
        return [{**row, "n_components": k} for row, k in zip(rows, ks)]

    with pytest.raises(ExerciseError, match="build a new model for every K"):
        check_k_sweep(one_model, [2, 4], tiny_lm_data)
    untrained = DecoderLM(11, 16, 1, 2, mixer="gma", max_seq_len=12, mixer_options={"n_components": 4})

    def with_untrained(ks):
        rows = sweep_from(trained, tiny_lm_data)(ks)
        rows[1].update(model=untrained, val_loss=train.evaluate(untrained, tiny_lm_data.val, task="lm")["loss"],
                       state_bytes=sum(b.mixer.init_state(1).nbytes() for b in untrained.blocks))
        return rows

    with pytest.raises(ExerciseError, match="not trained"):
        check_k_sweep(with_untrained, [2, 4], tiny_lm_data)
    with pytest.raises(ValueError, match="two distinct"):
        check_k_sweep(stub, [4], tiny_lm_data)


# ------------------------------------------------------------------------------- an earlier edition's checkers


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
        check_perplexity(lambda z, t: F.cross_entropy(z.reshape(-1, z.shape[-1]), t.reshape(-1)).item())
    with pytest.raises(ExerciseError, match="1 / mean"):
        check_perplexity(lambda z, t: 1 / z.softmax(-1).gather(-1, t[..., None]).mean().item())


def test_state_bytes_checker():
    assert "correct" in check_state_bytes(lambda b, h, k, d, e: (b * h * k * d + b * h * k) * e)
    with pytest.raises(ExerciseError, match="normalizer"):
        check_state_bytes(lambda b, h, k, d, e: b * h * k * d * e)
