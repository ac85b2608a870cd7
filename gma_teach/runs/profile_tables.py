"""Reading chapter 8's profiling sweep: the paper's Table 1 as typed in, labels, fitted slopes and text tables.

What the figures and chapters read from a sweep's rows or its record; running the sweep is
:mod:`gma_teach.profiling`.
"""
from __future__ import annotations

import json

from ..measure import loglog_slope

__all__ = ["PAPER_TABLE_1", "TARGETS", "block_ratios", "block_verdicts", "extra_time", "fit_slopes",
           "format_block_table", "format_breakdown", "format_table", "label_of", "load_recorded", "memory_crossing",
           "n_sweep", "paper_memory_crossing"]

#: Table 1 of the paper, typed in from its Section 5.1 -- one block, forward + backward, on the authors' unnamed
#: GPU -- as ``{label: {N: (memory_gb, tokens_per_second, params_millions)}}``. The paper's own numbers, not
#: measured here.
PAPER_TABLE_1 = {
    "softmax (eager)": {1000: (1.47, 1.02e6, 2.4), 2000: (5.81, 610e3, 2.4), 4000: (23.07, 186e3, 2.4)},
    "sdpa": {1000: (0.15, 3.33e6, 2.4), 2000: (0.25, 3.34e6, 2.4), 4000: (0.50, 2.38e6, 2.4)},
    "linear": {1000: (0.18, 2.88e6, 2.4), 2000: (0.36, 3.76e6, 2.4), 4000: (0.73, 3.96e6, 2.4)},
    "linformer (k=256)": {1000: (0.41, 2.17e6, 2.9), 2000: (0.82, 2.56e6, 3.4), 4000: (1.64, 2.68e6, 4.4)},
    "mamba": {1000: (0.27, 2.06e6, 3.8), 2000: (0.55, 1.99e6, 3.8), 4000: (1.11, 2.07e6, 3.8)},
    "performer (M=256)": {1000: (0.58, 1.30e6, 2.4), 2000: (1.15, 1.37e6, 2.4), 4000: (2.30, 1.39e6, 2.4)},
    "gma (K=64)": {1000: (0.35, 688e3, 2.5), 2000: (0.71, 722e3, 2.5), 4000: (1.37, 742e3, 2.5)},
    "gma (K=128)": {1000: (0.50, 566e3, 2.6), 2000: (1.04, 592e3, 2.6), 4000: (2.02, 607e3, 2.6)},
    "gma (K=256)": {1000: (0.85, 416e3, 2.8), 2000: (1.70, 430e3, 2.8), 4000: (3.39, 437e3, 2.8)},
    "gma (K=512)": {1000: (1.59, 270e3, 3.2), 2000: (3.17, 277e3, 3.2), 4000: (6.32, 280e3, 3.2)},
}

def memory_crossing(gma_memory: dict, softmax_memory: float, seq_len: int) -> dict | None:
    """The number of components ``K`` at which GMA's block uses as much memory as eager softmax's, at one ``N``.

    GMA's memory is taken as linear in ``K`` between neighbouring measured values (its ``(B, H, N, K)`` tensors
    grow linearly in ``K``): the crossing is interpolated on the segment whose ends bracket softmax's memory, or,
    if softmax's memory lies outside the measured range, extrapolated from the nearest segment.

    Args:
        gma_memory: ``{K: memory}`` of GMA at ``seq_len`` (at least two values of ``K``).
        softmax_memory: eager softmax's memory at ``seq_len``, in the same unit.
        seq_len: ``N``.

    Returns:
        ``{"k", "fraction": k / seq_len, "between": (K_low, K_high), "interpolated"}``, ``interpolated`` ``False``
        for an extrapolation; ``None`` if the segment used does not grow with ``K``.
    """
    points = sorted(gma_memory.items())
    if len(points) < 2:
        raise ValueError(f"need GMA's memory at two values of K at least, got {len(points)}")
    segments = list(zip(points, points[1:]))
    inside = [(a, b) for a, b in segments if a[1] <= softmax_memory <= b[1]]
    (k_low, low), (k_high, high) = (inside[0] if inside else
                                    segments[-1] if softmax_memory > points[-1][1] else segments[0])
    if high <= low:
        return None
    k = k_low + (softmax_memory - low) * (k_high - k_low) / (high - low)
    return {"k": k, "fraction": k / seq_len, "between": (k_low, k_high), "interpolated": bool(inside)}


def paper_memory_crossing(seq_len: int) -> dict | None:
    """:func:`memory_crossing` of the paper's Table 1 (``PAPER_TABLE_1``) at ``N = seq_len`` (1000, 2000 or
    4000): where the paper's GMA block, between its rows ``K = 64 ... 512``, uses as much memory as its eager
    softmax block."""
    gma = {int(label[len("gma (K="):-1]): points[seq_len][0] for label, points in PAPER_TABLE_1.items()
           if label.startswith("gma (K=")}
    return memory_crossing(gma, PAPER_TABLE_1["softmax (eager)"][seq_len][0], seq_len)


def label_of(name, n_components=None):
    """``"gma (K=64)"`` for GMA, the name otherwise."""
    return f"gma (K={n_components})" if name == "gma" else name


def fit_slopes(results, *, y="peak_memory_bytes", x="seq_len", by="label", min_x=None, where=None):
    """Least-squares slope of ``log(y)`` against ``log(x)`` for each group of rows.

    Args:
        results: result dicts (from :func:`gma_teach.profiling.sweep`).
        y, x: the keys to fit (default: memory against N).
        by: the key that groups rows (default ``"label"``, e.g. ``"gma (K=64)"``).
        min_x: ignore rows with ``x < min_x`` (fixed overheads dominate small sizes).
        where: optional ``{key: value}`` filter (e.g. ``{"n_components": 64}``).

    Returns:
        ``{group: slope}`` for every group with at least two distinct ``x`` values that ran (rows whose ``y`` is
        ``None``, the gaps of :func:`gma_teach.profiling.sweep`, are left out).
    """
    groups: dict = {}
    for row in results:
        if where and any(row.get(key) != value for key, value in where.items()):
            continue
        if row.get(y) is None or (min_x is not None and row[x] < min_x):
            continue
        groups.setdefault(row[by], {})[row[x]] = row[y]
    return {group: loglog_slope(list(points), list(points.values()))
            for group, points in groups.items() if len(points) >= 2}


def n_sweep(results, n_components=None):
    """The rows of the sweep over N: every non-GMA row, and GMA rows with K = ``n_components`` (default: the K
    that appears at the most sequence lengths)."""
    gma_rows = [r for r in results if r["mixer"] == "gma"]
    if n_components is None and gma_rows:
        counts: dict = {}
        for r in gma_rows:
            counts[r["n_components"]] = counts.get(r["n_components"], 0) + 1
        n_components = max(counts, key=counts.get)
    return [r for r in results if r["mixer"] != "gma" or r["n_components"] == n_components]


def format_table(results, *, columns=("label", "seq_len", "params", "peak_memory_bytes", "tokens_per_second")):
    """A plain-text table of result rows (memory in MiB, parameters in thousands, speed in tokens/s)."""
    def cell(key, value):
        if value is None:
            return "-"
        if key == "peak_memory_bytes":
            return f"{value / 2**20:.1f} MiB"
        if key == "params":
            return f"{value / 1e3:.1f}K"
        if key == "tokens_per_second":
            return f"{value:,.0f}"
        return str(value)

    header = {"label": "mixer", "seq_len": "N", "params": "params", "peak_memory_bytes": "memory",
              "tokens_per_second": "tokens/s", "n_components": "K"}
    table = [[header.get(c, c) for c in columns]] + [[cell(c, row.get(c)) for c in columns] for row in results]
    widths = [max(len(r[i]) for r in table) for i in range(len(columns))]
    return "\n".join("  ".join(v.rjust(w) if i else v.ljust(w) for i, (v, w) in enumerate(zip(r, widths)))
                     for r in table)


def load_recorded(path) -> dict:
    """Read a file written by the command line (:func:`gma_teach.profiling.run_recorded`, saved)."""
    with open(path) as handle:
        record = json.load(handle)
    missing = {"hardware", "date", "commit", "command", "results"} - set(record)
    if missing:
        raise ValueError(f"{path} is not a profiling record: missing {sorted(missing)}")
    return record


# ----------------------------------------------------------------------------------- the equal-state block run
TARGETS = {"memory": 1.1, "speed": 0.9}
"""Issue 39's targets for GMA's block against linear attention's at equal state: peak memory at most 1.1 times,
training tokens/s at least 0.9 times."""


def block_ratios(record) -> list[dict]:
    """Per form and ``N`` of a ``--block`` record (``gma_teach.profiling.run_block_record``): GMA's
    peak memory and tokens/s over linear attention's, the same for SDPA and for GMA's operator path, and whether
    GMA meets ``TARGETS`` -- ``{"form", "seq_len", "memory_ratio", "speed_ratio", "sdpa_memory_ratio",
    "sdpa_speed_ratio", "operators_memory_ratio", "operators_speed_ratio", "memory_ok", "speed_ok", "gma_mib",
    "linear_mib", "gma_tokens_per_second", "linear_tokens_per_second"}``, in the record's order."""
    rows = {(r["causal"], r["seq_len"], r["label"]): r for r in record["results"]}
    out = []
    for causal, n, label in rows:
        if label != "gma":
            continue
        gma, linear = rows[(causal, n, "gma")], rows[(causal, n, "linear")]

        def ratio(other_label, key, causal=causal, n=n, linear=linear):
            other = rows.get((causal, n, other_label))
            return None if other is None else other[key] / linear[key]

        memory, speed = ratio("gma", "peak_memory_bytes"), ratio("gma", "tokens_per_second")
        out.append({"form": "causal" if causal else "bidirectional", "seq_len": n, "memory_ratio": memory,
                    "speed_ratio": speed, "sdpa_memory_ratio": ratio("sdpa", "peak_memory_bytes"),
                    "sdpa_speed_ratio": ratio("sdpa", "tokens_per_second"),
                    "operators_memory_ratio": ratio("gma (operators)", "peak_memory_bytes"),
                    "operators_speed_ratio": ratio("gma (operators)", "tokens_per_second"),
                    "memory_ok": memory <= TARGETS["memory"], "speed_ok": speed >= TARGETS["speed"],
                    "gma_mib": gma["peak_memory_bytes"] / 2**20, "linear_mib": linear["peak_memory_bytes"] / 2**20,
                    "gma_tokens_per_second": gma["tokens_per_second"],
                    "linear_tokens_per_second": linear["tokens_per_second"]})
    return out


def format_block_table(ratios) -> str:
    """:func:`block_ratios` as a plain-text table, ratios to linear attention (<= 75 characters a line)."""
    def cell(value):
        return "   -" if value is None else f"{value:4.2f}"

    lines = ["form    N       memory / linear        tokens/s / linear",
             "                gma   ops  sdpa        gma   ops  sdpa"]
    for r in ratios:
        form = "bidir" if r["form"] == "bidirectional" else r["form"]
        lines.append(f"{form:6s} {r['seq_len']:6,d}  {cell(r['memory_ratio'])}  "
                     f"{cell(r['operators_memory_ratio'])}  {cell(r['sdpa_memory_ratio'])}      "
                     f"{cell(r['speed_ratio'])}  {cell(r['operators_speed_ratio'])}  {cell(r['sdpa_speed_ratio'])}")
    return "\n".join(lines)


def format_breakdown(rows, *, top=6, width=75) -> str:
    """The rows of ``gma_teach.profiling.saved_for_backward`` as text: MiB, tensors and the saving
    line (cut to ``width`` characters), the ``top`` largest, then the rest and the total."""
    lines = []
    for r in rows[:top]:
        lines.append(f"{r['bytes'] / 2**20:6.2f} MiB {r['tensors']:2d}  {r['where']}"[:width])
        lines.append(f"{'':14s}{r['code']}"[:width])
    rest = rows[top:]
    if rest:
        lines.append(f"{sum(r['bytes'] for r in rest) / 2**20:6.2f} MiB {sum(r['tensors'] for r in rest):2d}  "
                     f"{len(rest)} more lines (the mixture's coefficients)"[:width])
    lines.append(f"{sum(r['bytes'] for r in rows) / 2**20:6.2f} MiB in all")
    return "\n".join(lines)


def extra_time(record, form, *, top=3) -> list[tuple[str, float]]:
    """Where GMA's time goes beyond linear attention's in a ``--block`` record's breakdown (``form``:
    ``"bidirectional"`` or ``"causal"``): the ``top`` ATen operators (``"aten::"`` dropped) by GMA's seconds per call
    minus linear attention's, largest first, as ``(operator, extra seconds)``; operators in ``"other"`` are left
    out."""
    def seconds(label):
        return {r["op"].removeprefix("aten::"): r["seconds"] for r in record["breakdown"][f"{form}/{label}"]["time"]
                if r["op"] != "other"}

    gma, linear = seconds("gma"), seconds("linear")
    extra = [(op, gma[op] - linear.get(op, 0.0)) for op in gma]
    return sorted(extra, key=lambda item: -item[1])[:top]


def block_verdicts(record) -> list[str]:
    """One line per form and ``N`` of a ``--block`` record: GMA's memory and tokens/s against linear attention's,
    judged by ``TARGETS`` (met, or by how much it is missed); then, per form with a missed speed target, two
    lines naming the operators that cost GMA its extra time (:func:`extra_time`). Lines of at most 75 characters."""
    lines = []
    ratios = block_ratios(record)
    for r in ratios:
        memory = (f"memory {r['memory_ratio']:.2f}x " + ("(met)" if r["memory_ok"] else
                  f"({r['memory_ratio'] - TARGETS['memory']:.2f} over {TARGETS['memory']})"))
        speed = (f"speed {r['speed_ratio']:.2f}x " + ("(met)" if r["speed_ok"] else
                 f"({TARGETS['speed'] - r['speed_ratio']:.2f} short of {TARGETS['speed']})"))
        form = "bidir" if r["form"] == "bidirectional" else r["form"]
        lines.append(f"{form:6s} N = {r['seq_len']:6,d}: {memory}; {speed}")
    for form in dict.fromkeys(r["form"] for r in ratios):
        if all(r["speed_ok"] for r in ratios if r["form"] == form):
            continue
        n = record["config"]["breakdown_len"]
        lines.append(f"{form}, N = {n:,}: GMA's time per call beyond linear attention's")
        lines.append("  " + ", ".join(f"{op} +{1e3 * t:.0f} ms" for op, t in extra_time(record, form))[:73])
    return lines
