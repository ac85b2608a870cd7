"""One register() per mixer: a mixer defined here and registered with ONE call to gma_teach.mixers.register is found
by every part of the package that lists, builds, counts, draws or compares mixers, and by none once removed; its
option (``scale``, registry default 0.5) reaches the model every study kind builds, whether an arm sets it or not.

The dummy, ``echo``, is a causal mixer of the baselines' interface (``(B, N, D) -> (B, N, D)``, ``init_state`` and
``step``): position ``i`` reads a learned projection of token ``i - 1``; its decoding state is the last token.
"""
from dataclasses import dataclass, replace
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import pytest
import torch
from docutils.core import publish_doctree
from test_arm_options import (
    TINY_CLASSIFIER,
    _Built,
    _built,
    _classifier_data,
    _lm_data,
    _lm_study,
    _mixers,
    _recall_data,
    _recall_study,
    _stop_at_fit,
)
from test_capacity import _curve, _run, synthetic_table
from torch import nn

from gma_teach import baselines, capacity, designs, make_mixer, mixers, plots, study
from gma_teach.capacity import _fast_weight
from gma_teach.mixing import DecodingState
from gma_teach.plots import recall
from gma_teach.runs import classification, language_model, speed
from gma_teach.runs import recall as recall_runs

matplotlib.use("Agg")

API_PAGE = Path(__file__).resolve().parents[1] / "book" / "api.md"
NAME = "echo"
COLOR = "#3b7a9e"


@dataclass
class EchoState(DecodingState):
    """The last token seen, ``(B, d_model)``."""

    last: torch.Tensor


class Echo(nn.Module):
    """Position ``i`` gets ``W x_{i-1}`` (zeros at position 0)."""

    def __init__(self, d_model, n_heads=1, *, causal=False, scale=1.0):
        super().__init__()
        self.d_model, self.n_heads, self.causal, self.scale = d_model, n_heads, causal, scale
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x, key_padding_mask=None):
        return self.scale * self.proj(nn.functional.pad(x, (0, 0, 1, 0))[:, :-1])

    def init_state(self, batch_size):
        return EchoState(self.proj.weight.new_zeros(batch_size, self.d_model))

    def step(self, x_t, state):
        if not self.causal:
            raise ValueError("step() needs a causal mixer")
        return self.scale * self.proj(state.last), EchoState(x_t)


def echo_state_bytes(mixer, seq_len):
    """``d_model e``: the last token"""
    return mixer.d_model * mixer.proj.weight.element_size()


@pytest.fixture
def echo():
    entry = mixers.register(mixers.MixerEntry(
        NAME, Echo, color=COLOR, options=lambda p: {"scale": 0.5}, state_bytes=echo_state_bytes,
        reference=lambda options: ("sdpa",), linestyle=":", marker="D"))
    try:
        yield entry
    finally:
        mixers.unregister(NAME)


def _table_with_echo():
    """The synthetic recall table of test_capacity at one width, with an ``echo`` arm beside SDPA."""
    table = synthetic_table(widths=(64,))
    table["arms"][NAME] = {64: _run(NAME, _curve([0.6, 0.45, 0.3]), 64 * 4)}
    return table


def test_it_is_listed_and_built(echo):
    assert NAME in mixers.registered_names() and NAME in baselines.MIXER_NAMES and baselines.MIXERS[NAME] is Echo
    assert mixers.registered_names()[-1] == NAME == baselines.MIXER_NAMES[-1]  # registered last, listed last
    assert NAME in mixers.causal_lm_names()
    mixer = make_mixer(NAME, 8, 2, causal=True, scale=2.0)
    assert isinstance(mixer, Echo) and mixer.scale == 2.0
    assert mixer(torch.randn(3, 5, 8)).shape == (3, 5, 8)


def test_its_colour_is_in_every_colour_map(echo):
    assert plots.COLORS[NAME] == COLOR and NAME in set(plots.COLORS)
    assert recall.arm_style(NAME) == {"color": COLOR, "ls": ":", "marker": "D"}


def test_its_state_bytes_come_from_its_formula(echo):
    mixer = make_mixer(NAME, 12, 3, causal=True)
    state = mixer.init_state(2)
    with torch.no_grad():
        for _ in range(3):
            _, state = mixer.step(torch.randn(2, 12), state)
    assert baselines.STATE_BYTES[NAME] is echo_state_bytes
    assert baselines.mixer_state_bytes(mixer, 3, batch_size=2) == state.nbytes() == 2 * 12 * 4
    assert baselines.mixer_state_bytes(mixer.double(), 3) == 12 * 8
    assert capacity.measured_state_bytes(NAME, 12, 3, 5) == 12 * 4  # the table's measured column
    with pytest.raises(ValueError, match="causal=False"):
        baselines.mixer_state_bytes(make_mixer(NAME, 12, 3), 3)


def test_the_recall_figures_draw_it_in_its_look(echo):
    table = _table_with_echo()
    figure = recall.plot_accuracy_by_pairs(table)
    (legend,) = figure.legends
    texts = [text.get_text() for text in legend.get_texts()]
    assert texts.index(NAME) == texts.index("decay_gma") + 1  # after the book's mixers, in the registry's order
    (line,) = [line for line in figure.axes[0].get_lines() if line.get_label() == NAME]
    assert (line.get_color(), line.get_linestyle(), line.get_marker()) == (COLOR, ":", "D")
    frontier = recall.plot_recall_frontier(table)
    assert f"{NAME} (d=64)" in {text.get_text() for text in frontier.axes[0].texts}
    plt.close("all")


def test_the_recall_findings_compare_it_with_its_reference(echo):
    assert mixers.reference_arms(NAME) == ("sdpa",) and NAME in mixers.forgetting_and_hybrid_names()
    assert not capacity.uses_default_routing({"mixer": NAME, "options": {}})  # its routing cannot collapse
    table = _table_with_echo()
    found = [line for line in capacity.forgetting_findings(table) if line.startswith(NAME)]
    assert len(found) == 1 and found[0].startswith(f"{NAME} against sdpa at width 64: ") and "exploratory" in found[0]
    advice = [line for line in capacity.when_to_choose_gma(table) if f" {NAME}" in line]
    assert len(advice) == 1
    assert advice[0].startswith(f"At width 64, the records do not recommend {NAME}: it recalls less than SDPA (")


def test_the_api_page_table_shows_it(echo):
    row = next(line for line in mixers.registry_table().splitlines() if line.startswith(f"| `{NAME}`"))
    assert "`test_register_dummy.Echo`" in row and "`d_model e`: the last token" in row and COLOR in row
    assert "`sdpa`" in row
    assert mixers.registry_table("rst") in mixers.__doc__  # the module's docstring, which the API page renders:
    assert ".. automodule:: gma_teach.mixers\n" in API_PAGE.read_text()  # autodoc reads it when the page is built
    rows = publish_doctree(mixers.registry_table("rst")).findall(lambda node: node.tagname == "row")
    names = [row.children[0].astext() for row in rows][1:]
    assert names == list(mixers.registered_names())


def test_a_removed_mixer_is_gone_everywhere(echo):
    mixers.unregister(NAME)
    try:
        assert NAME not in baselines.MIXER_NAMES and NAME not in baselines.STATE_BYTES and NAME not in plots.COLORS
        assert NAME not in mixers.forgetting_and_hybrid_names() and NAME not in mixers.registry_table()
        assert NAME not in mixers.__doc__ and recall.arm_style(NAME)["marker"] == "x"
        with pytest.raises(ValueError, match="unknown mixer"):
            make_mixer(NAME, 8, 2)
    finally:
        mixers.register(echo)  # for the fixture's clean-up


def test_a_study_runs_it_and_reads_it(echo, tmp_path):
    """A language-model study with an ``echo`` arm runs through the one runner and its table and declared comparison
    read it; the recall study with an ``echo`` arm beside its reference (SDPA) runs at a tiny size through the same
    runner, and the recall table counts its state with the registered formula (plus the convolution's)."""
    lm = designs.Study("echo_lm", "lm", "tiny", {"n_steps": 4, "eval_every": 2}, (0, 1),
                       {"echo": designs.Arm(NAME), "none": designs.Arm("none")}, primary=[(NAME, "none")])
    for arm in lm.arms:
        record = study.run_arm(lm, arm, folder=tmp_path, command="test")
        assert record["complete"] and designs.Arm.from_spec(record["spec"]).mixer == arm
    assert NAME in study.study_table(lm, tmp_path)["arms"]
    (comparison,) = study.declared_comparisons(lm, tmp_path)["comparisons"]
    assert comparison["arm"] == NAME and comparison["seeds"] == [0, 1]

    tiny = designs.RECALL_STUDY.with_changes(
        setting=dict(seq_len=16, vocab_size=32, kv_pairs=(2, 3), n_train=32, n_val=8, n_test=8, steps=2, warmup=1,
                     batch_size=8),
        arms={NAME: UNSET, "echo_x2": SET, "sdpa": designs.Arm("sdpa")}, primary=[(NAME, "sdpa")],
        learning_rates=(1e-3, 3e-3), seeds=(0, 1), widths=(16,), reruns=None)
    for arm in tiny.arms:
        study.run_arm(tiny, arm, width=16, folder=tmp_path, command="test")
    table = study.recall_table(tmp_path, tiny)
    conv = 2 * 16 * 4  # the short convolution's last two inputs, float32
    assert table["arms"][NAME][16]["state_bytes"] == table["arms"]["echo_x2"][16]["state_bytes"] == conv + 16 * 4
    assert [(c["arm"], c["against"]) for c in table["comparisons"]] == [(NAME, "sdpa")]
    assert mixers.reference_arms(NAME) == ("sdpa",)
    # the table states the options each arm's model was built with; the figures draw both arms in the dummy's look
    assert table["arms"][NAME][16]["options"] == {"scale": 0.5} and table["arms"]["echo_x2"][16]["options"] == {
        "scale": 2.0}
    look = (COLOR, ":", "D")
    assert tuple(recall.arm_style("echo_x2", table["arms"]["echo_x2"][16]).values()) == look
    lines = {line.get_label(): line for line in recall.plot_accuracy_by_pairs(table).axes[0].get_lines()}
    assert {arm: (lines[arm].get_color(), lines[arm].get_linestyle(), lines[arm].get_marker())
            for arm in (NAME, "echo_x2")} == {NAME: look, "echo_x2": look}
    plt.close("all")


SET, UNSET = designs.Arm(NAME, {"scale": 2.0}), designs.Arm(NAME)
"""An arm that sets the dummy's option, and one that leaves it to the registry's default (0.5)."""


def _config(kind: str, arm: designs.Arm):
    """The runner's resolved configuration of ``arm`` in a tiny study of ``kind``, the trainer's module (whose
    ``fit``, or the capacity test's ``train_fast_weight``, is stopped) and the data it trains on."""
    if kind == "lm":
        return study.resolve(_lm_study({"a": arm}), "a"), language_model, "fit", _lm_data()
    if kind in ("listops", "text"):
        declared = {"listops": designs.LISTOPS_LRA_STUDY, "text": designs.TEXT_STUDY}[kind]
        tiny = declared.with_changes(name=f"tiny-{kind}", scale="tiny", setting=TINY_CLASSIFIER, arms={"a": arm},
                                     primary=())
        return study.resolve(tiny, "a"), classification, "fit", _classifier_data()
    if kind == "recall":
        return study.resolve(_recall_study({"a": arm}), "a", 16), recall_runs, "fit", _recall_data()
    tiny = designs.CAPACITY_STUDY.with_changes(name="tiny-capacity", arms={"a": arm}, primary=(),
                                               setting={"n_pairs": (4,), "d_model": 16, "n_eval": 4, "n_test": 4})
    return study.resolve(tiny, "a"), _fast_weight, "train_fast_weight", {}


@pytest.mark.parametrize("kind", ["lm", "listops", "text", "recall", "capacity"])
@pytest.mark.parametrize(("arm", "scale"), [(SET, 2.0), (UNSET, 0.5)], ids=["set", "registry default"])
def test_its_option_reaches_the_model_of_every_study_kind(echo, monkeypatch, kind, arm, scale):
    """The study runner's own trainer of one seed (``study.SEED_TRAINERS``), stopped at its first training step,
    built the dummy with the arm's ``scale``, or the registry's default when the arm sets none."""
    config, module, name, data = _config(kind, arm)
    assert config.options == {"scale": scale}  # resolved once, what the record's model is built with
    (built,) = _mixers(_built(monkeypatch, module, config, data, name=name), Echo)
    assert built.scale == scale


@pytest.mark.parametrize(("arm", "scale"), [(SET, 2.0), (UNSET, 0.5)], ids=["set", "registry default"])
def test_its_option_reaches_the_speed_measurement(echo, monkeypatch, arm, scale):
    monkeypatch.setattr(speed, "fit", _stop_at_fit)
    with pytest.raises(_Built) as stopped:
        speed.measure_training_speed(_lm_study({"a": arm}), steps=1, repeat=1, warmup=0, data=_lm_data())
    (built,) = _mixers(stopped.value.model, Echo)
    assert built.scale == scale


def test_the_name_lists_other_modules_hold_include_it(echo):
    from gma_teach import experiments
    from gma_teach.runs.experiments import _parser

    for names in (experiments.LM_MIXERS, experiments.CLASSIFIER_MIXERS, baselines.MIXER_NAMES):
        assert NAME in names and list(names)[-1] == NAME
    assert _parser().parse_args(["lm", "--mixer", NAME, "--out", "x.json"]).mixer == NAME


def test_table1_is_opt_in(echo):
    """Registered without ``table1_options``, it has no place in Table 1 (nor in the profiling sweep's defaults);
    registered with them, it joins both, last, with the options its entry gives."""
    from gma_teach import profiling

    before = mixers.table1_names()
    assert NAME not in before and NAME not in profiling.DEFAULT_MIXERS
    assert profiling.table1_options(NAME, seq_len=64) == {}
    mixers.unregister(NAME)
    try:
        mixers.register(replace(echo, table1_options=lambda *, seq_len, n_components, n_features, linformer_k: {
            "scale": seq_len / 128}))
        assert mixers.table1_names() == (*before, NAME) and list(profiling.DEFAULT_MIXERS) == [*before, NAME]
        assert profiling.table1_options(NAME, seq_len=64) == {"scale": 0.5}
        (row,) = profiling.sweep(mixers=[NAME], seq_lens=[8], d_model=8, n_heads=2, repeat=1)
        assert row["mixer"] == NAME and row["tokens_per_second"] > 0
    finally:
        mixers.unregister(NAME)
        mixers.register(echo)  # for the fixture's clean-up
