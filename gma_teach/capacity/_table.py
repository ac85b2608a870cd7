"""The recall study's table and what is measured beside it: state bytes, the live run's helpers, the guessing floor,
the table's check and reading, and the helpers the findings share. A private module of :mod:`gma_teach.capacity`,
which exports its public names; the others (``mean_of``, ``word_list``, ...) serve its modules only."""
from __future__ import annotations

import copy
from collections.abc import Mapping

import torch

from .. import _checks, mixers
from ..baselines import MIXERS, make_mixer
from ..designs import BALANCE_REMEDY, VARIANCE_AND_BALANCE, Arm, Study, thawed
from ..layer import ROUTING_OPTIONS
from ..stats import paired_difference


# --------------------------------------------------------------------------------------------------- state bytes
def measured_state_bytes(mixer: str, d_model: int, n_heads: int, seq_len: int, **options) -> int:
    """Bytes of a causal mixer's decoding state after ``seq_len`` tokens at batch size 1, measured: the mixer is
    built by :func:`gma_teach.baselines.make_mixer`, decodes ``seq_len`` zero tokens with ``step``, and the final
    state's ``nbytes()`` is returned.

    Args:
        mixer: a name of :data:`gma_teach.baselines.MIXERS` that decodes (not ``linformer``).
        d_model, n_heads: the layer's width and heads.
        seq_len: tokens decoded (>= 0).
        **options: the mixer's options (``n_components`` for GMA, ...).
    """
    if mixer not in MIXERS:
        raise ValueError(f"mixer must be one of {sorted(MIXERS)}, got {mixer!r}")
    seq_len = _checks.integer("seq_len", seq_len, minimum=0)
    layer = make_mixer(mixer, d_model, n_heads, causal=True, **options)
    if not hasattr(layer, "step"):
        raise ValueError(f"mixer {mixer!r} has no decoding form (no step), so no decoding state")
    state = layer.init_state(1)
    x = torch.zeros(1, d_model)
    with torch.no_grad():
        for _ in range(seq_len):
            _, state = layer.step(x, state)
    return state.nbytes()


# ------------------------------------------------------------------------------------------------- the live run
def shrink_study(study, **sizes):
    """A copy of a study design (a :class:`gma_teach.designs.Study` such as
    :data:`gma_teach.designs.RECALL_STUDY`, or a dict design) with some of its sizes replaced
    (``seq_len=32, steps=300, ...``); every key given must already be in the design (for a ``Study``, in its
    setting)."""
    if isinstance(study, Study):
        unknown = sorted(set(sizes) - set(study.setting))
        if unknown:
            raise ValueError(f"unknown study keys {unknown}; the design's setting has {sorted(study.setting)}")
        return study.with_changes(setting=sizes)
    if not isinstance(study, dict):
        raise TypeError(f"study must be a Study or a dict (a study design), got {type(study).__name__}")
    unknown = sorted(set(sizes) - set(study))
    if unknown:
        raise ValueError(f"unknown study keys {unknown}; the design has {sorted(study)}")
    shrunk = copy.deepcopy(study)
    shrunk.update(copy.deepcopy(sizes))
    return shrunk


def routing_share(gamma: torch.Tensor) -> dict:
    """How one layer's responsibilities spread over the components: ``gamma (..., K)``, rows summing to 1 (the query
    rows of a trained model, e.g. from :func:`gma_teach.diagnostics.capture_responsibilities`).

    Returns:
        ``{"rows", "n_components", "mean_top"`` (the mean of each row's largest responsibility), ``"busiest"``
        (the component that is the arg-max of the most rows), ``"busiest_share"`` (the share of rows whose arg-max it
        is), ``"used"`` (how many components are the arg-max of at least one row)``}``. A memory whose queries all
        route to one component has ``busiest_share`` 1 and ``used`` 1: one slot, whatever K.
    """
    _checks.tensor("gamma", gamma, min_rank=1)
    if not gamma.dtype.is_floating_point:
        raise TypeError(f"gamma must be a floating-point tensor of responsibilities, got {gamma.dtype}")
    rows = gamma.detach().reshape(-1, gamma.shape[-1]).double()
    if rows.shape[0] == 0 or rows.shape[1] == 0:
        raise ValueError(f"gamma must hold at least one row of at least one component, got {tuple(gamma.shape)}")
    top = rows.argmax(-1)
    counts = torch.bincount(top, minlength=rows.shape[1])
    return {"rows": rows.shape[0], "n_components": rows.shape[1], "mean_top": rows.max(-1).values.mean().item(),
            "busiest": int(counts.argmax()), "busiest_share": counts.max().item() / rows.shape[0],
            "used": int((counts > 0).sum())}


# -------------------------------------------------------------------------------------------- the guessing floor
def guessing_floor(kv_pairs) -> dict[int, float]:
    """The accuracy of a model that stores nothing but knows the answer is one of the ``n`` values of its context:
    ``{n: 1/n}`` for each kv count ``n`` (an MQAR query's value is one of the ``n`` values shown, and a guess among
    them is right once in ``n``). A memory whose every query reads one slot, a blend of everything written, can tell
    which tokens were values but not which value went with the key asked for: it scores about this floor.

    Args:
        kv_pairs: the kv-pair counts, positive ints (a list, a tuple or the keys of a table's ``by_count``).
    """
    counts = [_checks.positive_int("kv_pairs[...]", n) for n in kv_pairs]
    if not counts:
        raise ValueError("kv_pairs must hold at least one kv-pair count")
    return {n: 1.0 / n for n in counts}


def mean_guessing_floor(kv_pairs) -> float:
    """The mean of :func:`guessing_floor` over the counts: the floor of the recall study's metric (the mean accuracy
    over the kv counts). For the study's 4, 6, 8, 12 and 16 pairs it is 0.1375."""
    floor = guessing_floor(kv_pairs)
    return sum(floor.values()) / len(floor)


# ----------------------------------------------------------------------------------------- the study's table
_RUN_KEYS = ("mixer", "options", "lr", "seeds", "state_bytes", "test_mean", "by_count")
_COMPARISON_KEYS = ("arm", "against", "width", "difference", "ci95", "p", "p_holm", "told_apart", "seeds")


def check_recall_table(table) -> dict:
    """Validate the recall study's table and return it. Its format::

        {"design": {"seq_len": int, "vocab_size": int, "kv_pairs": [int, ...], "widths": [int, ...]},
         "arms": {arm: {width: {"mixer": str, "options": dict, "lr": float, "seeds": [int, ...],
                                "state_bytes": int, "test_mean": [float per seed],
                                "by_count": {n_pairs: [float per seed]}}}},
         "comparisons": [{"arm": str, "against": str, "width": int, "difference": float, "ci95": [lo, hi],
                          "p": float, "p_holm": float, "told_apart": bool, "seeds": [int, ...]}]}

    Widths and kv counts may be ints or their strings (as JSON keeps them). A run's ``mixer`` and ``options`` (the
    options its mixer was built with) say what the arm is: :func:`gma_size` reads its K and routing from them.

    Raises:
        TypeError, ValueError: naming the first entry that does not fit.
    """
    if not isinstance(table, dict):
        raise TypeError(f"table must be a dict (the recall study's table), got {type(table).__name__}")
    missing = [key for key in ("design", "arms", "comparisons") if key not in table]
    if missing:
        raise ValueError(f"table lacks {missing}; it needs 'design', 'arms' and 'comparisons'")
    design = table["design"]
    for key in ("seq_len", "vocab_size", "kv_pairs", "widths"):
        if key not in design:
            raise ValueError(f"table['design'] lacks {key!r}")
    if not isinstance(table["arms"], dict):
        raise TypeError(f"table['arms'] must be a dict of arms, got {type(table['arms']).__name__}")
    for arm, by_width in table["arms"].items():
        if not isinstance(by_width, dict):
            raise TypeError(f"table['arms'][{arm!r}] must map widths to runs, got {type(by_width).__name__}")
        for width, entry in by_width.items():
            where = f"table['arms'][{arm!r}][{width!r}]"
            lacking = [key for key in _RUN_KEYS if key not in entry]
            if lacking:
                raise ValueError(f"{where} lacks {lacking}")
            n_seeds = len(entry["seeds"])
            if len(entry["test_mean"]) != n_seeds:
                raise ValueError(f"{where}: {len(entry['test_mean'])} test means for {n_seeds} seeds")
            for count, values in entry["by_count"].items():
                if len(values) != n_seeds:
                    raise ValueError(f"{where}['by_count'][{count!r}]: {len(values)} values for {n_seeds} seeds")
    if not isinstance(table["comparisons"], list):
        raise TypeError(f"table['comparisons'] must be a list, got {type(table['comparisons']).__name__}")
    for index, comparison in enumerate(table["comparisons"]):
        lacking = [key for key in _COMPARISON_KEYS if key not in comparison]
        if lacking:
            raise ValueError(f"table['comparisons'][{index}] lacks {lacking}")
    return table


def table_entries(table) -> dict:
    """The table's runs as ``{(arm, width): entry}``, with int widths, int kv counts in ``by_count`` (sorted), and
    the arms in the table's order."""
    found = {}
    for arm, by_width in table["arms"].items():
        for width, entry in by_width.items():
            by_count = {int(count): [float(v) for v in values] for count, values in entry["by_count"].items()}
            found[arm, int(width)] = {**entry, "by_count": dict(sorted(by_count.items()))}
    return found


def mean_of(values) -> float:
    """The plain mean of ``values`` (an iterable of numbers)."""
    values = list(values)
    return sum(values) / len(values)


ROUTING_SUFFIXES = {"_remedy": "the balance remedy", "_var_bal": "variance + balance"}
"""The endings of a GMA arm's name that say its routing is not the default, and what each routing is:
``gma_k{K}_remedy`` runs the balance remedy (:data:`gma_teach.designs.BALANCE_REMEDY`), ``gma_k{K}_var_bal`` the
variance change with the balance loss (:data:`gma_teach.designs.VARIANCE_AND_BALANCE`)."""

_ROUTING_OPTIONS_OF = {"_remedy": BALANCE_REMEDY, "_var_bal": VARIANCE_AND_BALANCE}  # what each ending runs
_ARM_KEYS = ("mixer", "options", "prepare", "n_heads", "n_components", "gma_options")


def _declared_arm(arm: str, spec) -> Arm:
    """``spec`` as an :class:`~gma_teach.designs.Arm`: an ``Arm``, or a mapping whose arm keys (``mixer``,
    ``options``, ... in either form :meth:`Arm.from_spec` reads) say what ``arm`` is; other keys (a table run's
    ``lr``, ``seeds``, ...) are ignored."""
    if isinstance(spec, Arm):
        return spec
    if not isinstance(spec, Mapping) or "mixer" not in spec:
        raise TypeError(f"the spec of arm {arm!r} must be a gma_teach.designs.Arm or a mapping with 'mixer' and "
                        f"'options' (a record's 'spec', its 'design'['arm'], or a run of the recall table), got "
                        f"{spec!r}")
    return Arm.from_spec({key: spec[key] for key in _ARM_KEYS if spec.get(key) is not None})


def gma_size(arm: str, spec) -> tuple[int, bool] | None:
    """``(K, changed)`` of a GMA arm: its number of components, and whether its routing is not GMA's default.

    Args:
        arm: the arm's name.
        spec: what the arm is, whenever the caller has it: a :class:`gma_teach.designs.Arm`, a record's ``"spec"``
            or ``"design"["arm"]``, or a run of the recall table (``{"mixer", "options", ...}``). Then a ``gma``
            arm's K is its ``options["n_components"]`` and its routing is changed when it sets any of
            :data:`gma_teach.layer.ROUTING_OPTIONS`; any other mixer gives ``None``, whatever the name. The name
            is never read for K.

    Raises:
        TypeError: ``spec`` is not an ``Arm`` or a mapping with ``mixer``.
        ValueError: a ``gma`` spec that leaves K to its study's setting (the registry's default, read when the arm
            is resolved, :func:`gma_teach.study.resolve`): give the options it was built with.
    """
    declared = _declared_arm(arm, spec)
    if declared.mixer != "gma":
        return None
    if declared.n_components is None:
        raise ValueError(f"arm {arm!r} leaves K to its study's setting (the registry's default); give the "
                         f"options it was built with, e.g. its RunConfig's or the recall table's")
    return int(declared.n_components), any(key in declared.options for key in ROUTING_OPTIONS)


def gma_routing(arm: str, spec) -> str | None:
    """What routing a GMA arm runs, in words: ``"default routing"``, a value of :data:`ROUTING_SUFFIXES`, or (a
    spec whose routing options are neither) those options, ``"routing balance_weight=0.05"``; ``None`` for an arm
    :func:`gma_size` does not read as GMA. ``spec`` as for :func:`gma_size`."""
    size = gma_size(arm, spec)
    if size is None:
        return None
    if not size[1]:
        return "default routing"
    options = thawed(_declared_arm(arm, spec).options)
    keys = [key for key in ROUTING_OPTIONS if key in options]
    for suffix, named in _ROUTING_OPTIONS_OF.items():
        if set(keys) == set(named) & set(ROUTING_OPTIONS) and all(options.get(k) == v for k, v in named.items()):
            return ROUTING_SUFFIXES[suffix]
    return "routing " + ", ".join(f"{key}={options[key]!r}" for key in keys)


def word_list(numbers) -> str:
    """``[8, 16, 32]`` -> ``"8, 16 and 32"``."""
    numbers = [str(n) for n in numbers]
    return numbers[0] if len(numbers) == 1 else ", ".join(numbers[:-1]) + " and " + numbers[-1]


def bytes_text(n: int) -> str:
    """``65536`` -> ``"65,536 bytes"``."""
    return f"{int(n):,} bytes"


def find_comparison(table, arm, against, width):
    """The table's comparison of ``arm`` against ``against`` at ``width``, or ``None``."""
    for comparison in table["comparisons"]:
        if comparison["arm"] == arm and comparison["against"] == against and int(comparison["width"]) == width:
            return comparison
    return None


def verdict_of(difference: float, told_apart: bool) -> str:
    """``"higher"``, ``"lower"`` or ``"not told apart"``."""
    if not told_apart:
        return "not told apart"
    return "higher" if difference > 0 else "lower"


def exploratory_difference(entries, arm, against, width) -> dict | None:
    """A paired difference of mean test accuracy over the seeds both arms share (``None`` under 2 seeds)."""
    a, b = entries.get((arm, width)), entries.get((against, width))
    if a is None or b is None:
        return None
    seeds_a, seeds_b = dict(zip(a["seeds"], a["test_mean"])), dict(zip(b["seeds"], b["test_mean"]))
    common = [seed for seed in a["seeds"] if seed in seeds_b]
    if len(common) < 2:
        return None
    paired = paired_difference([seeds_a[s] for s in common], [seeds_b[s] for s in common])
    low, high = paired["ci95"]
    return {"difference": paired["mean"], "ci95": [low, high], "told_apart": low > 0 or high < 0,
            "seeds": common}


def compared_arms(entries, arm, width) -> tuple[str, ...]:
    """What a forgetting or hybrid arm is compared with: the arms it changes, from its mixer's registry entry
    (:func:`gma_teach.mixers.reference_arms`, with the run's options: the GMA arm of the same K for GMA's)."""
    return mixers.reference_arms(arm, entries[arm, width].get("options") or {})


def uses_default_routing(entry) -> bool:
    """Whether a run of the table (``table_entries(table)[arm, width]``, or a study's arm spec ``{"mixer",
    "options"}``) routes with GMA's default routing: a mixer whose routing can collapse (``gma``, ``local_gma``'s
    GMA heads, ``decay_gma``: :func:`gma_teach.mixers.routing_collapse_names`) built without any of the routing
    options (:data:`gma_teach.layer.ROUTING_OPTIONS`). That routing collapses onto one component in causal models
    (chapter 11), so such an arm measures a one-slot memory."""
    if not isinstance(entry, Mapping) or "mixer" not in entry:
        raise TypeError("entry must be a run of the table or an arm spec: a mapping with 'mixer' and 'options' (a "
                        "dict, or a gma_teach.designs.Arm)")
    options = entry.get("options") or {}
    collapsing = entry["mixer"] in mixers.routing_collapse_names()
    return collapsing and not any(key in options for key in ROUTING_OPTIONS)


def equal_state_points(table) -> list[dict]:
    """The GMA arms with a changed routing (:func:`gma_size` of each run) that keep exactly linear attention's
    decoding state at the same width, each with its primary comparison against linear attention: ``[{"width", "arm",
    "state_bytes", "mean", "linear_mean", "comparison"}]`` (the comparison is ``None`` when the table does not list
    it), by width."""
    check_recall_table(table)
    entries = table_entries(table)
    points = []
    for (arm, width), entry in entries.items():
        size, linear = gma_size(arm, entry), entries.get(("linear", width))
        if size is None or not size[1] or linear is None or entry["state_bytes"] != linear["state_bytes"]:
            continue
        points.append({"width": width, "arm": arm, "state_bytes": int(entry["state_bytes"]),
                       "mean": mean_of(entry["test_mean"]), "linear_mean": mean_of(linear["test_mean"]),
                       "comparison": find_comparison(table, arm, "linear", width)})
    return sorted(points, key=lambda point: (point["width"], point["arm"]))


def default_routing_floor(table) -> dict:
    """The GMA arms with the default routing (:func:`gma_size` of each run) against the guessing floor, read off the
    table.

    Returns:
        ``{"kv_pairs", "floor": {n: 1/n}, "mean_floor", "widths": {width: {"arms": [...], "by_count": {n: the
        mean over those arms of their mean accuracy at n}, "mean": the mean of their means over the counts}},
        "means": {(arm, width): mean over the counts}, "ratios": (lowest, highest) accuracy / (1/n) over every arm
        and count, "sentence"}``; ``sentence`` says how the arms' means compare with the mean floor and, at every
        count, with ``1/n``. ``widths`` is empty, and the sentence says so, when no such arm is recorded.
    """
    check_recall_table(table)
    entries = table_entries(table)
    counts = [int(n) for n in table["design"]["kv_pairs"]]
    floor, mean_floor = guessing_floor(counts), mean_guessing_floor(counts)
    sizes = {key: gma_size(key[0], entry) for key, entry in entries.items()}
    default = {key: entry for key, entry in entries.items() if sizes[key] is not None and not sizes[key][1]}
    found = {"kv_pairs": counts, "floor": floor, "mean_floor": mean_floor, "widths": {}, "means": {},
             "ratios": None}
    if not default:
        found["sentence"] = "No GMA arm with the default routing is recorded."
        return found
    ratios = []
    for width in sorted({width for _, width in default}):
        arms = sorted((arm for arm, w in default if w == width), key=lambda arm: sizes[arm, width][0])
        by_arm = {arm: {n: mean_of(default[arm, width]["by_count"][n]) for n in counts} for arm in arms}
        for arm in arms:
            found["means"][arm, width] = mean_of(default[arm, width]["test_mean"])
            ratios.extend(by_arm[arm][n] / floor[n] for n in counts)
        found["widths"][width] = {"arms": arms,
                                  "by_count": {n: mean_of(by_arm[arm][n] for arm in arms) for n in counts},
                                  "mean": mean_of(found["means"][arm, width] for arm in arms)}
    low, high = min(found["means"].values()), max(found["means"].values())
    found["ratios"] = (min(ratios), max(ratios))
    where = "at most" if high <= mean_floor else "above" if low > mean_floor else "about"
    found["sentence"] = (f"GMA with the default routing, {len(default)} arms: {low:.3f} to {high:.3f} in the mean "
                         f"over the counts, {where} the mean of 1/n, {mean_floor:.3f}; at every count each arm "
                         f"recalls {min(ratios):.2f} to {max(ratios):.2f} of 1/n.")
    return found

