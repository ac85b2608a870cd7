"""GMA's K walks from a study's command line to the kernel once, and has one default (issue 38: an arm means the same
model in every study).

A tiny recall study whose GMA arm sets an unusual K runs through ``python -m gma_teach.study``'s entry while a
profiling spy records, at every call into the package that is handed K, the chain of the package's frames that hold
it: the path K took to get there. K must reach the layer's mixture, and on every path no module may be left and then
entered again (which is what rebuilding K, or reading it back out of a name, looks like)."""
import sys
from collections.abc import Mapping

from gma_teach import layer, make_mixer, mixers, study
from gma_teach.designs import RECALL_STUDY, Arm
from gma_teach.runs import study_cli

K = 7
"""A K no preset, study or default uses, so that every place it shows up came from the arm."""

TINY = dict(seq_len=16, vocab_size=32, kv_pairs=(2, 3), n_train=32, n_val=8, n_test=8, steps=2, warmup=1,
            batch_size=8)


def _tiny_recall(arms: dict):
    """The recall study at a tiny size, one width (16), one seed, one learning rate, with ``arms``."""
    return RECALL_STUDY.with_changes(name="k_walk", setting=TINY, widths=(16,), learning_rates=(1e-2,), seeds=(0,),
                                     arms=arms, primary=(), reruns=None, exploratory=None, chapter=None, what=None)


def _is_k(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value == K


def _holds_k(value) -> bool:
    """Whether ``value`` carries K at its surface: options (or an arm, a sizes map) with ``n_components`` K, an
    object of the package with such ``options`` (a resolved ``RunConfig``), or a short list of such options."""
    if isinstance(value, Mapping):
        try:
            return _is_k(value.get("n_components"))
        except (KeyError, TypeError):
            return False
    if isinstance(value, (list, tuple)) and len(value) <= 16:
        return any(isinstance(item, Mapping) and _holds_k(item) for item in value)
    if type(value).__module__.startswith("gma_teach."):
        options = getattr(value, "options", None)
        return isinstance(options, Mapping) and _is_k(options.get("n_components"))
    return False


def _frame_holds_k(frame) -> bool:
    return any(_is_k(value) if name == "n_components" else _holds_k(value) for name, value in frame.f_locals.items())


def _module(frame) -> str:
    return frame.f_globals.get("__name__", "")


class _Spy:
    """``sys.setprofile`` hook: the path K took to each call of the package it is handed to (the modules of the
    frames on the stack that were handed K, outermost first, a stretch of one module's frames once), and every GMA
    layer built."""

    def __init__(self):
        self.paths: list[list[str]] = []
        self.layers: list = []
        self._handed: set[int] = set()  # ids of the live frames that were handed K when called

    def __call__(self, frame, event, arg):
        if event not in ("call", "return") or not _module(frame).startswith("gma_teach"):
            return
        if event == "return":
            self._handed.discard(id(frame))
            if frame.f_code is layer.GaussianMixtureAttention.__init__.__code__:
                self.layers.append(frame.f_locals["self"])
            return
        if _frame_holds_k(frame):
            self._handed.add(id(frame))
            path = self._path(frame)
            if path not in self.paths:
                self.paths.append(path)

    def _path(self, frame) -> list[str]:
        chain = []
        while frame is not None:
            if id(frame) in self._handed or (_module(frame).startswith("gma_teach") and _frame_holds_k(frame)):
                chain.append(_module(frame))
            frame = frame.f_back
        chain.reverse()
        return [module for i, module in enumerate(chain) if i == 0 or chain[i - 1] != module]


def test_k_walks_from_the_command_line_to_the_kernel_through_each_module_once(monkeypatch, tmp_path):
    declared = Arm("gma", {"n_components": K})
    monkeypatch.setitem(study_cli.STUDIES, "k_walk", _tiny_recall({"gma_seven": declared}))
    spy = _Spy()
    sys.setprofile(spy)
    try:
        study_cli.main(["k_walk", "--arms", "gma_seven", "--out-dir", str(tmp_path)])
    finally:
        sys.setprofile(None)
    (built,) = spy.layers  # one mixer layer in the tiny recall model
    assert built.n_components == K and built.mixture.means.shape == (1, K, 16)  # (heads, K, d_route)
    walked = {module for path in spy.paths for module in path}
    assert {"gma_teach.runs.arm", "gma_teach.runs.options", "gma_teach.runs.recall", "gma_teach.models",
            "gma_teach.baselines._factory", "gma_teach.layer", "gma_teach.gmm"} <= walked
    for path in spy.paths:
        assert path[0] == "gma_teach.runs.arm", f"K entered the package past the runner: {' -> '.join(path)}"
        again = sorted({module for module in path if path.count(module) > 1})
        assert not again, f"K left and re-entered {again} on its way: {' -> '.join(path)}"
    to_kernel = next(path for path in spy.paths if path[-1] == "gma_teach.gmm")
    assert to_kernel[-4:] == ["gma_teach.models", "gma_teach.baselines._factory", "gma_teach.layer", "gma_teach.gmm"]
    assert to_kernel.index("gma_teach.runs.arm") < to_kernel.index("gma_teach.runs.recall")
    resolved = next(path for path in spy.paths if path[-1] == "gma_teach.runs.options")
    assert resolved[-2:] == ["gma_teach.runs.arm", "gma_teach.runs.options"]  # resolved once, by the runner
    assert not any("gma_teach.mixers" in path for path in spy.paths)  # the registry never sees the arm's own K


def test_gma_has_one_default_k_that_every_path_reads(monkeypatch):
    monkeypatch.setattr(layer, "DEFAULT_COMPONENTS", 5, raising=False)
    assert make_mixer("gma", 16, 2).n_components == 5
    assert make_mixer("decay_gma", 16, 2, causal=True).n_components == 5
    assert make_mixer("local_gma", 16, 2).gma.n_components == 5
    assert make_mixer("gma", 16, 2, n_components=K).n_components == K  # a K given is kept
    recall = _tiny_recall({"plain": Arm("gma"), "decayed": Arm("decay_gma"), "hybrid": Arm("local_gma", n_heads=2)})
    for arm in recall.arms:  # the recall study pins no K: an arm that sets none has the registry's default
        assert study.resolve(recall, arm, 16).options["n_components"] == 5
    lm = study.resolve(RECALL_STUDY.with_changes(setting={**TINY, "n_components": 12}), "gma_k8", 64)
    assert lm.options["n_components"] == 8  # an arm's own K goes over everything
    pinned = _tiny_recall({"plain": Arm("gma")}).with_changes(setting={"n_components": 12})
    assert study.resolve(pinned, "plain", 16).options["n_components"] == 12  # a study that pins K gives its own


def test_the_arm_an_arm_is_compared_with_is_found_by_its_spec_not_a_name_built_from_k():
    arms = {"plain_small": Arm("gma", {"n_components": K}), "remedied": Arm("gma", {"n_components": K,
                                                                                  "balance_weight": 0.01}),
            "two_heads": Arm("gma", {"n_components": K}, n_heads=2), "window": Arm("window", {"window": 4})}
    renamed = _tiny_recall(arms)
    assert mixers.reference_arms("decay_gma", {"n_components": K}, study=renamed) == ("plain_small", "two_heads")
    assert mixers.reference_arms("decay_gma", {"n_components": K}, n_heads=1, study=renamed) == ("plain_small",)
    assert mixers.reference_arms("decay_gma", {"n_components": K, "balance_weight": 0.01}, n_heads=2,
                                 study=renamed) == ("two_heads",)  # the plain GMA: the default routing
    hybrid = {"window": 4, "local_heads": 1, "n_components": K}
    assert mixers.reference_arms("local_gma", hybrid, n_heads=2, study=renamed) == ("window", "plain_small")
    assert mixers.reference_arms("local_gma", hybrid, n_heads=3, study=renamed) == ("window", "two_heads")
    assert mixers.reference_arms("decay_gma", {"n_components": 9}, study=renamed) == ()
    # the recorded recall study: the same comparisons as its arms' names say
    assert mixers.reference_arms("decay_gma", dict(RECALL_STUDY.arms["decay_gma"].options)) == ("gma_k32",)
    local = RECALL_STUDY.arms["local_gma"]
    assert mixers.reference_arms("local_gma", dict(local.options), n_heads=local.n_heads) == ("window", "gma_k32")
