"""Decoding-state bytes: every registered mixer that decodes has a state formula that counts its state after N
steps, and the book's mixers' states match the formulas of chapter 12, written out here."""
import pytest
import torch

import gma_teach
from gma_teach import baselines, mixers, mixing, preset
from gma_teach.baselines import make_mixer, mixer_state_bytes

D_MODEL, N_HEADS, BATCH = 24, 3, 2
HEAD = D_MODEL // N_HEADS
K, WINDOW, FEATURES = 5, 4, 16
OPTIONS = {  # the book's mixers that decode, at small sizes for the formulas of chapter 12 below
    "gma": {"n_components": K, "d_value": 7},
    "softmax": {}, "sdpa": {},
    "linear": {},
    "performer": {"n_features": FEATURES},
    "mamba": {"d_state": 4, "d_conv": 3, "expand": 2},
    "uniform": {}, "none": {},
    "window": {"window": WINDOW},
    "local_gma": {"window": WINDOW, "n_components": K, "local_heads": 1},
    "decay_linear": {},
    "decay_gma": {"n_components": K},
    "conv": {"kernel_size": 4},
}


def _formula(name, n, size):
    """Per batch row, written out from the state shapes the chapter states (``size`` bytes an element)."""
    return {
        "softmax": 2 * N_HEADS * n * HEAD,
        "sdpa": 2 * N_HEADS * n * HEAD,
        "linear": N_HEADS * (HEAD * HEAD + HEAD),
        "decay_linear": N_HEADS * (HEAD * HEAD + HEAD),
        "performer": N_HEADS * (FEATURES * HEAD + FEATURES + 1),
        "gma": N_HEADS * K * (7 + 1),
        "decay_gma": N_HEADS * K * (HEAD + 1),
        "window": 2 * N_HEADS * WINDOW * HEAD,
        "local_gma": 2 * 1 * WINDOW * HEAD + (N_HEADS - 1) * K * (HEAD + 1),
        "mamba": 2 * D_MODEL * (3 - 1 + 4),
        "uniform": D_MODEL,
        "none": 0,
        "conv": (4 - 1) * D_MODEL,
    }[name] * size


def _decoders() -> list[str]:
    """The registered mixers with a decoding-state formula, in the registry's order."""
    return [name for name in mixers.registered_names() if mixers.entry(name).state_bytes is not None]


def test_every_registered_mixer_that_decodes_has_a_state_formula():
    for name in mixers.registered_names():
        decodes = callable(getattr(mixers.entry(name).cls, "step", None))
        assert (mixers.entry(name).state_bytes is not None) == decodes, name
        assert baselines.STATE_BYTES.get(name) is mixers.entry(name).state_bytes, name
    assert set(OPTIONS) <= set(_decoders())  # the book's formulas below are each a registered mixer's
    assert "linformer" in mixers.registered_names() and "linformer" not in _decoders()  # it does not decode


@pytest.mark.parametrize("name", _decoders())
def test_a_registered_formula_counts_the_state_it_keeps(name):
    """Built with the registry's options for a tiny language model, the mixer's state after ``n`` steps has the bytes
    its formula gives (whatever the mixer: a mixer registered in the package is checked here without a new test)."""
    torch.manual_seed(0)
    options = mixers.entry(name).options(preset("lm", "tiny"))
    mixer = make_mixer(name, D_MODEL, N_HEADS, causal=True, **options)
    state = mixer.init_state(BATCH)
    assert state.nbytes() == mixer_state_bytes(mixer, 0, batch_size=BATCH)
    with torch.no_grad():
        for n in range(1, 4):
            _, state = mixer.step(torch.randn(BATCH, D_MODEL), state)
            assert state.nbytes() == mixer_state_bytes(mixer, n, batch_size=BATCH), (name, n)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_state_bytes_after_n_steps_match_the_formula_and_the_state(name, dtype):
    torch.manual_seed(0)
    mixer = make_mixer(name, D_MODEL, N_HEADS, causal=True, **OPTIONS[name]).to(dtype)
    state = mixer.init_state(BATCH)
    size = torch.empty((), dtype=dtype).element_size()
    assert state.nbytes() == mixer_state_bytes(mixer, 0, batch_size=BATCH) == BATCH * _formula(name, 0, size)
    with torch.no_grad():
        for n in range(1, 8):
            _, state = mixer.step(torch.randn(BATCH, D_MODEL, dtype=dtype), state)
            expected = BATCH * _formula(name, n, size)
            assert state.nbytes() == mixer_state_bytes(mixer, n, batch_size=BATCH) == expected, (name, n)


def test_the_hybrid_state_is_the_sum_of_its_parts():
    mixer = make_mixer("local_gma", D_MODEL, N_HEADS, causal=True, **OPTIONS["local_gma"])
    state = mixer.init_state(BATCH)
    assert type(state).nbytes is mixing.DecodingState.nbytes
    assert state.nbytes() == state.local.nbytes() + state.gma.nbytes() > state.gma.nbytes() > 0
    assert state.local.nbytes() == mixer_state_bytes(mixer.local, 3, batch_size=BATCH)
    assert state.gma.nbytes() == mixer_state_bytes(mixer.gma, 3, batch_size=BATCH)


def test_gma_keeps_its_state_in_float32_even_for_a_half_precision_layer():
    layer = gma_teach.GaussianMixtureAttention(D_MODEL, N_HEADS, K, causal=True).to(torch.bfloat16)
    assert layer.init_state(1).nbytes() == mixer_state_bytes(layer, 10) == N_HEADS * K * (HEAD + 1) * 4


@pytest.mark.parametrize("call, error, message", [
    (lambda: mixer_state_bytes(make_mixer("sdpa", 8, 2), 4), ValueError, "causal=False"),
    (lambda: mixer_state_bytes(make_mixer("window", 8, 2), 4), ValueError, "causal=False"),
    (lambda: mixer_state_bytes(make_mixer("linformer", 8, 2, max_seq_len=8), 4), ValueError, "causal=False"),
    (lambda: mixer_state_bytes(make_mixer("sdpa", 8, 2, causal=True), -1), ValueError, "seq_len must be >= 0"),
    (lambda: mixer_state_bytes(make_mixer("sdpa", 8, 2, causal=True), 2.0), TypeError, "seq_len must be an int"),
    (lambda: mixer_state_bytes(make_mixer("sdpa", 8, 2, causal=True), 2, batch_size=0), ValueError,
     "batch_size"),
    (lambda: mixer_state_bytes(torch.nn.Linear(8, 8), 2), TypeError, "mixer must be a mixer"),
])
def test_bad_inputs_raise_clear_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()
