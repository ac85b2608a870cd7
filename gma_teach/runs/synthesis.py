"""Part IV at a glance: what GMA is for and what it is not for, and every study's declared comparisons counted.

:func:`gma_claims` reads the records and returns one claim a row, each with its number, its interval or verdict and
its record; :func:`format_claims` writes them as the table README and Part IV's last page show.
:func:`part_iv_synthesis` reads the saved tables (``<study>_tables.json``, ``recall_study_tables.json``) and counts
each study's declared comparisons from the GMA side, GMA against other mixers apart from routing remedies against
default GMA; :func:`format_synthesis` writes the rows as a Markdown table. *Ahead* or *behind* is a declared
comparison told apart after Holm's correction; *not told apart* is one that is not (never a tie proven). A study
with a declared second look is counted at it (:func:`standing_family`). Nothing here trains: it reads what the
records and tables already hold.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..designs import RECALL_STUDY, STUDIES
from ..records import results_folder
from ..stats import largest_difference_allowed
from .arm_records import tables_path
from .verdicts import LOWER_IS_BETTER

STUDY_CHAPTERS = {"listops-lra": 9, "text": 9, "lm": 10, "collapse": 11, "recall": 12}
"""The chapter that reads each study."""

WHAT = {"listops-lra": "ListOps at LRA's lengths", "text": "Text stand-in", "lm": "language modelling",
        "collapse": "routing remedies (LM)", "recall": "multi-query associative recall"}
"""Each study in a few words."""


def standing_family(saved: dict) -> dict:
    """The declared comparisons whose verdicts stand in a saved table (``<study>_tables.json``): its declared second
    look where the study has one (more seeds for every arm, each p paying for the extra look), else its first."""
    return saved.get("second_look") or saved["declared"]


def _counts(comparisons: list[dict], study: dict | None) -> dict:
    """Declared comparisons counted from the GMA side, apart for GMA against another mixer (``"against_mixers"``)
    and for a routing remedy against default GMA (``"remedies"``): ``{group: [ahead, not told apart, behind]}``."""
    counts = {"against_mixers": [0, 0, 0], "remedies": [0, 0, 0]}
    for c in comparisons:
        if study is None:  # the recall study: every declared comparison is a GMA arm against linear or SDPA
            group, difference = "against_mixers", c["difference"]
        else:
            arm, against = study["arms"][c["arm"]], study["arms"][c["against"]]
            both = arm["mixer"] == against["mixer"] == "gma"
            group = "remedies" if both else "against_mixers"
            difference = c["mean"] if arm["mixer"] == "gma" else -c["mean"]
        better = difference < 0 if c.get("metric") in LOWER_IS_BETTER else difference > 0
        counts[group][1 if not c["told_apart"] else 0 if better else 2] += 1
    return counts


def _row(study: str, comparisons: list[dict], declared: dict, seeds, spec: dict | None) -> dict:
    counts = _counts(comparisons, spec)
    return {"study": study, "what": WHAT[study], "chapter": STUDY_CHAPTERS[study], "declared": declared["family_size"],
            "recorded": len(declared["comparisons"]), "seeds": f"{seeds[0]}-{seeds[-1]}", **counts,
            "wins": sum(group[0] for group in counts.values()), "ties": sum(group[1] for group in counts.values()),
            "losses": sum(group[2] for group in counts.values())}


def part_iv_synthesis(folder=None) -> list[dict]:
    """One row per study with a saved table: ``{"study", "what", "chapter", "declared" (the family's size),
    "recorded" (its comparisons run), "seeds" (those the verdicts rest on, ``"0-4"``), "against_mixers" and
    "remedies" (each ``[ahead, not told apart, behind]`` from the GMA side: GMA against another mixer, a routing
    remedy against default GMA), "wins", "ties", "losses" (their sums)}``, in the chapters' order, each counted at
    its :func:`standing_family`."""
    folder = Path(folder) if folder is not None else results_folder()
    rows = []
    for name in sorted(STUDY_CHAPTERS, key=STUDY_CHAPTERS.get):
        if name == "recall":
            path = folder / f"{RECALL_STUDY['name']}_study_tables.json"
            if not path.exists():
                continue
            declared = json.loads(path.read_text())["declared"]
            rows.append(_row(name, declared["comparisons"], declared, RECALL_STUDY["seeds"], None))
            continue
        path = tables_path(STUDIES[name], folder)
        if not path.exists():
            continue
        declared = standing_family(json.loads(path.read_text()))
        rows.append(_row(name, declared["comparisons"], declared, declared["seeds"], STUDIES[name]))
    return rows


def format_synthesis(rows: list[dict]) -> str:
    """The rows as a Markdown table (one line a study). GMA against other mixers and routing remedies against default
    GMA are counted in separate columns, each as ahead / not told apart / behind from the GMA (or remedy) side."""
    lines = ["| study | chapter | declared comparisons run | seeds | GMA vs other mixers: ahead / not told apart / "
             "behind | a remedy vs default GMA: ahead / not told apart / behind |", "|---|---|---|---|---|---|"]
    for r in rows:
        mixers, remedies = ("-" if sum(r[key]) == 0 else " / ".join(map(str, r[key]))
                            for key in ("against_mixers", "remedies"))
        lines.append(f"| {r['what']} | {r['chapter']} | {r['recorded']} of {r['declared']} | {r['seeds']} | "
                     f"{mixers} | {remedies} |")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------- what GMA is for, and not for
CLAIM_COLUMNS = ("GMA is", "the claim", "the number", "interval or verdict", "record", "chapter")


def _read(folder: Path, name: str) -> dict:
    return json.loads((folder / name).read_text())


def _declared(saved: dict, arm: str, against: str, metric: str | None = None, width: int | None = None) -> dict:
    """The one declared comparison ``arm`` against ``against`` of a saved table's standing family."""
    family = saved["declared"] if "table" in saved else standing_family(saved)
    found = [c for c in family["comparisons"] if c["arm"] == arm and c["against"] == against
             and (metric is None or c.get("metric") == metric) and (width is None or c.get("width") == width)]
    if len(found) != 1:
        raise ValueError(f"{len(found)} declared comparisons {arm} - {against} ({metric}, width {width})")
    return found[0]


def _interval(c: dict, digits: int, scale: float = 1.0) -> str:
    low, high = (scale * x for x in c["ci95"])
    return f"{low:.{digits}f} to {high:.{digits}f}"


def _verdict(c: dict, digits: int, scale: float = 1.0) -> str:
    """A declared comparison's interval and verdict; not told apart comes with the largest difference the interval
    allows (never read as parity)."""
    told = "told apart" if c["told_apart"] else "not told apart"
    text = f"{_interval(c, digits, scale)}, Holm p {c['p_holm']:.2g}, {told}"
    if not c["told_apart"]:
        text += f"; the interval allows up to {scale * largest_difference_allowed(c['ci95']):.{digits}f}"
    return text


def _profiling_claims(folder: Path) -> list[dict]:
    record = _read(folder, "profiling_cpu_small.json")
    slopes = record["memory_slopes"]
    gma_label = next(label for label in slopes if label.startswith("gma"))
    longest = max(r["seq_len"] for r in record["results"])
    speed = {r["mixer"]: r["tokens_per_second"] for r in record["results"] if r["seq_len"] == longest}
    return [
        {"side": "for", "claim": "memory that grows linearly with the sequence",
         "number": f"memory-vs-N slope {slopes[gma_label]:.2f}, eager softmax {slopes['softmax']:.2f}",
         "evidence": "log-log fit, one block, one run", "record": "profiling_cpu_small.json", "chapter": 8},
        {"side": "for", "claim": f"training throughput at long context (N = {longest:,}, CPU)",
         "number": f"{speed['gma']:,.0f} tokens/s, SDPA {speed['sdpa']:,.0f} ({speed['gma'] / speed['sdpa']:.1f}x)",
         "evidence": "measured in one run", "record": "profiling_cpu_small.json", "chapter": 8},
    ]


def _state_claim() -> dict:
    """GMA's decoding state against the KV cache, at the LM study's model (one layer, batch 1, float32)."""
    from ..baselines import make_mixer, mixer_state_bytes  # the registry: builds the two mixers whose bytes count
    from ..designs import LM_SETTING

    d, h, k = LM_SETTING["d_model"], LM_SETTING["n_heads"], LM_SETTING["n_components"]
    gma = mixer_state_bytes(make_mixer("gma", d, h, causal=True, n_components=k), 0)
    sdpa = make_mixer("sdpa", d, h, causal=True)
    crossing = next(n for n in range(1, 10**6) if mixer_state_bytes(sdpa, n) > gma)
    return {"side": "for", "claim": "a decoding state that stops growing",
            "number": f"{gma:,} bytes a layer at any length (K = {k}, width {d}); SDPA's KV cache is larger from "
                      f"token {crossing}",
            "evidence": "exact: each state's nbytes, tested", "record": "designs.LM_SETTING", "chapter": 12}


def _text_claim(folder: Path) -> dict:
    saved = _read(folder, "text_standin_tables.json")
    softmax, linear = _declared(saved, "gma", "softmax"), _declared(saved, "gma", "linear")
    return {"side": "for", "claim": "short byte-level classification (the offline Text stand-in, not LRA Text)",
            "number": f"{100 * softmax['mean']:+.2f} points over softmax, {100 * linear['mean']:+.2f} over linear",
            "evidence": f"{_verdict(softmax, 2, 100)} (softmax)", "record": "text_standin_tables.json", "chapter": 9}


def _recall_claim(folder: Path) -> dict:
    saved = _read(folder, f"{RECALL_STUDY['name']}_study_tables.json")
    pairs = [(_declared(saved, f"gma_k{k}_remedy", "linear", width=w), k, w) for k, w in ((64, 64), (128, 128))]
    number = "; ".join(f"K={k} (width {w}) {c['difference']:+.3f}" for c, k, w in pairs)
    return {"side": "not for", "claim": "a better memory than linear attention at equal state (recall)",
            "number": f"GMA with the remedy minus linear attention: {number}",
            "evidence": "; ".join(_verdict(c, 3) for c, _, _ in pairs),
            "record": f"{RECALL_STUDY['name']}_study_tables.json", "chapter": 12}


def _lm_claims(folder: Path) -> list[dict]:
    saved = _read(folder, "lm_study_tables.json")
    family = standing_family(saved)["comparisons"]
    against_sdpa = [c for c in family if c["against"] == "sdpa"]
    against_linear = [c for c in family if c["against"] == "linear"]
    closest = min(against_sdpa, key=lambda c: c["p_holm"])
    widest = max(against_linear, key=lambda c: largest_difference_allowed(c["ci95"]))
    told = sum(c["told_apart"] for c in family)
    return [
        {"side": "not for", "claim": "language modelling on a par with SDPA (small LM, bits per byte)",
         "number": f"every GMA arm behind in the means, by {min(c['mean'] for c in against_sdpa):.4f} to "
                   f"{max(c['mean'] for c in against_sdpa):.4f}",
         "evidence": f"{told} of {len(family)} told apart; closest {closest['arm']}: {_verdict(closest, 4)}",
         "record": "lm_study_tables.json", "chapter": 10},
        {"side": "not for", "claim": "better language modelling than linear attention",
         "number": f"GMA minus linear attention {min(c['mean'] for c in against_linear):+.4f} to "
                   f"{max(c['mean'] for c in against_linear):+.4f} in the means",
         "evidence": f"none told apart; the widest interval ({widest['arm']}) allows up to "
                     f"{largest_difference_allowed(widest['ci95']):.4f}",
         "record": "lm_study_tables.json", "chapter": 10},
    ]


def _collapse_claim(folder: Path) -> dict:
    saved = _read(folder, "routing_collapse_tables.json")
    share = _declared(saved, "variance_and_balance", "default", metric="active_share")
    bits = _declared(saved, "variance_and_balance", "default", metric="val_bits_per_byte")
    default = saved["tables"]["active_share"]["arms"]["default"]["active_share"]["mean"]
    return {"side": "not for", "claim": "a causal LM with the default routing (it collapses)",
            "number": f"{default:.3f} of components win a token; the remedy raises it by {share['mean']:.3f}",
            "evidence": f"active share told apart (Holm p {share['p_holm']:.2g}); bits per byte: "
                        f"{_verdict(bits, 4)}",
            "record": "routing_collapse_tables.json", "chapter": 11}


def gma_claims(folder=None) -> list[dict]:
    """What GMA is for and what it is not for, one claim a row, each computed from its record: ``{"side" ("for" or
    "not for"), "claim", "number", "evidence" (interval and verdict, or how it was measured), "record",
    "chapter"}``. A comparison not told apart is given with the largest difference its interval allows."""
    folder = Path(folder) if folder is not None else results_folder()
    return [*_profiling_claims(folder), _state_claim(), _text_claim(folder), _recall_claim(folder),
            *_lm_claims(folder), _collapse_claim(folder)]


def format_claims(rows: list[dict]) -> str:
    """The claims as a Markdown table (README's results at a glance, Part IV's findings page)."""
    lines = ["| " + " | ".join(CLAIM_COLUMNS) + " |", "|" + "---|" * len(CLAIM_COLUMNS)]
    lines += [f"| {r['side']} | {r['claim']} | {r['number']} | {r['evidence']} | `{r['record']}` | {r['chapter']} |"
              for r in rows]
    return "\n".join(lines)
