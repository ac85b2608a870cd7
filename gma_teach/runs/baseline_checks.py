"""Baselines that learn nothing, explained before anything is said to beat them: the two declared checks
(:data:`gma_teach.designs.PERFORMER_CHECK`, :data:`gma_teach.designs.MAMBA_CHECK`) read beside the studies they
check.

:func:`baseline_checks` reads, for Performer in the LM study, its bits per byte at 64 and 256 features beside no
mixing and how far each trained layer's FAVOR+ weights are from softmax's (``"favor_error"`` of its runs, against a
plain average's distance); for Mamba in the recall study, its test accuracy at the study's rate and at 1e-3 beside
the guessing floor. :func:`baseline_check_sentences` says it in words, every number read from the records. Nothing
here trains.
"""
from __future__ import annotations

import statistics

from ..capacity import mean_guessing_floor
from ..designs import LM_STUDY, MAMBA_CHECK, PERFORMER_CHECK, RECALL_STUDY
from .arm_records import load_arm
from .study_values import kept_runs

__all__ = ["baseline_check_sentences", "baseline_checks"]


def _favor(record: dict) -> dict:
    """A Performer LM record's seed-0 bits per byte and its layers' mean FAVOR+ and plain-average distances."""
    run = record["runs"][0]
    errors = run["favor_error"]
    return {"bits_per_byte": run["val"]["bits_per_byte"], "seed": run["seed"],
            "n_features": errors[0]["n_features"], "layers": len(errors),
            "favor_tv": statistics.fmean(e["weights_tv"] for e in errors),
            "uniform_tv": statistics.fmean(e["uniform_tv"] for e in errors),
            "closer_layers": sum(e["weights_tv"] < e["uniform_tv"] for e in errors)}


def baseline_checks(folder=None) -> dict:
    """What the two checks found, read from the records in ``folder`` (default: the book's results).

    Returns:
        ``{"performer": {arm: {"bits_per_byte", "seed", "n_features", "layers", "favor_tv", "uniform_tv",
        "closer_layers"}} | None, "no_mixing": bits per byte of the LM study's ``none`` arm at the same seed |
        None, "mamba": {"study": {"lr", "test_means"}, "check": {"lr", "test_means"}} | None, "floor": the recall
        metric's guessing floor}``; a part is ``None`` while its records are missing.
    """
    performer = {arm: load_arm(PERFORMER_CHECK, arm, folder) for arm in PERFORMER_CHECK.arms}
    found = {"performer": None, "no_mixing": None, "mamba": None,
             "floor": mean_guessing_floor(RECALL_STUDY.setting["kv_pairs"])}
    if all(performer.values()):
        found["performer"] = {arm: _favor(record) for arm, record in performer.items()}
        none = load_arm(LM_STUDY, "none", folder)
        seed = PERFORMER_CHECK.seeds[0]
        at_seed = [run for run in (none or {"runs": []})["runs"] if run["seed"] == seed]
        found["no_mixing"] = at_seed[0]["val"]["bits_per_byte"] if at_seed else None
    (width,) = MAMBA_CHECK.widths
    mamba = {"study": load_arm(RECALL_STUDY, "mamba", folder, width=width),
             "check": load_arm(MAMBA_CHECK, "mamba", folder, width=width)}
    if all(record and record.get("chosen_lr") for record in mamba.values()):
        found["mamba"] = {label: {"lr": record["chosen_lr"], "test_means": [r["test_mean"] for r in kept_runs(record)]}
                          for label, record in mamba.items()}
    return found


def baseline_check_sentences(folder=None, *, which: str | None = None) -> list[str]:
    """:func:`baseline_checks` in words: for each check whose records are in ``folder`` (or only ``which``,
    ``"performer"`` or ``"mamba"``), what it measured and, where every number points one way, what that says."""
    if which not in (None, "performer", "mamba"):
        raise ValueError(f"which must be None, 'performer' or 'mamba', got {which!r}")
    found = baseline_checks(folder)
    sentences = []
    if found["performer"] is not None and which in (None, "performer"):
        parts = [f"{c['n_features']} features {c['bits_per_byte']:.4f} bits per byte, FAVOR+'s weights "
                 f"{c['favor_tv']:.2f} from softmax's against a plain average's {c['uniform_tv']:.2f} (total "
                 f"variation, mean over its {c['layers']} layers; closer in {c['closer_layers']})"
                 for c in found["performer"].values()]
        none = ("" if found["no_mixing"] is None else
                f"; no mixing at the same seed: {found['no_mixing']:.4f}")
        sentences.append(f"Performer in the small LM, seed {PERFORMER_CHECK.seeds[0]}: " + "; ".join(parts) + none
                         + ".")
        checks = found["performer"].values()
        if all(c["closer_layers"] < c["layers"] for c in checks):
            fewest, most = (min(checks, key=lambda c: c["n_features"]), max(checks, key=lambda c: c["n_features"]))
            lowered = most["bits_per_byte"] < fewest["bits_per_byte"]
            means = "; ".join(f"{c['favor_tv']:.2f} against {c['uniform_tv']:.2f} at {c['n_features']} features"
                              for c in checks)
            nearer = {c["favor_tv"] < c["uniform_tv"] for c in checks}
            mean_side = ("nearer to softmax than the plain average" if nearer == {True} else
                         "farther from softmax than the plain average" if nearer == {False} else
                         "on either side of the plain average")
            sentences.append(f"On seed {PERFORMER_CHECK.seeds[0]} alone, one run per feature count: at every "
                             f"feature count some layer's FAVOR+ weights are farther from softmax's than a plain "
                             f"average's, while in the mean over the layers FAVOR+ is {mean_side} ({means}); and "
                             f"{most['n_features']} features give {'lower' if lowered else 'no lower'} bits per "
                             f"byte than {fewest['n_features']}. One seed does not say what holds Performer back: "
                             f"it shows that FAVOR+'s estimate misses softmax in some layer on this seed's trained "
                             f"queries and keys, and that more features {'did' if lowered else 'did not'} lower "
                             f"bits per byte on it (its features match a hand-written float64 spec, "
                             f"tests/test_kernel_error.py).")
    if found["mamba"] is not None and which in (None, "mamba"):
        names = {"study": "the recall study", "check": "the check"}
        parts = [f"at {names[label]}'s rate {m['lr']:g}, test "
                 f"accuracy {statistics.fmean(m['test_means']):.3f} (seeds "
                 f"{', '.join(f'{x:.3f}' for x in m['test_means'])}; above the floor in "
                 f"{sum(x > found['floor'] for x in m['test_means'])})" for label, m in found["mamba"].items()]
        sentences.append(f"Mamba in recall at width {MAMBA_CHECK.widths[0]}: " + "; ".join(parts)
                         + f"; the guessing floor {found['floor']:.3f}.")
        if not any(x > found["floor"] for m in found["mamba"].values() for x in m["test_means"]):
            sentences.append("At neither rate does any seed of Mamba pass the guessing floor, and its block gives a "
                             "reference implementation's outputs (tests/test_mamba_reference.py): within the recall "
                             "study's 1,000 steps Mamba does not learn the task at these sizes, so no row reads an "
                             "arm above it as more than an arm above the floor.")
    return sentences
