"""One place to add a mixer: a mixer registered once (gma_teach.mixers.register) is found by make_mixer, by every
study's options, by Table 1's protocol, by the cost model and by the figures' colours; and nowhere once removed."""
import matplotlib
import matplotlib.pyplot
import pytest
import torch
from torch import nn

from gma_teach import baselines, cost, designs, experiments, make_mixer, mixers, plots, preset, profiling


class Shift(nn.Module):
    """A toy causal mixer: each position gets a learned projection of the one before it."""

    def __init__(self, d_model, n_heads=1, *, causal=False, scale=1.0):
        super().__init__()
        self.proj, self.causal, self.scale = nn.Linear(d_model, d_model), causal, scale

    def forward(self, x, key_padding_mask=None):
        return self.scale * self.proj(torch.nn.functional.pad(x, (0, 0, 1, 0))[:, :-1])


BOOK_MIXERS = ("gma", "softmax", "sdpa", "linear", "performer", "linformer", "mamba", "uniform", "none", "window",
               "local_gma", "decay_linear", "decay_gma", "conv")  # the book's mixers, in the book's order
BOOK_FORGETTING_AND_HYBRID = ("window", "local_gma", "decay_linear", "decay_gma")  # chapter 12's
BOOK_ROUTING_CAN_COLLAPSE = ("gma", "local_gma", "decay_gma")  # chapter 11's


def _in_book(names) -> list[str]:
    """``names`` less any mixer registered besides the book's, in their order."""
    return [name for name in names if name in BOOK_MIXERS]


def _where(flag) -> tuple[str, ...]:
    """The registered names whose entry has ``flag(entry)`` true, in the registry's order."""
    return tuple(name for name in mixers.registered_names() if flag(mixers.entry(name)))


SHIFT_COST = mixers.BlockCost(peak_per_token_width=3.0, ops=7, flops=lambda s: 2 * s.b * s.n * s.d * s.d,
                              extra_peak_values=lambda s: 5.0 * s.b * s.n)


@pytest.fixture
def shift():
    entry = mixers.register(mixers.MixerEntry(
        "shift", Shift, color="#123456", options=lambda p: {"scale": float(p.n_heads)},
        table1_options=lambda *, seq_len, n_components, n_features, linformer_k: {"scale": seq_len / 1000},
        cost=SHIFT_COST))
    try:
        yield entry
    finally:
        mixers.unregister("shift")


def test_a_registered_mixer_is_found_everywhere(shift):
    assert baselines.MIXERS["shift"] is Shift and "shift" in mixers.registered_names()
    assert isinstance(make_mixer("shift", 8, 2, causal=True), Shift)
    for experiment in ("listops", "text", "lm"):  # every study's options come from the entry
        p = preset(experiment, "tiny")
        assert experiments.mixer_options(p, "shift") == {"scale": float(p.n_heads)}
    lm = experiments.build_lm(preset("lm", "tiny"), "shift", 17)
    assert lm(torch.randint(0, 17, (2, 5))).shape == (2, 5, 17)
    assert profiling.table1_options("shift", seq_len=2000) == {"scale": 2.0}
    rows = profiling.sweep(mixers=["shift"], seq_lens=[16, 32], d_model=8, n_heads=2, repeat=1)
    assert [row["mixer"] for row in rows] == ["shift", "shift"] and rows[0]["tokens_per_second"] > 0
    b, n, d, h = 2, 64, 16, 4  # the cost model reads the entry: 24 B N D^2 for the projections, 3x the core
    work = cost.block_work("shift", d_model=d, n_heads=h, seq_len=n, batch_size=b)
    assert work.flops == 24 * b * n * d**2 + 3 * 2 * b * n * d * d and work.ops == 7
    assert work.peak == cost.FLOAT32 * (3.0 * b * n * d + 5.0 * b * n)
    assert cost.point_fits("block:shift", device_profile="t4", batch_size=b, n_heads=h, seq_len=n, d_route=d)
    figure = plots.plot_profile(rows)  # the figures draw it in its colour
    assert {line.get_color() for line in figure.axes[0].lines} == {"#123456"}
    matplotlib.pyplot.close(figure)


def test_a_removed_mixer_is_gone_everywhere(shift):
    mixers.unregister("shift")
    try:
        assert "shift" not in baselines.MIXERS and "shift" not in mixers.registered_names()
        with pytest.raises(ValueError, match="unknown mixer"):
            make_mixer("shift", 8, 2)
        with pytest.raises(ValueError, match="mixer must be one of"):
            experiments.mixer_options(preset("lm", "tiny"), "shift")
        with pytest.raises(ValueError, match="unknown mixer"):
            cost.block_work("shift", d_model=8, n_heads=2, seq_len=8)
    finally:
        mixers.register(shift)  # for the fixture's clean-up


def test_the_registry_is_the_map_of_mixers(monkeypatch):
    assert tuple(mixers.REGISTRY) == tuple(baselines.MIXERS)[:len(mixers.REGISTRY)]
    for name, entry in mixers.REGISTRY.items():
        assert baselines.MIXERS[name] is entry.cls
    assert plots.COLORS["gma"] == mixers.REGISTRY["gma"].color
    assert _in_book(mixers.registered_names()) == list(BOOK_MIXERS)  # the book's mixers, registered in its order
    assert list(experiments.LM_MIXERS) == [n for n in baselines.MIXERS if mixers.entry(n).causal_lm]
    assert _in_book(experiments.LM_MIXERS) == [n for n in BOOK_MIXERS if n != "linformer"]  # the one it cannot use
    with pytest.raises(ValueError, match="already registered"):
        mixers.register(mixers.REGISTRY["gma"])
    monkeypatch.setitem(baselines.MIXERS, "plain", baselines.NoMixing)  # a class put in MIXERS without an entry
    plain = mixers.entry("plain")
    assert plain.cls is baselines.NoMixing and plain.cost is None and plain.color is None
    assert experiments.mixer_options(preset("lm", "tiny"), "plain") == {}
    assert profiling.table1_options("plain", seq_len=64) == {}
    with pytest.raises(ValueError, match="already in baselines.MIXERS as NoMixing"):
        mixers.register(mixers.MixerEntry("plain", Shift))
    with pytest.raises(ValueError, match="no entry for mixer 'uniform'"):
        cost.block_work("uniform", d_model=8, n_heads=2, seq_len=8)
    with pytest.raises(TypeError, match="MixerEntry"):
        mixers.register("shift")


def test_every_list_of_mixers_is_read_when_asked(shift):
    assert baselines.MIXER_NAMES[-1] == "shift" and "MIXER_NAMES" in dir(baselines)
    assert mixers.causal_lm_names()[-1] == "shift" and mixers.table1_names()[-1] == "shift"
    assert plots.COLORS["shift"] == "#123456" and "shift" in list(plots.COLORS)
    assert "shift" not in mixers.forgetting_and_hybrid_names() and "shift" not in mixers.routing_collapse_names()


def test_the_lists_the_run_wing_keeps_are_the_registry_functions():
    # the run wing's constants, read once at import, equal the functions that replace them
    assert mixers.causal_lm_names() == experiments.LM_MIXERS
    assert mixers.registered_names() == experiments.CLASSIFIER_MIXERS == baselines.MIXER_NAMES
    assert mixers.table1_names() == profiling.DEFAULT_MIXERS


def test_the_book_mixers_groupings_reference_arms_and_looks():
    assert mixers.forgetting_and_hybrid_names() == _where(lambda entry: entry.reference is not None)
    assert _in_book(mixers.forgetting_and_hybrid_names()) == list(BOOK_FORGETTING_AND_HYBRID)
    assert mixers.routing_collapse_names() == _where(lambda entry: entry.routing_can_collapse)
    assert _in_book(mixers.routing_collapse_names()) == list(BOOK_ROUTING_CAN_COLLAPSE)
    assert _in_book(mixers.table1_names()) == ["gma", "softmax", "sdpa", "linear", "performer", "linformer", "mamba"]
    assert mixers.reference_arms("window") == ("sdpa",) and mixers.reference_arms("decay_linear") == ("linear",)
    assert mixers.reference_arms("local_gma", {"n_components": 16, "window": 8}) == ("window", "gma_k16")
    # an arm leaving K to the recall study, which pins none, has the registry's one default (64) and is compared so
    assert mixers.reference_arms("local_gma") == ("window", "gma_k64")
    assert mixers.reference_arms("decay_gma") == ("gma_k64",)
    assert mixers.reference_arms("decay_gma", {"n_components": 64}) == ("gma_k64",)
    assert mixers.reference_arms("sdpa") == () == mixers.reference_arms("mystery")
    looks = {name: (mixers.entry(name).linestyle, mixers.entry(name).marker) for name in BOOK_MIXERS}
    assert {name for name, look in looks.items() if look != ("-", "o")} == set(BOOK_FORGETTING_AND_HYBRID)
    assert looks["window"] == looks["local_gma"] == ("-.", "^") and looks["decay_gma"] == ("--", "^")
    assert set(baselines.STATE_BYTES) == set(_where(lambda entry: entry.state_bytes is not None))
    assert set(BOOK_MIXERS) - set(baselines.STATE_BYTES) == {"linformer"}  # the book's one mixer that cannot decode
    assert baselines.CAUSAL_BY_CONSTRUCTION == set(_where(lambda entry: entry.causal_by_construction))
    assert baselines.CAUSAL_BY_CONSTRUCTION & set(BOOK_MIXERS) == {"mamba", "conv"}
    for name, entry in mixers.REGISTRY.items():
        assert entry.state_bytes is baselines.STATE_BYTES.get(name)


def test_the_registry_table():
    lines = mixers.registry_table().splitlines()
    assert len(lines) == 2 + len(mixers.REGISTRY) and lines[0].startswith("| name | class |")
    rows = {line.split(" | ")[0][2:].strip("`"): line for line in lines[2:]}
    assert list(rows) == list(mixers.REGISTRY)
    assert "`gma_teach.layer.GaussianMixtureAttention`" in rows["gma"] and "`#1b7837`" in rows["gma"]
    assert "`H K (d_value + 1) e`" in rows["gma"] and rows["gma"].endswith("| yes |")
    assert "`gma_teach.baselines.SDPAttention`" in rows["sdpa"] and "`2 H N d_head e`" in rows["sdpa"]
    assert "none (no decoding)" in rows["linformer"] and "matplotlib's cycle" in rows["uniform"]
    assert "`window` and the plain GMA arm (default routing) of the same K" in rows["local_gma"]
    assert "`-.` `^`" in rows["local_gma"]
    assert mixers.registry_table("rst").startswith(".. list-table::") and mixers.registry_table("rst") in mixers.__doc__
    with pytest.raises(ValueError, match="fmt must be"):
        mixers.registry_table("html")


def test_a_mixer_the_cost_model_has_not_fitted_is_costed_as_its_entry_says(shift):
    assert {name: mixers.entry(name).costed_as for name in BOOK_FORGETTING_AND_HYBRID} == {
        "window": "sdpa", "local_gma": "gma", "decay_linear": "linear", "decay_gma": "gma"}
    assert all(mixers.entry(name).costed_as is None for name in mixers.registered_names()
               if mixers.entry(name).cost is not None)

    def seconds(*arms):
        study = designs.RECALL_STUDY.with_changes(arms={arm.mixer: arm for arm in arms}, primary=())
        return cost.study_seconds(study, "cpu-2core")

    assert seconds(designs.Arm("decay_gma", {"n_components": 16})) == seconds(designs.Arm("gma", {"n_components": 16}))
    assert seconds(designs.Arm("window")) == seconds(designs.Arm("sdpa")) != seconds(designs.Arm("linear"))
    with pytest.raises(ValueError, match="no entry for mixer 'uniform'"):  # neither a cost nor a costed_as
        seconds(designs.Arm("uniform"))
    mixers.register(mixers.MixerEntry("lag", Shift, costed_as="shift"))  # a new mixer costed as a registered one
    try:
        assert seconds(designs.Arm("lag")) == seconds(designs.Arm("shift"))
    finally:
        mixers.unregister("lag")
    with pytest.raises(ValueError, match="not a registered mixer with a cost-model entry"):
        mixers.register(mixers.MixerEntry("lag", Shift, costed_as="uniform"))
    with pytest.raises(ValueError, match="has a cost-model entry of its own"):
        mixers.register(mixers.MixerEntry("lag", Shift, cost=SHIFT_COST, costed_as="gma"))
    assert "lag" not in mixers.registered_names()
