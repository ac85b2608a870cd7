"""The sentences the recall study's table gives: its findings, the forgetting and hybrid arms against the arms they
change, and the chapter's advice on when to choose GMA. A private module of :mod:`gma_teach.capacity`, which exports
its public names."""
from __future__ import annotations

from .. import _checks, mixers
from ._table import (
    bytes_text,
    check_recall_table,
    compared_arms,
    equal_state_points,
    exploratory_difference,
    find_comparison,
    gma_routing,
    gma_size,
    mean_guessing_floor,
    mean_of,
    table_entries,
    uses_default_routing,
    verdict_of,
    word_list,
)


def recall_findings(table, *, solved: float = 0.99, near: float = 0.05) -> list[str]:
    """What the recall study found, one sentence per finding, every number read from ``table``.

    Args:
        table: the recall study's table (:func:`check_recall_table`).
        solved: the accuracy that counts as solving a kv count (Zoology's 0.99).
        near: how close to SDPA's mean accuracy an arm must come to count as matching it.

    Returns:
        Sentences: SDPA's anchor at each width; linear attention from the fewest to the most kv pairs; the arms that
        recall no more than guessing one of the n values of the context (:func:`mean_guessing_floor`); each family
        of primary comparisons (GMA against linear attention and against SDPA, after Holm); the best GMA arm and the
        smallest state within ``near`` of SDPA at each width; and every forgetting or hybrid arm against the arm it
        changes (from the table's comparisons when there, else an exploratory paired interval).
    """
    check_recall_table(table)
    solved = _checks.fraction("solved", solved)
    near = _checks.fraction("near", near)
    entries = table_entries(table)
    widths = sorted({width for _, width in entries})
    counts = [int(n) for n in table["design"]["kv_pairs"]]
    found = []
    for width in widths:
        found.extend(_anchor_sentences(entries, width, counts, solved))
        found.extend(_floor_sentences(entries, width, counts))
        found.extend(_family_sentences(table, entries, width))
        found.extend(_best_and_smallest(entries, width, near))
        found.extend(_forgetting_sentences(table, entries, width))
    return found


def _anchor_sentences(entries, width, counts, solved) -> list[str]:
    found = []
    sdpa = entries.get(("sdpa", width))
    if sdpa is None:
        found.append(f"SDPA is not in the records at width {width}.")
    else:
        means = {n: mean_of(v) for n, v in sdpa["by_count"].items()}
        reached = [n for n in means if means[n] >= solved - 1e-9]  # a mean of 0.99s may round below 0.99
        short = [f"{n} ({means[n]:.3f})" for n in means if n not in reached]
        head = f"SDPA at width {width} ({len(sdpa['seeds'])} seeds) reaches {solved:g}"
        if not short:
            found.append(f"{head} at every kv count ({word_list(list(means))} pairs).")
        elif reached:
            found.append(f"{head} at {word_list(reached)} kv pairs and falls short at {word_list(short)}.")
        else:
            found.append(f"{head} at no kv count: {word_list(short)}.")
    linear = entries.get(("linear", width))
    if linear is not None and len(linear["by_count"]) >= 2:
        first, last = min(linear["by_count"]), max(linear["by_count"])
        low, high = mean_of(linear["by_count"][first]), mean_of(linear["by_count"][last])
        trend = "falls" if high < low else "does not fall"
        found.append(f"Linear attention at width {width} {trend} from {low:.3f} at {first} kv pairs to "
                     f"{high:.3f} at {last}.")
    return found


def _floor_sentences(entries, width, counts) -> list[str]:
    floor = mean_guessing_floor(counts)
    at_floor = sorted(((mean_of(entry["test_mean"]), arm) for (arm, w), entry in entries.items()
                       if w == width and mean_of(entry["test_mean"]) <= floor), reverse=True)
    head = (f"Guessing one of the n values in the context scores 1/n, {floor:.3f} in the mean over "
            f"{word_list(counts)} pairs; at width {width}")
    if not at_floor:
        return [f"{head} every arm recalls more."]
    arms = word_list([f"{arm} ({mean:.3f})" for mean, arm in at_floor])
    verb = "recalls" if len(at_floor) == 1 else "recall"
    return [f"{head} {arms} {verb} no more than that."]


def _size(entries, arm, width) -> tuple[int, bool] | None:
    """:func:`gma_size` of ``arm`` read from its run at ``width`` (``None`` when the table holds no such run)."""
    entry = entries.get((arm, width))
    return None if entry is None else gma_size(arm, entry)


def _routing_words(entries, arms, width, changed: bool) -> str:
    """``"with the default routing"``, or ``"with"`` the changed routing of the first such arm of ``arms`` at
    ``width`` (:func:`gma_routing` of its run)."""
    if not changed:
        return "with the default routing"
    return "with " + next(gma_routing(arm, entries[arm, width]) for arm in arms
                          if (_size(entries, arm, width) or (0, False))[1])


def _family_sentences(table, entries, width) -> list[str]:
    found = []
    for against, name in (("linear", "linear attention"), ("sdpa", "SDPA")):
        for remedy in (False, True):
            groups = {"higher": [], "lower": [], "not told apart": []}
            seeds = set()
            for comparison in table["comparisons"]:
                if comparison["against"] != against or int(comparison["width"]) != width:
                    continue
                size = _size(entries, comparison["arm"], width)
                if size is None or size[1] != remedy:
                    continue
                verdict = verdict_of(comparison["difference"], comparison["told_apart"])
                groups[verdict].append(size[0])
                seeds.add(len(comparison["seeds"]))
            if not any(groups.values()):
                continue
            routing = _routing_words(entries, [c["arm"] for c in table["comparisons"]], width, remedy)
            parts = [f"{verdict} at K = {word_list(sorted(ks))}" for verdict, ks in groups.items() if ks]
            n_seeds = word_list(sorted(seeds))
            found.append(f"Against {name} at width {width}, GMA {routing} is " + "; ".join(parts)
                         + f" (paired over {n_seeds} seeds, Holm-corrected).")
    return found


def _best_and_smallest(entries, width, near) -> list[str]:
    found = []
    gma = {arm: entry for (arm, w), entry in entries.items() if w == width and gma_size(arm, entry) is not None}
    sdpa = entries.get(("sdpa", width))
    if gma:
        best = max(gma, key=lambda arm: mean_of(gma[arm]["test_mean"]))
        line = (f"The best GMA arm at width {width} is {best}: mean accuracy "
                f"{mean_of(gma[best]['test_mean']):.3f} with a state of {bytes_text(gma[best]['state_bytes'])}")
        if sdpa is not None:
            line += (f", against SDPA's {mean_of(sdpa['test_mean']):.3f} with "
                     f"{bytes_text(sdpa['state_bytes'])} of decoding state (its KV cache and its convolution's)")
        found.append(line + ".")
    if sdpa is not None:
        target = mean_of(sdpa["test_mean"]) - near
        close = [(entry["state_bytes"], arm) for (arm, w), entry in entries.items()
                 if w == width and arm != "sdpa" and mean_of(entry["test_mean"]) >= target]
        if close:
            size, arm = min(close)
            ratio = size / sdpa["state_bytes"]
            found.append(f"The smallest state within {near:g} of SDPA at width {width} is {arm}'s: "
                         f"{bytes_text(size)} ({ratio:.2f} of SDPA's), mean accuracy "
                         f"{mean_of(entries[arm, width]['test_mean']):.3f}.")
        else:
            found.append(f"No arm but SDPA comes within {near:g} of SDPA's mean accuracy at width {width}.")
    return found


def forgetting_findings(table) -> list[str]:
    """The part of :func:`recall_findings` about forgetting and the hybrid: each of ``window``, ``local_gma``,
    ``decay_linear`` and ``decay_gma`` against the arm it changes (``sdpa``; ``window`` and the GMA arm of the same
    K; ``linear``; the GMA arm of the same K), at every width where both are recorded."""
    check_recall_table(table)
    entries = table_entries(table)
    found = []
    for width in sorted({width for _, width in entries}):
        found.extend(_forgetting_sentences(table, entries, width))
    return found


def _forgetting_sentences(table, entries, width) -> list[str]:
    found = []
    for arm in mixers.forgetting_and_hybrid_names():
        if (arm, width) not in entries:
            continue
        for against in compared_arms(entries, arm, width):
            recorded = find_comparison(table, arm, against, width)
            if recorded is not None:
                low, high = recorded["ci95"]
                how = f"paired over {len(recorded['seeds'])} seeds, Holm-corrected"
                difference, told_apart = recorded["difference"], recorded["told_apart"]
            else:
                exploratory = exploratory_difference(entries, arm, against, width)
                if exploratory is None:
                    continue
                low, high = exploratory["ci95"]
                how = f"paired over {len(exploratory['seeds'])} seeds, exploratory"
                difference, told_apart = exploratory["difference"], exploratory["told_apart"]
            found.append(f"{arm} against {against} at width {width}: {difference:+.3f} "
                         f"[{low:+.3f}, {high:+.3f}] ({how}): {verdict_of(difference, told_apart)}.")
    return found

_COLLAPSE = "the default routing, which collapses onto one component in causal models (chapter 11)"


def _against_floor(low: float, high: float, floor: float) -> str:
    """Recall from ``low`` to ``high`` against the guessing floor; at or under it, a one-slot memory's signature."""
    span = f"{low:.3f}" if abs(high - low) < 5e-4 else f"{low:.3f} to {high:.3f}"
    guess = f"the {floor:.3f} of guessing one of the n values in the context"
    if high <= floor:
        return f"{span}, no more than {guess}: the signature of one slot"
    return f"{span}, {'above' if low > floor else 'against'} {guess}"


def _broken_note(arm, entry, floor) -> str:
    """Why a default-routing arm measures a broken memory, with its mean against the guessing floor."""
    who = "its GMA heads use" if entry["mixer"] == "local_gma" else "it uses"
    mean = mean_of(entry["test_mean"])
    return f"{who} {_COLLAPSE}, and it recalls {_against_floor(mean, mean, floor)}"


def when_to_choose_gma(table, *, near: float = 0.05) -> list[str]:
    """The chapter's advice, one sentence per rule, every one computed from ``table``; it recommends an arm only
    where the table tells it apart, and names a broken configuration in the sentence about its arm.

    * **Equal state.** Where GMA with a changed routing keeps exactly linear attention's state
      (:func:`equal_state_points`): which recalls more in the means, the saved comparison's verdict (Holm) and the
      largest difference the comparison's 95% interval allows.
    * **Against linear attention**, for each width and routing: the GMA arms told apart above it (with no larger a
      state, or a larger one), those told apart below it, and those not told apart (with the direction of their
      means). Sentences about arms with the default routing say that it collapses and how their mean compares
      with the guessing floor (:func:`mean_guessing_floor`).
    * **Against SDPA**: whether any GMA arm comes within ``near`` of it, and with what share of its KV cache.
    * **Forgetting and the hybrid**: each of ``window``, ``local_gma``, ``decay_linear`` and ``decay_gma`` is
      recommended only when it recalls more than every arm it changes (Holm-corrected when the table lists the
      comparison, else an exploratory paired interval) and does not use the default routing; otherwise the
      sentence says what the comparisons found and, for a default-routing arm, that its routing collapses.
    """
    check_recall_table(table)
    near = _checks.fraction("near", near)
    entries = table_entries(table)
    floor = mean_guessing_floor(table["design"]["kv_pairs"])
    advice = _equal_state_lead(table, entries)
    for width in sorted({width for _, width in entries}):
        linear, sdpa = entries.get(("linear", width)), entries.get(("sdpa", width))
        if linear is not None:
            advice.extend(_equal_state_sentences(table, width))
            for remedy in (True, False):
                advice.extend(_against_linear(table, entries, width, remedy, floor))
        if sdpa is not None:
            target = mean_of(sdpa["test_mean"]) - near
            matching = sorted(((entry["state_bytes"], arm) for (arm, w), entry in entries.items()
                               if w == width and gma_size(arm, entry) is not None
                               and mean_of(entry["test_mean"]) >= target))
            if matching:
                size, arm = matching[0]
                advice.append(f"At width {width}, {arm} comes within {near:g} of SDPA with "
                              f"{size / sdpa['state_bytes']:.2f} of its KV cache at {table['design']['seq_len']} "
                              f"tokens: choose it when that cache is too large.")
            else:
                advice.append(f"At width {width}, choose SDPA when recall must be near perfect: no GMA arm comes "
                              f"within {near:g} of it.")
        advice.extend(_forgetting_advice(table, entries, width, floor))
    return advice


def _equal_state_lead(table, entries) -> list[str]:
    points = equal_state_points(table)
    if len(points) < 2 or any(point["comparison"] is None for point in points):
        return []
    less = [point["mean"] < point["linear_mean"] for point in points]
    if all(less) or not any(less):
        how = "less" if all(less) else "more"
        told = sum(bool(point["comparison"]["told_apart"]) for point in points)
        verdict = ("no difference is told apart" if told == 0 else
                   f"{told} of the {len(points)} differences are told apart")
        where = word_list([f"K={_size(entries, point['arm'], point['width'])[0]} at width {point['width']}"
                           for point in points])
        first = points[0]
        routing = _routing_words(entries, [first["arm"]], first["width"], True)
        return [f"At equal state, GMA {routing} recalls {how} than linear attention in the means at "
                f"all {len(points)} points where their states match ({where}); after Holm {verdict}."]
    return []


def _equal_state_sentences(table, width) -> list[str]:
    found = []
    for point in equal_state_points(table):
        if point["width"] != width:
            continue
        how = "less" if point["mean"] < point["linear_mean"] else "more"
        line = (f"At width {width} and equal state ({bytes_text(point['state_bytes'])} each), {point['arm']} recalls "
                f"{how} than linear attention in the means, {point['mean']:.3f} against {point['linear_mean']:.3f}")
        comparison = point["comparison"]
        if comparison is None:
            found.append(line + " (the table lists no comparison of the two).")
            continue
        low, high = comparison["ci95"]
        verdict = "told apart" if comparison["told_apart"] else "not told apart"
        line += (f" ({comparison['difference']:+.3f}, {verdict} after Holm, p {comparison['p_holm']:.2f}); its 95% "
                 f"interval, {low:+.3f} to {high:+.3f}, allows ")
        if comparison["difference"] < 0:
            line += f"linear attention ahead by up to {-low:.3f}."
        else:
            line += f"GMA ahead by up to {high:.3f}."
        found.append(line)
    return found


def _against_linear(table, entries, width, remedy, floor) -> list[str]:
    """Sentences about GMA arms of one routing against linear attention at one width (Holm-corrected)."""
    linear = entries["linear", width]
    rows = []
    for comparison in table["comparisons"]:
        if comparison["against"] != "linear" or int(comparison["width"]) != width:
            continue
        size = _size(entries, comparison["arm"], width)
        if size is None or size[1] != remedy:
            continue
        rows.append((size[0], comparison["arm"], comparison))
    if not rows:
        return []
    rows.sort()
    routing = _routing_words(entries, [arm for _, arm, _ in rows], width, remedy)
    higher = [(k, arm) for k, arm, c in rows if c["told_apart"] and c["difference"] > 0]
    lower = [(k, arm) for k, arm, c in rows if c["told_apart"] and c["difference"] <= 0]
    unsure = [(k, arm, c) for k, arm, c in rows if not c["told_apart"]]
    linear_bytes = linear["state_bytes"]
    found = []
    if not remedy:
        means = [mean_of(entries[arm, width]["test_mean"]) for _, arm, _ in rows]
        note = f"{_COLLAPSE}, and they recall {_against_floor(min(means), max(means), floor)}"
    cheaper = [arm for k, arm in higher if entries[arm, width]["state_bytes"] <= linear_bytes]
    dearer = [arm for k, arm in higher if arm not in cheaper]
    if cheaper:
        head = ("choose GMA over linear attention" if remedy else "GMA with the default routing recalls more than "
                "linear attention")
        line = (f"At width {width}, {head}: {word_list(cheaper)} recall more (Holm) with no more state than linear "
                f"attention's {bytes_text(linear_bytes)}")
        found.append(line + ("." if remedy else f", though they use {note}."))
    if dearer:
        line = (f"At width {width}, {word_list(dearer)} recall more than linear attention (Holm) but keep a larger "
                f"state than its {bytes_text(linear_bytes)}")
        found.append(line + (": choose them when recall matters more than memory." if remedy
                             else f", though they use {note}."))
    if lower:
        arms = word_list([arm for _, arm in lower])
        verb = "recalls" if len(lower) == 1 else "recall"
        if remedy:
            found.append(f"At width {width}, prefer linear attention to {arms}, which {verb} less (Holm).")
        else:
            found.append(f"At width {width}, do not choose GMA with the default routing: {arms} {verb} less than "
                         f"linear attention's {mean_of(linear['test_mean']):.3f} (Holm); they use {note}.")
    if unsure:
        each = []
        for k, arm, c in unsure:
            low, high = c["ci95"]
            larger = entries[arm, width]["state_bytes"] > linear_bytes
            each.append(f"K={k} {c['difference']:+.3f} (unadjusted 95% interval {low:+.3f} to {high:+.3f}, Holm p "
                        f"{c['p_holm']:.2f}{', a larger state' if larger else ''})")
        line = (f"At width {width}, GMA {routing} is not told apart from linear attention after Holm, each arm "
                f"minus linear attention: " + "; ".join(each))
        line += ("; recall alone does not choose between them" if remedy else f"; these arms use {note}")
        found.append(line + ".")
    return found


def _forgetting_advice(table, entries, width, floor) -> list[str]:
    found = []
    for arm in mixers.forgetting_and_hybrid_names():
        if (arm, width) not in entries:
            continue
        results = []
        for against in compared_arms(entries, arm, width):
            recorded, how = find_comparison(table, arm, against, width), "Holm-corrected"
            if recorded is None:
                recorded, how = exploratory_difference(entries, arm, against, width), "exploratory"
            if recorded is not None:
                results.append((against, recorded["difference"], recorded["told_apart"], how))
        if not results:
            continue
        entry = entries[arm, width]
        broken = uses_default_routing(entry)
        parts = []
        for against, difference, told_apart, how in results:
            name = "SDPA" if against == "sdpa" else "linear attention" if against == "linear" else against
            verdict = verdict_of(difference, told_apart)
            phrase = {"higher": "recalls more than", "lower": "recalls less than",
                      "not told apart": "is not told apart from"}[verdict]
            parts.append(f"{phrase} {name} ({difference:+.3f}, {how})")
        better = all(told_apart and difference > 0 for _, difference, told_apart, _ in results)
        if better and not broken:
            found.append(f"At width {width}, {arm} {word_list(parts)}: prefer it when its state of "
                         f"{bytes_text(entry['state_bytes'])} fits.")
            continue
        line = f"At width {width}, the records do not recommend {arm}: it {word_list(parts)}"
        if broken:
            line += f"; {_broken_note(arm, entry, floor)}"
        found.append(line + ".")
    return found
