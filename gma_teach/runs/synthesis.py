"""Part IV at a glance: what GMA is for, what it is not for and what is not shown, and every study's declared
comparisons counted.

:func:`verdict_of` is the one rule of the claims table: *for* (ahead of the named rivals, told apart after Holm's
correction or by an exact property they lack), *not for* (behind them, the same way), *not shown* (everything
else). :func:`gma_claims` reads the records and returns one claim a row, each judged by that rule from the
comparisons it names (its ``"basis"``), with its rivals, its scope, its number and its unadjusted intervals;
:func:`format_claims` writes them as the table README and Part IV's last page show. Each of those rows sets GMA
against a rival (another mixer); GMA's routings against each other are :func:`tuning_claims`, a table of their own,
since they say how to tune GMA, not what it is for. :func:`what_gma_is_for` reads the rows into one paragraph, and
:func:`format_glance` writes README's results at a glance: both tables and that paragraph.
:func:`part_iv_synthesis` reads the saved tables (``<study>_tables.json``, ``recall_study_tables.json``) and counts
each study's declared comparisons from the GMA side, GMA against other mixers apart from routing changes against
default GMA; :func:`format_synthesis` writes the rows as a Markdown table. *Ahead* or *behind* is a declared
comparison told apart after Holm's correction; *not told apart* is one that is not (never a tie proven). A study
with a declared second look is counted at it (:func:`standing_family`). Nothing here trains: it reads what the
records and tables already hold.

Size: one file over 500 lines because every row of the claims table is built here beside the one rule that judges
them all (:func:`verdict_of`) and the helpers they share (basis, sides of an interval, scope sentences), so that a
reader checks each row's wording against the rule in one place.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..baselines import make_mixer, mixer_state_bytes
from ..capacity import ceiling_count, key_routing_phrase, lost_pair_table, slot_goal
from ..designs import (
    CAPACITY_STUDY,
    LISTOPS_LRA_STUDY,
    LM_SETTING,
    RECALL_STUDY,
    RECALL_V2_STUDY,
    SLOT_BALANCED_STUDY,
    SLOT_ROUTING_GOAL,
    STUDIES,
    VARIANCE_AND_BALANCE,
    Arm,
)
from ..layer import LM_ROUTING_REMEDY
from ..records import results_folder
from ..stats import largest_difference_allowed
from .arm_records import load_arm, tables_path
from .verdicts import LOWER_IS_BETTER, declared_comparisons, rests_on_looks


def _counted_studies() -> list[str]:
    """The studies with a declared ``chapter``, which the synthesis counts, by name, in the chapters' order."""
    return sorted((name for name, s in STUDIES.items() if s.chapter is not None), key=lambda n: STUDIES[n].chapter)


STUDY_CHAPTERS = {name: STUDIES[name].chapter for name in _counted_studies()}
"""The chapter each study of the synthesis backs, by name; derived from :data:`gma_teach.designs.STUDIES`."""

WHAT = {name: STUDIES[name].what for name in _counted_studies()}
"""Each study of the synthesis in a few words, by the same names; derived at import from each study's ``what``."""


def standing_family(saved: dict) -> dict:
    """The declared comparisons whose verdicts stand in a saved table (``<study>_tables.json``): its declared second
    look where the study has one (more seeds for every arm, each p paying for the extra look), else its first."""
    return saved.get("second_look") or saved["declared"]


def _mean_difference(comparison: dict) -> float:
    """A saved declared comparison's mean difference: its ``"mean"`` (``"difference"`` in the recall study's
    tables, saved in that form)."""
    return comparison["mean"] if "mean" in comparison else comparison["difference"]


def _counts(comparisons: list[dict], study: dict) -> dict:
    """Declared comparisons counted from the GMA side, apart for GMA against another mixer (``"against_mixers"``)
    and for a routing change against default GMA (``"remedies"``): ``{group: [ahead, not told apart, behind]}``."""
    counts = {"against_mixers": [0, 0, 0], "remedies": [0, 0, 0]}
    for c in comparisons:
        arm, against = study["arms"][c["arm"]], study["arms"][c["against"]]
        group = "remedies" if arm["mixer"] == against["mixer"] == "gma" else "against_mixers"
        difference = _mean_difference(c) if arm["mixer"] == "gma" else -_mean_difference(c)
        better = difference < 0 if c.get("metric") in LOWER_IS_BETTER else difference > 0
        counts[group][1 if not c["told_apart"] else 0 if better else 2] += 1
    return counts


def _row(study: str, comparisons: list[dict], declared: dict, seeds, spec: dict) -> dict:
    counts = _counts(comparisons, spec)
    return {"study": study, "what": STUDIES[study].what, "chapter": STUDIES[study].chapter,
            "declared": declared["family_size"], "recorded": len(declared["comparisons"]),
            "seeds": f"{seeds[0]}-{seeds[-1]}", **counts,
            "wins": sum(group[0] for group in counts.values()), "ties": sum(group[1] for group in counts.values()),
            "losses": sum(group[2] for group in counts.values())}


def part_iv_synthesis(folder=None) -> list[dict]:
    """One row per study with a saved table: ``{"study", "what", "chapter", "declared" (the family's size),
    "recorded" (its comparisons run), "seeds" (those the verdicts rest on, ``"0-4"``: the
    study's own where its saved family does not name them, as the recall study's does not), "against_mixers" and
    "remedies" (each ``[ahead, not told apart, behind]`` from the GMA side: GMA against another mixer, a routing
    change against default GMA), "wins", "ties", "losses" (their sums)}``, in the chapters' order, each counted at
    its :func:`standing_family`."""
    folder = Path(folder) if folder is not None else results_folder()
    rows = []
    for name in _counted_studies():
        path = tables_path(STUDIES[name], folder)
        if not path.exists():
            continue
        declared = standing_family(json.loads(path.read_text()))
        seeds = declared.get("seeds", STUDIES[name].seeds)
        rows.append(_row(name, declared["comparisons"], declared, seeds, STUDIES[name]))
    return rows


def format_synthesis(rows: list[dict]) -> str:
    """The rows as a Markdown table (one line a study). GMA against other mixers and routing changes against default
    GMA are counted in separate columns, each as ahead / not told apart / behind from the GMA (or changed) side."""
    lines = ["| study | chapter | declared comparisons run | seeds | GMA vs other mixers: ahead / not told apart / "
             "behind | a routing change vs default GMA: ahead / not told apart / behind |", "|---|---|---|---|---|---|"]
    for r in rows:
        mixers, remedies = ("-" if sum(r[key]) == 0 else " / ".join(map(str, r[key]))
                            for key in ("against_mixers", "remedies"))
        lines.append(f"| {r['what']} | {r['chapter']} | {r['recorded']} of {r['declared']} | {r['seeds']} | "
                     f"{mixers} | {remedies} |")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------- what GMA is for, and not for
VERDICTS = ("for", "not for", "not shown")
"""The three values of :func:`verdict_of`, the one rule every row of :func:`gma_claims` is judged by."""

CLAIM_COLUMNS = ("row", "GMA is", "the claim", "against", "chapter")
"""The columns of the claims table of :func:`format_claims`; each row's scope, number, intervals and record follow
it in a numbered list."""

PROFILING_RECORD = "profiling_block_cpu.json"
"""The record the memory and throughput rows read: the GMA block's own CPU record (GMA, linear attention and SDPA
trained at growing lengths in one interleaved run). :func:`gma_claims` takes another of the same kind
(``profiling_record=``), such as ``profiling_cpu_small.json`` (every mixer of the registry, eager softmax among
them); the rows are read the same way from either."""

PLAIN_AUTOGRAD_GMA = "gma (operators)"
"""The profiling record's label for GMA through autograd over its separate operators, the treatment linear
attention and SDPA get; ``"gma"`` is GMA with its hand-written backward (``gma_teach._gma_autograd``)."""

CONTROLS = ("none", "uniform")
"""Mixers that are controls, not rivals: no mixing, and the uniform causal average."""


def standing_of(comparison: dict) -> str:
    """Where GMA stands against one named rival: ``"ahead"``, ``"behind"`` or ``"open"``.

    ``comparison`` is one of
      * ``{"rival", "exact": "ahead" | "behind"}``: an exact property (bytes counted, not sampled);
      * ``{"rival", "difference", "ci95", "told_apart", "lower_is_better"}``: a declared comparison after Holm's
        correction, ``difference`` GMA minus the rival; ahead or behind only when told apart;
      * ``{"rival", "difference", "measured_once": True, "lower_is_better"}``: one measurement with no interval,
        which tells nothing apart (always ``"open"``).
    """
    if not isinstance(comparison, dict) or "rival" not in comparison:
        raise ValueError(f"a comparison must be a dict naming its 'rival', got {comparison!r}")
    if "exact" in comparison:
        if comparison["exact"] not in ("ahead", "behind"):
            raise ValueError(f"exact must be 'ahead' or 'behind', got {comparison['exact']!r}")
        return comparison["exact"]
    if "difference" not in comparison or "lower_is_better" not in comparison:
        raise ValueError(f"a measured comparison needs 'difference' and 'lower_is_better', got {comparison!r}")
    if comparison.get("measured_once"):
        return "open"
    if "told_apart" not in comparison:
        raise ValueError(f"a declared comparison needs 'told_apart' (or 'measured_once'), got {comparison!r}")
    if not comparison["told_apart"]:
        return "open"
    better = comparison["difference"] < 0 if comparison["lower_is_better"] else comparison["difference"] > 0
    return "ahead" if better else "behind"


def verdict_of(comparisons: list[dict]) -> str:
    """The one rule of the claims table: ``"for"``, ``"not for"`` or ``"not shown"``.

    *For*: GMA is ahead of every named rival (told apart after Holm's correction, or by an exact property the
    rival lacks). *Not for*: GMA is behind every named rival (told apart behind, or an exact property against it).
    *Not shown*: everything else (a comparison not told apart, a single measurement, or rivals on both sides).

    Args:
        comparisons: a non-empty list, one per named rival or per (GMA arm, rival) pair, each as
            :func:`standing_of` reads it.
    """
    if not isinstance(comparisons, (list, tuple)) or not comparisons:
        raise ValueError(f"comparisons must be a non-empty list, got {comparisons!r}")
    standings = {standing_of(c) for c in comparisons}
    return "for" if standings == {"ahead"} else "not for" if standings == {"behind"} else "not shown"


def _read(folder: Path, name: str) -> dict:
    return json.loads((folder / name).read_text())


def _declared(saved: dict, arm: str, against: str, metric: str | None = None, width: int | None = None) -> dict:
    """The one declared comparison ``arm`` against ``against`` of a saved table's standing family."""
    found = [c for c in standing_family(saved)["comparisons"] if c["arm"] == arm and c["against"] == against
             and (metric is None or c.get("metric") == metric) and (width is None or c.get("width") == width)]
    if len(found) != 1:
        raise ValueError(f"{len(found)} declared comparisons {arm} - {against} ({metric}, width {width})")
    return found[0]


def _basis(c: dict, rival: str, metric: str, sign: int = 1) -> dict:
    """A declared comparison as :func:`standing_of` reads it, GMA's side first (``sign=-1`` where GMA is the
    comparison's ``against``)."""
    low, high = (sign * x for x in c["ci95"])
    return {"rival": rival, "difference": sign * _mean_difference(c), "ci95": sorted([low, high]), "p": c["p"],
            "p_holm": c["p_holm"], "told_apart": c["told_apart"], "lower_is_better": metric in LOWER_IS_BETTER}


def interval_sides(b: dict, scale: float = 1.0) -> tuple[float, float]:
    """``(behind, ahead)``: how far behind and how far ahead of its rival a comparison's unadjusted 95% interval
    allows its subject (``b["difference"]`` is subject minus rival, ``b["lower_is_better"]`` says which way is
    ahead), each in the units of ``scale`` and at least 0; an interval that excludes 0 allows one side only."""
    turn = -1.0 if b["lower_is_better"] else 1.0
    low, high = sorted(turn * scale * x for x in b["ci95"])  # subject better to the right
    return max(0.0, -low), max(0.0, high)


def _verdict(b: dict, digits: int, scale: float = 1.0, subject: str = "GMA") -> str:
    """A declared comparison's unadjusted 95% interval (both ends), its Holm p and its verdict; one not told apart
    whose interval holds 0 comes with how far behind and how far ahead of the rival the interval allows
    ``subject`` (each side its own bound, never read as parity)."""
    low, high = (scale * x for x in b["ci95"])
    text = (f"unadjusted 95% interval {low:.{digits}f} to {high:.{digits}f}, Holm p {b['p_holm']:.2g}, "
            f"{'told apart' if b['told_apart'] else 'not told apart'}")
    if not b["told_apart"] and low <= 0 <= high:
        behind, ahead = interval_sides(b, scale)
        text += (f", the interval allowing {subject} from {behind:.{digits}f} behind to {ahead:.{digits}f} "
                 "ahead")
    return text


def _claim_row(side: str, claim: str, against: str, scope: str, number: str, evidence: str, record: str, chapter: int,
               basis: list[dict], unit: str = "", scale: float = 1.0) -> dict:
    return {"side": side, "claim": claim, "against": against, "scope": scope, "number": number,
            "evidence": evidence, "record": record, "chapter": chapter, "basis": basis, "unit": unit, "scale": scale}


def _profiling_rows(folder: Path, record_name: str) -> list[dict]:
    """The memory and throughput rows from a profiling record: every mixer's training step at growing lengths,
    read at the longest length they all reach (``"mixer"`` or ``"label"`` names a result; a record with causal
    and bidirectional runs is read bidirectional)."""
    record = _read(folder, record_name)
    results = [r for r in record["results"] if not r.get("causal", False)]
    by = {}
    for r in results:
        by.setdefault(r.get("mixer", r.get("label")), {})[r["seq_len"]] = r
    names = ("gma", "linear", "sdpa")
    longest = max(set.intersection(*(set(by[name]) for name in names)))
    at = {name: by[name][longest] for name in by if longest in by[name]}
    mib = {name: r["peak_memory_bytes"] / 2**20 for name, r in at.items()}
    speed = {name: r["tokens_per_second"] for name, r in at.items()}
    slopes = {}
    for name in ("gma", "softmax"):
        lengths = sorted(by.get(name, {}))
        if len(lengths) > 1:
            slopes[name] = float(np.polyfit(np.log(lengths), np.log([by[name][n]["peak_memory_bytes"]
                                                                     for n in lengths]), 1)[0])
    rivals = (("linear", "linear attention"), ("sdpa", "SDPA"))
    memory = [{"rival": name, "exact": "ahead" if mib["gma"] < mib[name] else "behind",
               "difference": mib["gma"] - mib[name], "lower_is_better": True} for name, _ in rivals]
    memory_verdict = verdict_of(memory)
    order = ", ".join(f"{label} {mib[name]:.1f}" for name, label in rivals)
    softmax = (f"; eager softmax {mib['softmax']:.1f}, its slope {slopes['softmax']:.2f} against GMA's "
               f"{slopes['gma']:.2f}: linear memory is ahead of eager softmax only") if "softmax" in slopes else ""
    threads = record.get("threads", 1)
    cpu = f"CPU, {threads} thread{'s' if threads != 1 else ''}, one run"
    direction = "bidirectional, " if any("causal" in r for r in record["results"]) else ""
    scope = f"one block, {direction}batch 1, N = {longest:,}, {cpu}"
    where = {side: " and ".join(label for (name, label), m in zip(rivals, memory) if m["exact"] == side)
             for side in ("ahead", "behind")}
    memory_evidence = ("peak bytes counted (exact for this code): GMA "
                       + "; ".join(f"{word} {where[side]}" for side, word in (("behind", "behind"),
                                                                              ("ahead", "ahead of")) if where[side])
                       + f"; SDPA never stores the N x N matrix{softmax}; on a GPU, with its kernels, not known here")
    throughput = [{"rival": name, "difference": speed["gma"] - speed[name], "measured_once": True,
                   "lower_is_better": False} for name, _ in rivals]
    sides = "; ".join(f"{'ahead of' if speed['gma'] > speed[name] else 'behind'} {label}" for name, label in rivals)
    throughput_verdict = verdict_of(throughput)
    plain = PLAIN_AUTOGRAD_GMA in at
    treatment = ("; GMA runs its hand-written backward, linear attention plain autograd through its operators, "
                 "SDPA PyTorch's scaled_dot_product_attention with its own backward"
                 + ("" if plain else ", and this record holds no GMA through plain autograd"))
    if plain:
        places = {side: " and ".join(label for name, label in rivals
                                     if (mib[PLAIN_AUTOGRAD_GMA] < mib[name]) == (side == "ahead"))
                  for side in ("ahead", "behind")}
        memory_evidence += (f"; GMA through plain autograd, as linear attention runs, peaks at "
                            f"{mib[PLAIN_AUTOGRAD_GMA]:.1f} MiB: "
                            + "; ".join(f"{word} {places[side]}" for side, word in (("behind", "behind"),
                                                                                   ("ahead", "ahead of"))
                                        if places[side]))
    plain_speed = (f"; GMA through plain autograd {speed[PLAIN_AUTOGRAD_GMA]:,.0f}" if plain else "")
    return [
        _claim_row(memory_verdict, "less training memory than the linear-time rivals and SDPA",
                   "linear attention, SDPA", scope + treatment, f"peak MiB: GMA {mib['gma']:.1f}, {order}",
                   memory_evidence, record_name, 8, memory, "peak MiB"),
        _claim_row(throughput_verdict, "faster training at long context", "linear attention, SDPA",
                   scope + treatment, f"tokens/s: GMA {speed['gma']:,.0f}, "
                   + ", ".join(f"{label} {speed[name]:,.0f}" for name, label in rivals) + plain_speed,
                   f"one CPU run, no interval ({sides} in it); on a GPU, where the paper's Table 1 has SDPA several "
                   "times faster up to 4K, not known here", record_name, 8, throughput, "tokens/s"),
    ]


def _state_claim() -> dict:
    """GMA's decoding state against the KV cache, at the LM study's model (one layer, batch 1, float32), and the
    other mixers of the registry whose state does not grow either."""
    from ..baselines import MIXER_NAMES, make_mixer, mixer_state_bytes  # the registry: its states' bytes count
    from ..designs import LM_SETTING

    d, h, k = LM_SETTING["d_model"], LM_SETTING["n_heads"], LM_SETTING["n_components"]
    gma = mixer_state_bytes(make_mixer("gma", d, h, causal=True, n_components=k), 0)
    sdpa = make_mixer("sdpa", d, h, causal=True)
    crossing = next(n for n in range(1, 10**6) if mixer_state_bytes(sdpa, n) > gma)
    fixed = []
    for name in MIXER_NAMES:
        if name in ("gma", *CONTROLS):
            continue
        try:
            mixer = make_mixer(name, d, h, causal=True)
        except ValueError:  # a bidirectional-only mixer has no decoding state
            continue
        if mixer_state_bytes(mixer, 1) == mixer_state_bytes(mixer, 10**4):
            fixed.append(name)
    basis = [{"rival": "sdpa", "exact": "ahead"}]  # SDPA's cache grows with every token; GMA's state does not
    return _claim_row(verdict_of(basis), "a decoding state that stops growing", "SDPA (its KV cache)",
                f"one layer of the LM study's model (K = {k}, width {d}), batch 1, float32",
                f"{gma:,} bytes at any length; SDPA's cache is larger from token {crossing}",
                "exact: each state's nbytes, tested; shared by " + ", ".join(fixed), "designs.LM_SETTING", 12, basis)


def _text_claim(folder: Path) -> dict:
    saved = _read(folder, "text_standin_tables.json")
    metric = saved["declared"]["comparisons"][0]["metric"]
    pairs = [(_declared(saved, "gma", rival), rival) for rival in ("softmax", "linear")]
    basis = [{**_basis(c, rival, c["metric"]), "arm": "gma"} for c, rival in pairs]
    runs, falling, config = 0, 0, None
    for arm in ("gma", "softmax", "linear"):
        record = _read(folder, f"text_standin_{arm}.json")
        config = config or record["config"]
        for run in record["runs"]:
            losses = run["history"]["train_loss"]
            runs, falling = runs + 1, falling + (losses[-1] < losses[-2])
    still = "every run" if falling == runs else f"{falling} of {runs} runs"
    seeds = saved["declared"]["seeds"]
    scope = (f"{config['n_train']:,} texts of {config['max_length']} bytes, seeds {seeds[0]}-{seeds[-1]}, "
             f"{config['epochs']} epochs at one learning rate ({config['lr']:g}) for every arm; training loss "
             f"still falling at the last epoch in {still}, so every arm underfit")
    if metric != "last_epoch_test_accuracy":
        raise ValueError(f"the Text stand-in row reads accuracy in points, got metric {metric!r}")
    return _claim_row(verdict_of(basis), "short byte-level classification (the offline Text stand-in, not LRA Text)",
                "softmax, linear attention", scope,
                ", ".join(f"{100 * c['mean']:+.2f} points over {rival}" for c, rival in pairs),
                "; ".join(f"{rival}: {_verdict(b, 2, 100)}" for b, (_, rival) in zip(basis, pairs)),
                "text_standin_tables.json", 9, basis, "accuracy, points", 100.0)


def _recall_scope(routing: str) -> str:
    """The recall study's scope, shared by its two rows: its length, steps, seeds, the learning rates each arm's
    kept rate was chosen from, ``routing`` (GMA's routing in the row), and its KV cache against GMA's largest
    state at the study's length."""
    setting, seeds, (width, *_) = RECALL_STUDY["setting"], RECALL_STUDY["seeds"], sorted(RECALL_STUDY["widths"])
    n, heads = setting["seq_len"], setting["n_heads"]
    largest_k = max(spec.n_components or 0 for spec in RECALL_STUDY.arms.values() if spec.mixer == "gma")
    cache = mixer_state_bytes(make_mixer("sdpa", width, heads, causal=True), n)
    largest = mixer_state_bytes(make_mixer("gma", width, heads, causal=True, n_components=largest_k), n)
    rates = " and ".join(f"{lr:g}" for lr in RECALL_STUDY.learning_rates or (setting.get("lr"),))
    return (f"{n} tokens, {setting['steps']:,} steps, seeds {seeds[0]}-{seeds[-1]}, each arm at the rate it kept of "
            f"{rates}; {routing}; at this length SDPA's KV cache ({cache:,} bytes at width {width}) is "
            f"{'smaller' if cache < largest else 'no smaller'} than GMA's largest state ({largest:,} bytes, "
            f"K = {largest_k})")


def _recall_default_claim(folder: Path) -> dict:
    """GMA with its default routing against linear attention and SDPA in the recall study: every default-routing
    GMA arm (every K) at every width against both rivals, the declared comparisons as saved."""
    name = tables_path(RECALL_STUDY, folder).name
    saved = _read(folder, name)
    default = {arm: spec for arm, spec in RECALL_STUDY.arms.items() if spec.mixer == "gma" and spec.n_components
               and set(spec.options) == {"n_components"}}
    if not default:
        raise ValueError("the recall study declares no GMA arm with the default routing")
    rivals = (("linear", "linear attention"), ("sdpa", "SDPA"))
    basis = [{**_basis(c, rival, c.get("metric", RECALL_STUDY["metric"])), "arm": arm, "width": width}
             for arm in default for width in sorted(RECALL_STUDY["widths"]) for rival, _ in rivals
             for c in [_declared(saved, arm, rival, width=width)]]
    ks = sorted(spec.n_components for spec in default.values())
    widths = sorted(RECALL_STUDY["widths"])
    told = sum(b["told_apart"] for b in basis)
    behind = sum(b["told_apart"] and b["difference"] < 0 for b in basis)
    number = "; ".join(f"GMA minus {label} {min(b['difference'] for b in part):+.3f} to "
                       f"{max(b['difference'] for b in part):+.3f}"
                       for rival, label in rivals for part in [[b for b in basis if b["rival"] == rival]])
    weakest = max(basis, key=lambda b: (b["p_holm"], b["p"]))
    evidence = (f"{told} of {len(basis)} told apart, {behind} of them GMA behind; the largest Holm p, "
                f"{weakest['arm']} (width {weakest['width']}) against {weakest['rival']}: {_verdict(weakest, 3)}")
    return _claim_row(verdict_of(basis), "recall with the default routing", "linear attention, SDPA",
                      _recall_scope(f"GMA's default routing at K = {ks[0]} to {ks[-1]}, widths "
                                            + " and ".join(str(w) for w in widths)),
                      f"recall accuracy, {number}", evidence, name, 12, basis, "recall accuracy")


def _recall_claim(folder: Path) -> dict:
    """GMA with the variance change and the balance loss against linear attention at equal state (recall: at each
    width, the arm of that spec with K the head width), with the study's scope and whether
    ``designs.RECALL_V2_STUDY`` has run."""
    name = tables_path(RECALL_STUDY, folder).name
    saved = _read(folder, name)
    heads = RECALL_STUDY["setting"]["n_heads"]
    equal_state = {w: Arm("gma", {"n_components": w // heads, **VARIANCE_AND_BALANCE}) for w in RECALL_STUDY.widths}
    pairs = [(_declared(saved, arm, "linear", width=w), spec.n_components, w, arm) for w, wanted in equal_state.items()
             for arm, spec in RECALL_STUDY.arms.items() if spec == wanted]
    basis = [{**_basis(c, "linear", c.get("metric", RECALL_STUDY["metric"])), "arm": arm, "width": w}
             for c, _, w, arm in pairs]
    v2 = RECALL_V2_STUDY["setting"]
    ran = (folder / f"{RECALL_V2_STUDY['name']}_tables.json").exists()
    capacity = ("" if (folder / CAPACITY_TABLES).exists() else
                "; the fast-weight capacity study, which isolates the memory, is tested once its primary pair holds "
                f"its {len(CAPACITY_STUDY.seeds)} seeds")
    steps = RECALL_STUDY["setting"]["steps"]
    scope = (_recall_scope("GMA's routing the variance change with the balance loss (the routing once chosen for "
                           "its active share), K equal to the width")
             + f"; {steps:,} steps may measure how fast a memory learns more than what it holds; the "
             f"study where the size of a state decides ({v2['seq_len']} tokens, {v2['steps']:,} steps) has "
             f"{'run' if ran else 'not run'}{capacity}")
    number = "; ".join(f"K={k} (width {w}) {c['difference']:+.3f}" for c, k, w, _ in pairs)
    return _claim_row(verdict_of(basis), "a better memory than linear attention at equal state (recall)",
                      "linear attention, equal state", scope,
                      f"GMA (variance + balance) minus linear attention: {number}",
                      "; ".join(f"K={k}: {_verdict(b, 3)}" for b, (_, k, _, _) in zip(basis, pairs))
                      + "; not known here: which recalls more where the size of the state decides", name, 12, basis,
                      "recall accuracy")


LISTOPS_LRA_TABLES = f"{LISTOPS_LRA_STUDY.name}_tables.json"
"""The saved tables of ListOps at LRA's lengths (:data:`gma_teach.designs.LISTOPS_LRA_STUDY`)."""


def _listops_lra_claim(folder: Path) -> list[dict]:
    """GMA against the other mixers of ListOps at LRA's lengths (the study's primary pairs with another mixer,
    each declared as the rival minus GMA and turned GMA's side first); no row until the study's tables are
    saved. Its routing change against default GMA is a tuning comparison, not a rival."""
    if not (folder / LISTOPS_LRA_TABLES).exists():
        return []
    saved = _read(folder, LISTOPS_LRA_TABLES)
    study, labels = LISTOPS_LRA_STUDY, {"sdpa": "SDPA", "linear": "linear attention", "performer": "Performer"}
    pairs = [(rival, gma) for rival, gma in study.primary
             if study.arms[gma].mixer == "gma" and study.arms[rival].mixer != "gma"]
    basis = [{**_basis(_declared(saved, rival, gma), rival, study.metric, sign=-1), "arm": gma}
             for rival, gma in pairs]
    setting, seeds = study.setting, standing_family(saved)["seeds"]
    scope = (f"sequences of {setting['min_length']:,} to {setting['max_length']:,} tokens, depth up to "
             f"{setting['max_depth']}, {setting['n_train']:,} training examples, {setting['epochs']} epochs, seeds "
             f"{seeds[0]}-{seeds[-1]}, one learning rate ({setting['lr']:g}) for every arm; {setting['n_layers']} "
             f"layers of width {setting['d_model']}, GMA with K = {setting['n_components']} and its default routing")
    plateau = saved.get("left_plateau")
    if plateau:
        counts = plateau["counts"]
        scope += (f"; exploratory, over {counts[pairs[0][1]][1]} seeds, runs with {plateau['outcome']}: "
                  + ", ".join(f"{'GMA' if arm == pairs[0][1] else labels.get(arm, arm)} {counts[arm][0]}"
                              for arm in [pairs[0][1], *(rival for rival, _ in pairs)]))
    name = lambda rival: labels.get(rival, rival)  # noqa: E731
    return [_claim_row(verdict_of(basis), "ListOps at LRA's lengths", ", ".join(name(b["rival"]) for b in basis),
                       scope, "test accuracy, GMA minus " + "; minus ".join(
                           f"{name(b['rival'])} {100 * b['difference']:+.1f} points" for b in basis),
                       "; ".join(f"{name(b['rival'])}: {_verdict(b, 1, 100)}" for b in basis)
                       + "; not known here: whether GMA is ahead of or behind these rivals on ListOps",
                       LISTOPS_LRA_TABLES, study.chapter, basis, "test accuracy, points", 100.0)]


CAPACITY_TABLES = f"{CAPACITY_STUDY.name}_tables.json"
"""The saved tables of the fast-weight capacity study (:data:`gma_teach.designs.CAPACITY_STUDY`); its row is in the
claims once they exist, that is once its primary pair holds every declared seed."""


CAP_WINDOW = 5
"""How many evaluations back the capacity row looks to say a run stopped at the step cap was still improving: its
validation loss at the last evaluation below its value this many evaluations earlier."""


def _capped_runs(folder: Path, arms, sizes, max_steps: int, seeds: set) -> tuple[str, str]:
    """Of the capacity runs of ``arms`` at the sizes ``sizes`` (one run per seed and size), ``"X of Y"`` stopped
    at the step cap, and ``"Z"`` of those with the validation loss still falling (:data:`CAP_WINDOW`)."""
    total = capped = still = blind = 0
    for arm in arms:
        record = load_arm(CAPACITY_STUDY, arm, folder)
        for run in (record or {"runs": []})["runs"]:
            if run["seed"] not in seeds:
                continue
            for n in map(str, sizes):
                total += 1
                if run["stopped"][n] == "max_steps" or run["steps"][n] >= max_steps:
                    capped += 1
                    loss = run.get("curves", {}).get(n, {}).get("loss", [])
                    blind += len(loss) <= CAP_WINDOW
                    still += len(loss) > CAP_WINDOW and loss[-1] < loss[-1 - CAP_WINDOW]
    return f"{capped} of {total} runs", f"{still}" + (f" ({blind} with no curve recorded)" if blind else "")


def _capacity_claim(folder: Path) -> list[dict]:
    """GMA against linear attention at equal state in the fast-weight capacity test, the primary family at every
    ``S`` it declares; no row until the study's tables are saved."""
    if not (folder / CAPACITY_TABLES).exists():
        return []
    saved = _read(folder, CAPACITY_TABLES)
    ((arm, rival),) = CAPACITY_STUDY.primary
    sizes = [int(metric.rsplit("_s", 1)[1]) for metric in CAPACITY_STUDY.metrics]
    basis = [{**_basis(c, rival, c["metric"]), "arm": arm, "n_pairs": n}
             for c, n in ((_declared(saved, arm, rival, metric=m), n) for m, n in zip(CAPACITY_STUDY.metrics, sizes))]
    setting, seeds = CAPACITY_STUDY.setting, standing_family(saved)["seeds"]
    state = mixer_state_bytes(make_mixer("linear", setting["d_model"], 1, causal=True), 2)
    capped, still = _capped_runs(folder, (arm, rival), sizes, setting["max_steps"], set(seeds))
    scope = (f"one causal layer of key size {setting['d_model']} storing S = {sizes[0]} to {sizes[-1]} distinct "
             f"pairs, at most {setting['max_steps']:,} steps, seeds {seeds[0]}-{seeds[-1]}: {capped} stopped at that "
             f"cap, {still} of them with the validation loss still falling over their last "
             f"{CAP_WINDOW * setting['eval_every']:,} steps, so the row compares memories still learning when they "
             "stopped, not what each holds at the end of training; GMA with K = 64 and the "
             f"balance remedy against linear attention's 64 features, both keeping {state:,} bytes of state"
             + key_routing_phrase(load_arm(CAPACITY_STUDY, arm, folder), sizes))
    return [_capacity_row("a better memory than linear attention at equal state (fast-weight capacity)", scope, basis,
                          CAPACITY_TABLES)]


def _capacity_row(claim: str, scope: str, basis: list[dict], record: str) -> dict:
    """A claims row of a fast-weight capacity family: GMA against linear attention at equal state, one comparison
    per ``S`` in ``basis``, in points of retrieval accuracy, judged by the one rule."""
    return _claim_row(verdict_of(basis), claim, "linear attention, equal state", scope,
                      "GMA minus linear attention: " + "; ".join(f"S={b['n_pairs']} {100 * b['difference']:+.1f} "
                                                                 "points" for b in basis),
                      "; ".join(f"S={b['n_pairs']}: {_verdict(b, 1, 100)}" for b in basis), record, 12, basis,
                      "retrieval accuracy, points", 100.0)


SLOT_MEMORY_TABLES = f"{SLOT_BALANCED_STUDY.name}_tables.json"
"""The saved tables of the balanced-assignment study (:data:`gma_teach.designs.SLOT_BALANCED_STUDY`): GMA with tied
routing and the balanced-assignment target against linear attention; its row is in the claims once they exist."""


def _slot_memory_claim(folder: Path) -> list[dict]:
    """GMA whose keys hold slots of their own (tied routing and the balanced-assignment target, K = 64) against
    linear attention at equal state in the fast-weight capacity test, trained to the stopping rule: the primary
    family of :data:`gma_teach.designs.SLOT_BALANCED_STUDY` at every ``S`` it declares, with how many runs reached
    the step ceiling, the keys still colliding and queries still misrouted at ``S = K``, and whether the declared goal
    (:data:`gma_teach.designs.SLOT_ROUTING_GOAL`) is reached; no row until the study's tables are saved."""
    if not (folder / SLOT_MEMORY_TABLES).exists():
        return []
    study = SLOT_BALANCED_STUDY
    saved = _read(folder, SLOT_MEMORY_TABLES)
    ((arm, rival),) = study.primary
    sizes = [int(metric.rsplit("_s", 1)[1]) for metric in study.metrics]
    basis = [{**_basis(c, rival, c["metric"]), "arm": arm, "n_pairs": n}
             for c, n in ((_declared(saved, arm, rival, metric=m), n) for m, n in zip(study.metrics, sizes))]
    records = {name: load_arm(study, name, folder) for name in (arm, rival)}
    setting, seeds = study.setting, standing_family(saved)["seeds"]
    ceiling = ceiling_count(study, records)
    goal = slot_goal(study, declared_comparisons(study, folder), records)
    at = goal["at"]
    split = lost_pair_table(study, records)["arms"][arm][at]
    state = mixer_state_bytes(make_mixer("linear", setting["d_model"], 1, causal=True), 2)
    options = study.arms[arm].options
    reached = goal["arms"][arm]["status"] == "reached"
    scope = (f"one causal layer of key size {setting['d_model']} storing S = "
             f"{', '.join(map(str, sizes[:-1]))} and {sizes[-1]} distinct pairs, trained to the stopping rule (an "
             f"evaluation loss at or below {setting['target_loss']:g}, or more than {setting['patience']} "
             f"evaluations without a new best) under a ceiling of {setting['max_steps']:,} steps that "
             f"{ceiling['at_ceiling']} of its {ceiling['recorded']} runs reached, seeds {seeds[0]}-{seeds[-1]}; GMA "
             f"with K = {options['n_components']}, tied routing and the balanced-assignment target (weight "
             f"{options['assignment_weight']:g}) against linear attention's 64 features, both keeping {state:,} "
             f"bytes of state; at S = {at}, per sequence, {split['collisions']:.1f} pairs lost to keys sharing a "
             f"slot and {split['misrouted']:.1f} to queries outside their key's slot; the declared goal (at least "
             f"{SLOT_ROUTING_GOAL['share']:.0%} of the pairs at S = "
             f"{' and '.join(map(str, SLOT_ROUTING_GOAL['sizes']))}, and at every S the lower end of the interval "
             f"no more than {SLOT_ROUTING_GOAL['margin']:g} below linear attention) "
             + ("reached" if reached else "not reached: " + "; ".join(goal["arms"][arm]["short"])))
    return [_capacity_row("a better memory than linear attention at equal state, each key in a slot of its own "
                          "(fast-weight capacity)", scope, basis, SLOT_MEMORY_TABLES)]


def _lm_scope(seeds) -> str:
    s = LM_SETTING
    return (f"{s['n_layers']} layers, width {s['d_model']}, {s['n_steps']} steps, seeds {seeds[0]}-{seeds[-1]}, "
            f"one learning rate ({s['lr']:g}) for every arm")


def _lm_rows(folder: Path) -> list[dict]:
    saved = _read(folder, "lm_study_tables.json")
    standing = standing_family(saved)
    looks = standing.get("looks", 1)
    rows = []
    for rival, label in (("sdpa", "SDPA"), ("linear", "linear attention")):
        family = [c for c in standing["comparisons"] if c["against"] == rival]
        basis = [{**_basis(c, rival, c["metric"]), "arm": c["arm"]} for c in family]
        told = sum(b["told_apart"] for b in basis)
        ahead = sum(b["difference"] < 0 for b in basis)
        means = (f"GMA minus {label} {min(b['difference'] for b in basis):+.4f} to "
                 f"{max(b['difference'] for b in basis):+.4f} in the means: {ahead} GMA arms of {len(basis)} "
                 f"ahead, {len(basis) - ahead} behind")
        smallest = min(basis, key=lambda b: b["p"])  # Holm keeps the order of the p-values, without its ties
        evidence = (f"{told} of {len(basis)} told apart; the smallest unadjusted p, {smallest['arm']} "
                    f"(p {smallest['p']:.2g}): {_verdict(smallest, 4)}")
        split = [b["arm"] for b in basis if rests_on_looks(b, looks)]
        if split:
            evidence += (f"; {', '.join(split)} would be told apart at a single look: the verdict rests on paying "
                         f"for the study's {looks} looks")
        widest = max(basis, key=lambda b: largest_difference_allowed(b["ci95"]))
        if widest is not smallest:
            evidence += (f"; the widest, {widest['arm']}: unadjusted 95% interval {widest['ci95'][0]:.4f} to "
                         f"{widest['ci95'][1]:.4f}")
        if verdict_of(basis) == VERDICTS[-1]:  # not shown
            evidence += f"; not known here: whether GMA is ahead of or behind {label} at these sizes"
        rows.append(_claim_row(verdict_of(basis), f"language modelling against {label} (small LM, bits per byte)",
                         label, _lm_scope(standing["seeds"]), means, evidence, "lm_study_tables.json", 10, basis,
                         "bits per byte"))
    return rows


REMEDY_TABLES = "routing_remedy_tables.json"
"""The saved tables of the remedy study (:data:`gma_teach.designs.REMEDY_STUDY`) that the routing rows read."""


def _remedy_arm() -> tuple[str, str]:
    """``(study name, arm)`` of the arm whose routing options are :data:`gma_teach.layer.LM_ROUTING_REMEDY`: an arm of
    the remedy study, or of the slot memory's language-model follow-on (``slot-lm``), where the rule read again with
    it as one more arm found it; ``("remedy", "default")`` when the rule kept the default."""
    for name in ("remedy", "slot-lm"):
        for arm, spec in STUDIES[name]["arms"].items():
            if {k: v for k, v in spec.options.items() if k != "n_components"} == LM_ROUTING_REMEDY:
                return name, arm
    return "remedy", "default"


def _routing_claims(folder: Path) -> list[dict]:
    """The remedy study's two questions, each a row: whether the default routing gives a causal LM lower bits per
    byte than every routing change, and whether the routing remedy's routing carries more information than the
    default's (which components are used is judged by that information, never by an arg-max count)."""
    saved = _read(folder, REMEDY_TABLES)
    standing = standing_family(saved)
    seeds = standing["seeds"]
    family = [c for c in standing["comparisons"] if c["metric"] == "val_bits_per_byte" and c["against"] == "default"]
    basis = [{**_basis(c, c["arm"], c["metric"], sign=-1), "arm": "default"} for c in family]  # default - change
    told = [b for b in basis if b["told_apart"]]
    evidence = f"{len(told)} of {len(basis)} told apart"
    evidence += "".join(f"; {'behind' if b['difference'] > 0 else 'ahead of'} {b['rival']} by "
                        f"{abs(b['difference']):.4f}, {_verdict(b, 4, subject='the default')}" for b in told)
    open_ = [b for b in basis if not b["told_apart"]]
    if open_:
        widest = max(open_, key=lambda b: largest_difference_allowed(b["ci95"]))
        evidence += f"; the widest of the others, {widest['rival']}: {_verdict(widest, 4, subject='the default')}"
    rows = [_claim_row(verdict_of(basis), "a causal LM with the default routing (bits per byte)",
                       "the routing changes: " + ", ".join(b["rival"] for b in basis), _lm_scope(seeds),
                       f"default minus each change {min(b['difference'] for b in basis):+.4f} to "
                       f"{max(b['difference'] for b in basis):+.4f}", evidence, REMEDY_TABLES, 11, basis,
                       "bits per byte")]
    source, remedy = _remedy_arm()
    if remedy != "default":
        record = REMEDY_TABLES if source == "remedy" else tables_path(STUDIES[source], folder).name
        from_study = saved if source == "remedy" else _read(folder, record)
        c = _declared(from_study, remedy, "default", metric="routing_information")
        gain = [{**_basis(c, "default", c["metric"]), "arm": remedy}]  # remedy - default
        k = STUDIES[source].arms[remedy].options["n_components"]
        rows.append(_claim_row(
            verdict_of(gain), f"a routing that carries information, with the routing remedy ({remedy})",
            "the default routing", _lm_scope(standing_family(from_study)["seeds"]) + f", K = {k}",
            f"remedy minus default {gain[0]['difference']:+.2f} bits (of log2 K = {np.log2(k):.0f})",
            _verdict(gain[0], 2, subject="the remedy"), record, 11, gain, "bits"))
    return rows


def gma_claims(folder=None, *, profiling_record: str = PROFILING_RECORD) -> list[dict]:
    """What GMA is for, what it is not for and what is not shown, one claim a row, each GMA against a rival (another
    mixer, never another GMA routing: those are :func:`tuning_claims`), judged by :func:`verdict_of` from its
    record: ``{"side" (one of :data:`VERDICTS`), "claim", "against" (the named
    rivals), "scope" (sizes, seeds, steps), "number", "evidence" (intervals and verdicts, or how it was measured),
    "record", "chapter", "basis" (the comparisons the verdict is computed from, each with its ``"difference"``,
    GMA minus the rival, where it has one), "unit" and "scale" (the basis's differences times ``scale`` are in
    ``unit``)}``.

    Args:
        folder: the results folder (default the book's).
        profiling_record: the profiling record the memory and throughput rows read (``PROFILING_RECORD``).
    """
    folder = Path(folder) if folder is not None else results_folder()
    return [*_profiling_rows(folder, profiling_record), _state_claim(), _text_claim(folder),
            *_listops_lra_claim(folder), _recall_default_claim(folder), _recall_claim(folder),
            *_capacity_claim(folder), *_slot_memory_claim(folder), *_lm_rows(folder)]


def tuning_claims(folder=None) -> list[dict]:
    """GMA's routings against each other, not against a rival: the remedy study's two questions, each a row
    judged by :func:`verdict_of` as :func:`gma_claims`'s rows are, its subject a GMA routing and its comparator
    another (the default routing, or the routing changes). They say how to tune GMA, not what GMA is for."""
    folder = Path(folder) if folder is not None else results_folder()
    return _routing_claims(folder)


TUNING_COLUMNS = ("row", "the routing is", "the claim", "against", "chapter")
"""The columns of the tuning table (:func:`tuning_claims` written by :func:`format_claims` with ``tuning=True``):
its rows compare GMA's routings with each other, so its verdict is the routing's, not GMA's."""

TUNING_HEADING = ("**Tuning GMA: one routing against another.** These rows compare GMA with GMA, so they say how to "
                  "tune it, not what it is for; the same rule judges them, the subject a routing and the comparator "
                  "another.")
"""The line README and Part IV put above the tuning table."""


def format_claims(rows: list[dict], *, tuning: bool = False) -> str:
    """The claims as Markdown (README's results at a glance, Part IV's findings page): a narrow table, one row a
    claim (its number, the verdict, the claim, the named rivals and the chapter), so that the verdict stays in view
    on a page of the book's width; then a numbered list with each row's scope, number, intervals and record. With
    ``tuning=True`` (the rows of :func:`tuning_claims`) the rows are numbered T1, T2, ... and the verdict column
    is the routing's (``TUNING_COLUMNS``)."""
    columns, mark = (TUNING_COLUMNS, "T") if tuning else (CLAIM_COLUMNS, "")
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += [f"| {mark}{i} | {r['side']} | {r['claim']} | {r['against']} | {r['chapter']} |"
              for i, r in enumerate(rows, start=1)]
    lines.append("")
    lines += [f"{'- ' + mark if tuning else ''}{i}. **{r['claim']}** ({r['side']}). Scope: {r['scope']}. "
              f"The number: {r['number']}. Interval and verdict: {r['evidence']}. Record: `{r['record']}`."
              for i, r in enumerate(rows, start=1)]
    return "\n".join(lines)


def what_gma_is_for(rows: list[dict]) -> str:
    """One plain paragraph from the claims (:func:`gma_claims`): what GMA is for, what it is not for and what is not
    shown at these sizes, each claim with its rivals and its row number, every group read from the rows' verdicts."""
    groups = {side: [f"{r['claim']} (row {i}, against {r['against']})" for i, r in enumerate(rows, start=1)
                     if r["side"] == side] for side in VERDICTS}
    known, unknown, unshown = VERDICTS
    none = "nothing the studies measured"
    return (f"What the rows tell a student, at these sizes, seeds and steps on a small CPU and nowhere else. GMA is "
            f"for {'; and '.join(groups[known]) or none}. It is not for {'; or '.join(groups[unknown]) or none}. "
            f"Not shown, so neither for nor against it: {'; '.join(groups[unshown]) or none}; there the studies do "
            "not tell GMA from its rivals, which is no tie, and each row says what it leaves open. No row says how any "
            "of this moves at the paper's sizes, on a GPU, or with more tuning than its row names.")


def format_glance(rows: list[dict], tuning: list[dict]) -> str:
    """README's results at a glance from its first table line to its end: the claims (:func:`format_claims`), the
    tuning table under ``TUNING_HEADING``, and the paragraph of :func:`what_gma_is_for`."""
    return "\n\n".join([format_claims(rows), TUNING_HEADING, format_claims(tuning, tuning=True),
                         what_gma_is_for(rows)])
