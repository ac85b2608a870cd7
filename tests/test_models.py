"""Tests for the encoder classifier and the causal LM of chapters 9 and 10."""
import pytest
import torch

import gma_teach
from gma_teach.models import DecoderLM, EncoderClassifier, parameter_counts

VOCAB = 23
SMALL = {"gma": {"n_components": 6, "chunk_size": 4}, "performer": {"n_features": 12, "chunk_size": 4},
         "linear": {"chunk_size": 4}, "mamba": {"d_state": 4, "chunk_size": 4}, "softmax": {}, "sdpa": {},
         "linformer": {"k": 5}, "uniform": {}, "none": {}}
CAUSAL = ["gma", "softmax", "sdpa", "linear", "performer", "mamba", "uniform", "none"]


def _tokens(b, n, seed=0, low=1):
    return torch.randint(low, VOCAB, (b, n), generator=torch.Generator().manual_seed(seed))


def _lm(mixer, **kw):
    torch.manual_seed(0)
    return DecoderLM(VOCAB, 16, 2, 2, mixer=mixer, max_seq_len=24, mixer_options=SMALL[mixer], **kw).double()


@pytest.mark.parametrize("pooling", ["cls", "mean"])
@pytest.mark.parametrize("mixer", list(SMALL))
def test_classifier_shapes(mixer, pooling):
    model = EncoderClassifier(VOCAB, 3, 16, 2, 2, mixer=mixer, max_seq_len=20, pooling=pooling,
                              mixer_options=SMALL[mixer])
    logits = model(_tokens(4, 11))
    assert logits.shape == (4, 3) and torch.isfinite(logits).all()


@pytest.mark.parametrize("mixer, pooling", [(m, "cls") for m in ("gma", "softmax", "sdpa", "linear", "performer",
                                                                  "linformer", "uniform")]
                         + [("mamba", "mean"), ("gma", "mean")])
def test_classifier_ignores_padding(mixer, pooling):
    torch.manual_seed(1)
    model = EncoderClassifier(VOCAB, 3, 16, 2, 2, mixer=mixer, max_seq_len=20, pooling=pooling,
                              mixer_options=SMALL[mixer]).double()
    tokens = _tokens(2, 9)
    padded = torch.cat([tokens, torch.zeros(2, 6, dtype=torch.long)], dim=1)
    torch.testing.assert_close(model(padded), model(tokens), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("mixer", CAUSAL)
def test_language_model_is_causal(mixer):
    model = _lm(mixer)
    tokens = _tokens(2, 17)
    logits = model(tokens)
    assert logits.shape == (2, 17, VOCAB)
    for cut in (1, 9, 16):
        changed = tokens.clone()
        changed[:, cut:] = _tokens(2, 17 - cut, seed=cut)
        assert torch.equal(model(changed)[:, :cut], logits[:, :cut]), f"{mixer} LM leaks at {cut}"


@pytest.mark.parametrize("mixer", CAUSAL)
def test_recurrent_greedy_generation_equals_full_forward_generation(mixer):
    model = _lm(mixer)
    prompt = _tokens(2, 5, seed=3)
    recurrent = model.generate(prompt, 8, temperature=0, use_recurrent=True)
    full = model.generate(prompt, 8, temperature=0, use_recurrent=False)
    assert recurrent.shape == (2, 13) and torch.equal(recurrent[:, :5], prompt)
    assert torch.equal(recurrent, full)
    # and the greedy choice really is the argmax of the full forward at every step
    logits = model(full[:, :-1])
    assert torch.equal(logits[:, 4:].argmax(-1), full[:, 5:])


def test_sampling_is_reproducible_and_respects_top_k():
    model = _lm("gma")
    prompt = _tokens(3, 4)
    first = model.generate(prompt, 6, temperature=1.0, top_k=1, generator=torch.Generator().manual_seed(0))
    assert torch.equal(first, model.generate(prompt, 6, temperature=0))  # top_k=1 is greedy
    a = model.generate(prompt, 6, temperature=1.5, generator=torch.Generator().manual_seed(7))
    b = model.generate(prompt, 6, temperature=1.5, generator=torch.Generator().manual_seed(7))
    assert torch.equal(a, b)


def test_parameter_counts_split_mixer_and_rest_and_count_tied_weights_once():
    model = DecoderLM(VOCAB, 16, 2, 2, mixer="softmax", max_seq_len=24)
    counts = parameter_counts(model)
    mixer = sum(p.numel() for block in model.blocks for p in block.mixer.parameters())
    assert counts["mixer"] == mixer == 2 * 4 * (16 * 16 + 16)
    assert counts["total"] == sum(p.numel() for p in model.parameters()) == counts["mixer"] + counts["rest"]
    assert counts["rest"] > VOCAB * 16  # embedding counted once although tied to the output
    layer = gma_teach.make_mixer("gma", 16, 2, n_components=4)
    assert parameter_counts(layer)["rest"] == 0


@pytest.mark.parametrize("call, error, message", [
    (lambda: EncoderClassifier(VOCAB, 3, 16, 1, 2, max_seq_len=8, pooling="max"), ValueError, "pooling"),
    (lambda: EncoderClassifier(VOCAB, 3, 16, 1, 2, max_seq_len=8)(torch.zeros(1, 9, dtype=torch.long)),
     ValueError, "max_seq_len"),
    (lambda: EncoderClassifier(VOCAB, 3, 16, 1, 2, max_seq_len=8)(torch.zeros(1, 4)), TypeError, "int64"),
    (lambda: DecoderLM(VOCAB, 16, 1, 2, mixer="linformer", max_seq_len=8), ValueError, "causal"),
    (lambda: DecoderLM(VOCAB, 16, 1, 2, max_seq_len=8)(torch.full((1, 3), VOCAB)), ValueError, "token ids"),
    (lambda: DecoderLM(VOCAB, 16, 1, 2, max_seq_len=8).generate(torch.ones(1, 5, dtype=torch.long), 4),
     ValueError, "exceeds"),
    (lambda: DecoderLM(VOCAB, 16, 1, 2, max_seq_len=8, dropout=1.0), ValueError, "dropout"),
])
def test_bad_arguments_raise_clear_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()
