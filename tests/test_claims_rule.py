"""The claims table's one rule (for, not for, not shown): the rule on hand-made comparisons, every row of the book's
claims agreeing with its record under it, synthetic records that give each of the three values, no verdict word
typed in the code, and the two-look accounting on one scale."""
import ast
import inspect
import json
import shutil

import pytest

from gma_teach import designs, measure, study
from gma_teach.runs import synthesis, verdicts


def _spec_verdict(comparisons):
    """The rule written out on its own: each rival ahead, behind or open; all ahead is *for*, all behind *not for*."""
    standings = []
    for c in comparisons:
        if "exact" in c:
            standings.append(c["exact"])
        elif c.get("measured_once") or not c["told_apart"]:
            standings.append("open")
        else:
            gma_better = (c["difference"] < 0) == c["lower_is_better"] and c["difference"] != 0
            standings.append("ahead" if gma_better else "behind")
    return "for" if set(standings) == {"ahead"} else "not for" if set(standings) == {"behind"} else "not shown"


def _told(difference, told_apart=True, lower_is_better=True, rival="r"):
    return {"rival": rival, "difference": difference, "ci95": [difference - 0.1, difference + 0.1],
            "told_apart": told_apart, "lower_is_better": lower_is_better, "p_holm": 0.01 if told_apart else 0.5}


@pytest.mark.parametrize("comparisons, expected", [
    ([_told(-0.1), _told(-0.2, rival="s")], "for"),  # lower is better, GMA lower and told apart
    ([_told(0.1, lower_is_better=False)], "for"),  # higher is better
    ([{"rival": "sdpa", "exact": "ahead"}], "for"),
    ([_told(0.1), _told(0.3, rival="s")], "not for"),
    ([{"rival": "sdpa", "exact": "behind"}, _told(0.1)], "not for"),
    ([_told(-0.1), _told(0.1, rival="s")], "not shown"),  # rivals on both sides
    ([_told(-0.1), _told(-0.1, told_apart=False, rival="s")], "not shown"),
    ([{"rival": "r", "difference": 5.0, "measured_once": True, "lower_is_better": False}], "not shown"),
])
def test_the_rule_on_hand_made_comparisons(comparisons, expected):
    assert study.verdict_of(comparisons) == expected == _spec_verdict(comparisons)


@pytest.mark.parametrize("bad", [[], None, [{"difference": 1.0}], [{"rival": "r", "exact": "level"}],
                                 [{"rival": "r", "difference": 1.0, "lower_is_better": True}]])
def test_the_rule_refuses_what_it_cannot_judge(bad):
    with pytest.raises(ValueError, match="comparison|exact|told_apart"):
        study.verdict_of(bad)


def _record_comparison(folder, row, entry):
    """The comparison of ``row``'s record that ``entry`` (a row's basis) was read from, GMA's side first."""
    saved = json.loads((folder / row["record"]).read_text())
    family = synthesis.standing_family(saved)["comparisons"]
    if row["record"] == synthesis.REMEDY_TABLES and entry["arm"] == "default":  # default minus each change
        found = [c for c in family if c["arm"] == entry["rival"] and c["against"] == "default"
                 and c["metric"] == "val_bits_per_byte"]
        return found, -1
    if row["claim"].startswith("a routing that carries information"):  # the remedy minus the default, in bits
        found = [c for c in family if c["arm"] == entry["arm"] and c["against"] == "default"
                 and c["metric"] == "routing_information"]
        return found, 1
    if row["record"] == synthesis.LISTOPS_LRA_TABLES:  # declared as the rival minus GMA
        return [c for c in family if c["arm"] == entry["rival"] and c["against"] == entry["arm"]], -1
    arm = entry.get("arm")
    found = [c for c in family if c["against"] == entry["rival"] and (arm is None or c["arm"] == arm)
             and c.get("width") == entry.get("width")
             and (row["record"] != "text_standin_tables.json" or c["arm"] == "gma")]
    return found, 1


def _check_rows_against_records(folder, rows):
    for row in rows:
        assert row["side"] == study.verdict_of(row["basis"]) == _spec_verdict(row["basis"]), row["claim"]
        if row["record"].endswith("_tables.json"):
            for entry in row["basis"]:
                found, sign = _record_comparison(folder, row, entry)
                assert found, (row["claim"], entry)
                told = {c["told_apart"] for c in found}
                means = {sign * c.get("mean", c.get("difference")) for c in found}
                assert entry["told_apart"] in told and entry["difference"] in means, (row["claim"], entry)
        if row["record"].startswith("profiling") and row["claim"].startswith("less training memory"):
            results = [r for r in json.loads((folder / row["record"]).read_text())["results"]
                       if not r.get("causal", False)]
            peak = {}
            for r in results:
                peak.setdefault(r.get("mixer", r.get("label")), {})[r["seq_len"]] = r["peak_memory_bytes"]
            n = max(set(peak["gma"]) & set(peak["linear"]) & set(peak["sdpa"]))
            for entry in row["basis"]:
                assert entry["exact"] == ("ahead" if peak["gma"][n] < peak[entry["rival"]][n] else "behind")
        if row["side"] == "not shown":
            assert "not known here" in row["evidence"] + row["scope"] or "told apart" in row["evidence"], row


def test_every_row_of_the_book_follows_the_rule_from_its_record():
    rows = [*study.gma_claims(), *study.tuning_claims()]
    _check_rows_against_records(measure.results_folder(), rows)
    by_claim = {row["claim"]: row for row in rows}
    # what the records say today (a changed record changes these through the rule, checked above)
    assert by_claim["a decoding state that stops growing"]["side"] == "for"
    assert "linear" in by_claim["a decoding state that stops growing"]["evidence"]
    assert by_claim["language modelling against linear attention (small LM, bits per byte)"]["side"] == "not shown"
    assert "active share" not in by_claim["a causal LM with the default routing (bits per byte)"]["evidence"]
    remedy = next(claim for claim in by_claim if claim.startswith("a routing that carries information"))
    assert remedy.endswith(f"({designs.SLOT_MEMORY_ARM})") and by_claim[remedy]["side"] == "for"
    for row in rows:
        assert row["against"] and row["scope"], row


@pytest.fixture
def records(tmp_path):
    shutil.copytree(measure.results_folder(), tmp_path, dirs_exist_ok=True)  # the records and their run folders
    return tmp_path


def _edit(folder, name, change):
    saved = json.loads((folder / name).read_text())
    change(saved)
    (folder / name).write_text(json.dumps(saved))


def _text_row(folder):
    return next(r for r in study.gma_claims(folder) if r["record"] == "text_standin_tables.json")


def _set(c, mean, told):
    key = "mean" if "mean" in c else "difference"
    c.update({key: mean, "ci95": [mean - abs(mean) / 2, mean + abs(mean) / 2] if told else [mean - 1, mean + 1],
              "told_apart": told, "p_holm": 0.001 if told else 0.6, "p": 0.0002 if told else 0.3})


@pytest.mark.parametrize("means, told, expected", [
    ((0.03, 0.04), (True, True), "for"),
    ((-0.03, -0.04), (True, True), "not for"),
    ((0.03, 0.04), (False, True), "not shown"),
    ((0.03, -0.04), (True, True), "not shown"),
])
def test_a_synthetic_record_gives_each_value(records, means, told, expected):
    def change(saved):
        for c in saved["declared"]["comparisons"]:
            if c["arm"] == "gma":
                index = ("softmax", "linear").index(c["against"])
                _set(c, means[index], told[index])
    _edit(records, "text_standin_tables.json", change)
    row = _text_row(records)
    assert row["side"] == expected
    _check_rows_against_records(records, [row])


def test_synthetic_lm_recall_and_profiling_records_move_their_rows(records):
    def lm_behind(saved):
        for c in saved["second_look"]["comparisons"]:
            if c["against"] == "sdpa":
                _set(c, 0.05, True)

    def recall_ahead(saved):
        for c in saved["declared"]["comparisons"]:
            if c["arm"] in ("gma_k64_var_bal", "gma_k128_var_bal") and c["against"] == "linear":
                _set(c, 0.2, True)

    def gma_smallest(saved):
        for r in saved["results"]:
            if r.get("mixer", r.get("label")) == "gma":
                r["peak_memory_bytes"] = 1
    def remedy_open(saved):
        for c in saved["declared"]["comparisons"]:
            if c["metric"] == "routing_information":
                _set(c, 0.5, False)

    _edit(records, "lm_study_tables.json", lm_behind)
    _edit(records, "recall_study_tables.json", recall_ahead)
    remedy_record = next(r["record"] for r in study.tuning_claims(records)
                         if r["claim"].startswith("a routing that carries information"))
    _edit(records, remedy_record, remedy_open)
    _edit(records, synthesis.PROFILING_RECORD, gma_smallest)
    rows = {r["claim"]: r for r in [*study.gma_claims(records), *study.tuning_claims(records)]}
    assert rows["language modelling against SDPA (small LM, bits per byte)"]["side"] == "not for"
    assert rows["a better memory than linear attention at equal state (recall)"]["side"] == "for"
    assert rows["less training memory than the linear-time rivals and SDPA"]["side"] == "for"
    remedy = next(claim for claim in rows if claim.startswith("a routing that carries information"))
    assert rows[remedy]["side"] == "not shown"
    _check_rows_against_records(records, list(rows.values()))


def test_the_profiling_record_is_one_argument(records):
    """The memory and throughput rows read any record of the profiler's kind, named by one argument."""
    saved = json.loads((records / "profiling_cpu_small.json").read_text())
    block = {"threads": 1, "results": [{"label": r["mixer"], "causal": False, "seq_len": r["seq_len"],
                                        "peak_memory_bytes": r["peak_memory_bytes"] // 2,
                                        "tokens_per_second": r["tokens_per_second"]}
                                       for r in saved["results"] if r["mixer"] in ("gma", "linear", "sdpa")]}
    (records / "profiling_other.json").write_text(json.dumps(block))
    rows = study.gma_claims(records, profiling_record="profiling_other.json")
    assert [r["record"] for r in rows[:2]] == ["profiling_other.json"] * 2
    # at N = 8,192 GMA is ahead of linear attention and behind SDPA in that record: not shown
    assert rows[0]["side"] == "not shown" and "eager softmax" not in rows[0]["evidence"]


def test_no_verdict_word_is_typed_outside_the_rule():
    """Every verdict of the claims table comes from :func:`synthesis.verdict_of`: no other code of the module
    holds a verdict word as a string of its own."""
    tree = ast.parse(inspect.getsource(synthesis))
    allowed = {"verdict_of", "VERDICTS"}
    for node in ast.walk(tree):
        name = getattr(node, "name", None) or (node.targets[0].id if isinstance(node, ast.Assign)
                                               and isinstance(node.targets[0], ast.Name) else None)
        if name in allowed:
            continue
        if isinstance(node, (ast.FunctionDef, ast.Assign)):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Constant) and isinstance(inner.value, str):
                    assert inner.value.strip() not in synthesis.VERDICTS, (name, inner.value)


def test_the_second_look_is_charged_once():
    """One scale: the Holm p already multiplied by the looks against 0.05. A verdict rests on the looks when the
    multiplied p is at least 0.05 and the p before it below; a pair told apart never does."""
    assert verdicts.rests_on_looks({"p_holm": 0.0915}, 2)
    assert not verdicts.rests_on_looks({"p_holm": 0.036}, 2)  # told apart at either scale
    assert not verdicts.rests_on_looks({"p_holm": 0.12}, 2) and not verdicts.rests_on_looks({"p_holm": 0.07}, 1)
    with pytest.raises(ValueError, match="looks"):
        verdicts.rests_on_looks({"p_holm": 0.07}, 0)
    folder = measure.results_folder()
    lm = synthesis.standing_family(json.loads((folder / "lm_study_tables.json").read_text()))
    resting = [(c["arm"], c["against"]) for c in lm["comparisons"] if verdicts.rests_on_looks(c, lm["looks"])]
    assert resting == [(c["arm"], c["against"]) for c in lm["comparisons"]
                       if c["p_holm"] >= 0.05 and c["p_holm"] / 2 < 0.05]
    collapse = synthesis.standing_family(json.loads((folder / "routing_collapse_tables.json").read_text()))
    for c in collapse["comparisons"]:
        if c["told_apart"]:
            assert not verdicts.rests_on_looks(c, collapse["looks"])


def test_the_findings_name_the_smallest_adjusted_p_and_the_looks_a_verdict_rests_on():
    settings = {"arms": {"gma": {"mixer": "gma"}, "sdpa": {"mixer": "sdpa"}, "linear": {"mixer": "linear"}}}
    declared = {"seeds": [0, 1, 2, 3, 4], "family_size": 2, "looks": 2, "comparisons": [
        {"arm": "gma", "against": "sdpa", "metric": "val_bits_per_byte", "mean": 0.06, "ci95": [0.03, 0.09],
         "p_holm": 0.0915, "told_apart": False},
        {"arm": "gma", "against": "linear", "metric": "val_bits_per_byte", "mean": 0.01, "ci95": [-0.03, 0.05],
         "p_holm": 0.9, "told_apart": False}]}
    lines = study.findings_summary(study.study_findings(settings, declared), declared)
    assert "the smallest adjusted p, gma vs sdpa" in lines[-1] and "closest" not in " ".join(lines)
    assert "unadjusted 95% interval" in lines[-1]
    assert any("rests on paying for the 2 looks" in line and "0.046 without" in line for line in lines)
    told = {**declared, "comparisons": [{**declared["comparisons"][0], "p_holm": 0.036, "told_apart": True}]}
    assert not any("rests on" in line for line in study.findings_summary(study.study_findings(settings, told), told))


def test_the_claims_forest_plot_draws_each_row_turned_to_gma_and_coloured_by_verdict():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from gma_teach.plots import study_figures

    claims = study.gma_claims()
    fig = study_figures.plot_claims(claims)
    assert len(fig.axes) == len(claims)
    for ax, claim in zip(fig.axes, claims):
        assert ax.get_title(loc="left").startswith(f"{claim['side']}: {claim['claim'].split()[0]}")
        labels = [t.get_text() for t in ax.get_yticklabels()]
        assert all(b["rival"] in label for b, label in zip(claim["basis"], labels))
        means = [line for line in ax.lines if line.get_marker() in ("o", "D")]
        expected = [(-1 if b["lower_is_better"] else 1) * claim["scale"] * b["difference"]
                    for b in claim["basis"] if "difference" in b]
        drawn = sorted(round(float(line.get_xdata()[0]), 6) for line in means)
        assert drawn == sorted(round(e, 6) for e in expected), claim["claim"]
        verdict = matplotlib.colors.to_hex(study_figures.VERDICT_COLORS[claim["side"]])
        assert all(matplotlib.colors.to_hex(line.get_color()) == verdict for line in means)
    fig.canvas.draw()
    legend = fig.legends[0].get_window_extent()
    assert all(legend.y0 >= ax.get_tightbbox().y1 - 1 for ax in fig.axes)  # the legend sits above every panel
    plt.close(fig)
    with pytest.raises(ValueError, match="non-empty"):
        study_figures.plot_claims([])
    with pytest.raises(ValueError, match="side must be"):
        study_figures.plot_claims([{**claims[0], "side": "maybe"}])


def _capacity_tables(means, told):
    """A synthetic capacity_tables.json: the declared family, GMA K = 64 (remedy) minus linear attention at each
    declared S, with the given means (accuracy, 0-1) and told-apart flags."""
    ((arm, rival),) = designs.CAPACITY_STUDY.primary
    comparisons = []
    for metric, mean, apart in zip(designs.CAPACITY_STUDY.metrics, means, told):
        c = {"arm": arm, "against": rival, "metric": metric, "seeds": list(designs.CAPACITY_STUDY.seeds), "n": 6}
        _set(c, mean, apart)
        comparisons.append(c)
    return {"study": "capacity", "declared": {"test": designs.CAPACITY_STUDY.test,
                                              "seeds": list(designs.CAPACITY_STUDY.seeds), "family_size": 4,
                                              "alpha": 0.05, "comparisons": comparisons}}


@pytest.mark.parametrize("means, told, expected", [
    ((0.2, 0.1, 0.1, 0.05), (True,) * 4, "for"),
    ((-0.3, -0.3, -0.2, -0.1), (True,) * 4, "not for"),
    ((-0.3, -0.3, -0.2, -0.1), (True, True, True, False), "not shown"),
    ((0.1, -0.3, -0.2, -0.1), (True,) * 4, "not shown"),
])
def test_the_capacity_row_appears_with_its_tables_and_follows_the_rule(records, means, told, expected):
    claim = "a better memory than linear attention at equal state (fast-weight capacity)"
    (records / synthesis.CAPACITY_TABLES).unlink(missing_ok=True)
    rows = {r["claim"]: r for r in study.gma_claims(records)}
    assert claim not in rows and "tested once its primary pair" in rows[
        "a better memory than linear attention at equal state (recall)"]["scope"]
    (records / synthesis.CAPACITY_TABLES).write_text(json.dumps(_capacity_tables(means, told)))
    rows = {r["claim"]: r for r in study.gma_claims(records)}
    row = rows[claim]
    assert row["side"] == expected and row["against"] == "linear attention, equal state"
    assert [b["n_pairs"] for b in row["basis"]] == [80, 120, 160, 200]
    assert f"S=80 {100 * means[0]:+.1f} points" in row["number"]
    assert "tested once its primary pair" not in rows["a better memory than linear attention at equal state "
                                                      "(recall)"]["scope"]
    _check_rows_against_records(records, [row])


def test_the_capacity_tables_saved_by_the_command_give_the_row(records):
    """Synthetic records of the capacity study's primary pair at every declared seed, summarized and saved by the
    command line as a user would, give the row its verdict: GMA told apart behind at every S is "not for"."""
    study_design = designs.CAPACITY_STUDY
    for arm, level in (("linear", 0.8), ("gma_k64_remedy", 0.3)):
        runs = []
        for seed in study_design.seeds:
            accuracy = {str(n): level - 0.001 * n + 0.01 * seed for n in study_design.setting["n_pairs"]}
            runs.append({"seed": seed, "retrieval_accuracy": accuracy, "loss": {n: 0.1 for n in accuracy},
                         "state_bytes": dict.fromkeys(accuracy, 16_640), "steps": dict.fromkeys(accuracy, 3_000),
                         "stopped": dict.fromkeys(accuracy, "max_steps")})
            if arm.startswith("gma"):  # its key routing: 4 + seed / 10 bits at every S
                side = {"bits": 4.0 + seed / 10, "untrained_bits": 3.0, "shuffled_bits": 3.0, "state": "in use"}
                runs[-1]["routing"] = {n: {"key": side, "query": side} for n in accuracy}
        record = {"study": study_design.name, "arm": arm, "runs": runs, "spec": study_design.arm(arm).as_dict(),
                  "summary": study.summarize_arm(study_design, arm, runs), "complete": True}
        (records / f"capacity_{arm}.json").write_text(json.dumps(record))
        shutil.rmtree(records / f"capacity_{arm}.runs", ignore_errors=True)  # its recorded runs would replace these
    study.main(["capacity", "--summary", "--save", "--out-dir", str(records)])
    saved = json.loads((records / synthesis.CAPACITY_TABLES).read_text())
    assert len(saved["declared"]["comparisons"]) == 4
    row = next(r for r in study.gma_claims(records) if r["record"] == synthesis.CAPACITY_TABLES)
    assert row["side"] == "not for" and all(b["difference"] == pytest.approx(-0.5) for b in row["basis"])
    assert row["scope"].endswith("; its key routing carrying 4.2 to 4.2 bits at S = 80, 120, 160, 200 (19 to 19 "
                                 "effective slots of K = 64, chapter 12)")  # 4.25 bits: the mean over seeds 0-5
    _check_rows_against_records(records, [row])


def test_a_tie_in_holm_s_p_is_broken_by_the_unadjusted_p_not_the_list_order():
    """Holm's p caps at 1: two comparisons there tie, and the one named is the one of the smaller unadjusted p,
    wherever it stands in the list (the claims' LM rows pick by the unadjusted p alone)."""
    settings = {"arms": {"gma_a": {"mixer": "gma"}, "gma_b": {"mixer": "gma"}, "linear": {"mixer": "linear"}}}
    first = {"arm": "gma_a", "against": "linear", "metric": "val_bits_per_byte", "mean": 0.001,
             "ci95": [-0.05, 0.05], "p": 0.9, "p_holm": 1.0, "told_apart": False}
    second = {**first, "arm": "gma_b", "mean": 0.03, "ci95": [-0.01, 0.07], "p": 0.3}
    for order in ([first, second], [second, first]):
        declared = {"seeds": [0, 1, 2], "family_size": 2, "comparisons": order}
        lines = study.findings_summary(study.study_findings(settings, declared), declared)
        assert "the smallest adjusted p, gma_b vs linear" in lines[-1], lines
    lm = {r["claim"]: r for r in study.gma_claims()}[
        "language modelling against linear attention (small LM, bits per byte)"]
    smallest = min(lm["basis"], key=lambda b: b["p"])
    assert f"the smallest unadjusted p, {smallest['arm']} (p {smallest['p']:.2g})" in lm["evidence"]


@pytest.mark.parametrize("ci95, lower_is_better, expected", [
    ([-0.096, 0.036], False, (0.096, 0.036)),  # higher is better: the low end is GMA behind
    ([-0.096, 0.036], True, (0.036, 0.096)),  # lower is better: the low end is GMA ahead
    ([0.02, 0.09], True, (0.09, 0.0)),  # excludes 0: one side only
])
def test_an_interval_says_how_far_behind_and_how_far_ahead_it_allows(ci95, lower_is_better, expected):
    b = {"ci95": ci95, "lower_is_better": lower_is_better, "told_apart": False, "p_holm": 0.7}
    assert synthesis.interval_sides(b) == pytest.approx(expected)
    if ci95[0] <= 0 <= ci95[1]:
        text = synthesis._verdict(b, 3)
        assert f"from {expected[0]:.3f} behind to {expected[1]:.3f} ahead" in text and "either way" not in text
