"""Every registered mixer is alive at the sizes the studies train it at: at initialisation, on unit-variance input,
its output has a non-negligible spread, it moves when the context moves, and every parameter gets a finite, non-zero
gradient.

A mixer that fails here trains as a model with no context (Performer before its fix: key features near 1e-24, a
normalizer far below eps, an output near 1e-14), and every study that holds it measures the bug. The test runs over
``gma_teach.mixers.registered_names()``, so a mixer registered later is checked too. The one exception is the
``none`` control, whose whole job is to return zeros: it is checked to do exactly that.
"""
from types import SimpleNamespace

import pytest
import torch

from gma_teach import make_mixer, mixers, preset
from gma_teach.designs import (
    CAPACITY_STUDY,
    LISTOPS_LRA_STUDY,
    LM_SETTING,
    RECALL_STUDY,
    SLOT_BALANCED_STUDY,
    SLOT_FOLLOW_ONS,
    SLOT_ROUTING_STUDY,
    TEXT_STUDY,
)
from gma_teach.runs.options import mixer_options

SPREAD = 1e-2
"""Smallest standard deviation across sequences of an alive mixer's output on unit-variance input, averaged over
positions and features (a dead one returns its output projection's bias whatever the input: 1e-5 or less)."""

MOVES = 1e-4
"""Smallest change of the last position's output when the token before it is redrawn."""

CONTROLS_THAT_DO_NOT_MIX = {"none"}


def _setting(name, experiment, overrides, seq_len, causal, n_heads=None):
    p = SimpleNamespace(**{**vars(preset(experiment, "small")), **overrides})
    return SimpleNamespace(name=name, p=p, d_model=p.d_model, n_heads=n_heads or p.n_heads, seq_len=seq_len,
                           causal=causal)


def _study_settings():
    """The widths, heads, lengths and feature counts the studies train their mixers at."""
    lra = LISTOPS_LRA_STUDY["overrides"]
    settings = [
        _setting("lm_study", "lm", LM_SETTING, LM_SETTING["seq_len"], causal=True),
        _setting("listops_lra", "listops", lra, lra["max_length"], causal=False),
        _setting("text_standin", "text", TEXT_STUDY["overrides"], preset("text", "small").max_length, causal=False),
    ]
    for width in RECALL_STUDY["widths"]:
        settings.append(_setting(f"recall_d{width}", "lm", {"d_model": width, "n_features": 64},
                                 RECALL_STUDY["seq_len"], causal=True, n_heads=RECALL_STUDY["n_heads"]))
    return settings


SETTINGS = _study_settings()


def _recall_arm(name):
    """The recall study's first arm of mixer ``name`` (its options and head count), or ``None``."""
    return next((arm for arm in RECALL_STUDY["arms"].values() if arm["mixer"] == name), None)


def _build(name, setting):
    """The mixer as its study builds it, or ``None`` where it has no place (causal-only or bidirectional-only)."""
    if setting.causal and not mixers.entry(name).causal_lm:
        return None
    options, n_heads = mixer_options(setting.p, name), setting.n_heads
    arm = _recall_arm(name) if setting.name.startswith("recall") else None
    if arm is not None:  # the recall study gives each arm its own options (and the hybrid two heads)
        options, n_heads = dict(arm.get("options", {})), arm.get("n_heads", n_heads)
    if name == "linformer":
        options["max_seq_len"] = setting.seq_len
    try:
        return make_mixer(name, setting.d_model, n_heads, causal=setting.causal, **options)
    except ValueError as error:
        if "causal" in str(error):  # decay_linear and decay_gma are causal only
            return None
        raise


def _unit_variance_input(setting, batch_size=4):
    """``(B, N, d_model)`` of unit variance: half of it a vector shared by a sequence's tokens, half noise, so that
    even a mixer that averages the whole sequence (``uniform``, bidirectional) has something to return."""
    shared = torch.randn(batch_size, 1, setting.d_model)
    noise = torch.randn(batch_size, setting.seq_len, setting.d_model)
    return (shared + noise) / 2**0.5


@pytest.mark.parametrize("setting", SETTINGS, ids=[s.name for s in SETTINGS])
@pytest.mark.parametrize("name", mixers.registered_names())
def test_every_registered_mixer_is_alive_at_the_studies_sizes(name, setting):
    torch.manual_seed(0)
    mixer = _build(name, setting)
    if mixer is None:
        pytest.skip(f"{name} has no place in a {'causal' if setting.causal else 'bidirectional'} study")
    _assert_alive(mixer, _unit_variance_input(setting), f"{name} at {setting.name}",
                  returns_zeros=name in CONTROLS_THAT_DO_NOT_MIX)


def _assert_alive(mixer, x, label, *, returns_zeros=False):
    """``mixer`` on ``x``: finite; a spread across sequences; its last output moves when the token before it is
    redrawn; every trainable parameter a finite, non-zero gradient (or, ``returns_zeros``, zeros)."""
    output = mixer(x)
    assert torch.isfinite(output).all(), f"{label} returns non-finite values"
    if returns_zeros:
        assert torch.equal(output, torch.zeros_like(output)), f"the {label} control must return zeros"
        return
    spread = float(output.detach().std(dim=0).mean())  # across sequences: a dead mixer returns its output bias
    assert spread > SPREAD, f"{label}: output std across sequences {spread:.3g} (dead)"

    changed = x.clone()
    changed[:, -2] = torch.randn_like(changed[:, -2])
    with torch.no_grad():
        moved = float((mixer(changed)[:, -1] - output[:, -1].detach()).abs().max())
    assert moved > MOVES, f"{label}: the last output moved {moved:.3g} when its context changed"

    direction = torch.randn_like(output)
    (output * direction).sum().backward()
    for parameter_name, parameter in mixer.named_parameters():
        if not parameter.requires_grad:
            continue
        grad = parameter.grad
        assert grad is not None, f"{label}: {parameter_name} gets no gradient"
        assert torch.isfinite(grad).all(), f"{label}: {parameter_name} gets a non-finite gradient"
        assert float(grad.abs().max()) > 0, f"{label}: {parameter_name} gets a zero gradient"


def test_the_settings_are_the_studies():
    """The alive test reads its sizes from the declared studies, so it moves with them."""
    by_name = {s.name: s for s in SETTINGS}
    assert by_name["lm_study"].d_model == LM_SETTING["d_model"] and by_name["lm_study"].seq_len == 128
    assert by_name["listops_lra"].seq_len == LISTOPS_LRA_STUDY["overrides"]["max_length"]
    assert {s.d_model for s in SETTINGS if s.name.startswith("recall")} == set(RECALL_STUDY["widths"])


CAPACITY_STUDIES = {"capacity": CAPACITY_STUDY, "slot_routing": SLOT_ROUTING_STUDY,
                    "slot_balanced": SLOT_BALANCED_STUDY}
CAPACITY_ARMS = tuple((name, arm) for name, declared in CAPACITY_STUDIES.items() for arm in declared.arms)


@pytest.mark.parametrize("name, arm", CAPACITY_ARMS, ids=[f"{name}-{arm}" for name, arm in CAPACITY_ARMS])
def test_every_capacity_arm_is_alive_as_the_study_builds_it(name, arm):
    """The mixers of the capacity test's studies (the capacity, slot-routing and balanced-assignment studies: one
    causal head at their width, each arm's options resolved by the runner) at the study's longest sequence, ``S + 1``
    tokens: alive as above."""
    from gma_teach import study

    declared = CAPACITY_STUDIES[name]
    config = study.resolve(declared, arm)
    seq_len = max(declared.setting["n_pairs"]) + 1
    setting = SimpleNamespace(d_model=config.sizes["d_model"], seq_len=seq_len)
    torch.manual_seed(0)
    mixer = make_mixer(config.arm.mixer, setting.d_model, 1, causal=True, **config.options)
    _assert_alive(mixer, _unit_variance_input(setting), f"capacity arm {arm}")


FOLLOW_ON_ARMS = tuple((key, arm) for key, declared in SLOT_FOLLOW_ONS.items() for arm in declared.arms)


@pytest.mark.parametrize("key, arm", FOLLOW_ON_ARMS, ids=[f"slot-{key}-{arm}" for key, arm in FOLLOW_ON_ARMS])
def test_every_slot_follow_on_arm_is_alive_as_its_study_builds_it(key, arm):
    """The slot memory's follow-ons (the language model and the recall study's width-64 arms): each arm's mixer,
    with the options, width, heads and length its study resolves, alive as above."""
    from gma_teach import study

    declared = SLOT_FOLLOW_ONS[key]
    widths = declared.get("widths")
    config = study.resolve(declared, arm, **({"width": widths[0]} if widths else {}))
    setting = SimpleNamespace(d_model=config.sizes["d_model"], seq_len=config.sizes["seq_len"])
    torch.manual_seed(0)
    mixer = make_mixer(config.arm.mixer, setting.d_model, config.sizes["n_heads"], causal=True, **config.options)
    _assert_alive(mixer, _unit_variance_input(setting), f"slot-{key} arm {arm}")


def test_the_hybrid_is_alive_with_the_routing_remedy_at_the_lm_study_s_size():
    """``local_gma`` passes :data:`gma_teach.layer.LM_ROUTING_REMEDY` (the slot memory's options) to its GMA heads,
    and the hybrid built so is alive at the LM study's width, heads and length."""
    from gma_teach.layer import LM_ROUTING_REMEDY

    setting = SETTINGS[0]
    assert setting.name == "lm_study"
    torch.manual_seed(0)
    mixer = make_mixer("local_gma", setting.d_model, setting.n_heads, causal=True, **LM_ROUTING_REMEDY)
    assert mixer.gma.tied_routing and mixer.gma.assignment_weight == LM_ROUTING_REMEDY["assignment_weight"]
    _assert_alive(mixer, _unit_variance_input(setting), "local_gma with LM_ROUTING_REMEDY")
