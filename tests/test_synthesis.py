"""Part IV at a glance: each study's row counts its declared comparisons as the saved table decided them."""
import json
import shutil

from gma_teach import capacity, designs, measure, study
from gma_teach.runs import synthesis, tables


def test_every_row_counts_each_declared_comparison_once_as_its_table_decided():
    rows = {row["study"]: row for row in synthesis.part_iv_synthesis()}
    assert set(rows) == {"listops-lra", "text", "lm", "collapse", "remedy", "recall", "capacity", "slot-routing",
                         "slot-balanced"}
    for name, row in rows.items():
        assert row["wins"] + row["ties"] + row["losses"] == row["recorded"] <= row["declared"]
        if name == "recall":
            declared = json.loads((measure.results_folder() / "recall_study_tables.json").read_text())["declared"]
            declared = {**declared, "seeds": list(designs.RECALL_STUDY["seeds"])}
        else:
            saved = json.loads(tables_path(name).read_text())
            declared = synthesis.standing_family(saved)
            # a study with a declared second look is counted there, on all its seeds
            assert (declared is saved.get("second_look")) == ("second_look" in saved)
        assert row["ties"] == sum(not c["told_apart"] for c in declared["comparisons"])
        assert row["seeds"] == f"{declared['seeds'][0]}-{declared['seeds'][-1]}"
    assert [row["chapter"] for row in synthesis.part_iv_synthesis()] == sorted(row["chapter"] for row in rows.values())


def test_each_study_s_chapter_and_words_are_set_on_the_study(monkeypatch, tmp_path):
    """``study.STUDY_CHAPTERS`` and ``study.WHAT`` are derived from the declared studies, and the synthesis reads each
    study's own ``chapter`` and ``what``: a study given a chapter is counted in its place, and one without is not."""
    assert study.STUDY_CHAPTERS == {name: s.chapter for name, s in designs.STUDIES.items() if s.chapter is not None}
    assert list(study.STUDY_CHAPTERS.values()) == sorted(study.STUDY_CHAPTERS.values())  # the chapters' order
    assert study.WHAT == {name: designs.STUDIES[name].what for name in study.STUDY_CHAPTERS}
    assert study.STUDY_CHAPTERS["lm"] == designs.LM_STUDY.chapter == 10 and study.WHAT["lm"] == "language modelling"
    assert designs.RECALL_STUDY.chapter == 12 and designs.MAMBA_CHECK.chapter is None  # a check, not counted
    for path in measure.results_folder().glob("*_tables.json"):
        (tmp_path / path.name).write_text(path.read_text())
    monkeypatch.setitem(designs.STUDIES, "lm", designs.LM_STUDY.with_changes(chapter=13, what="the LM, later"))
    rows = synthesis.part_iv_synthesis(tmp_path)
    assert (rows[-1]["study"], rows[-1]["chapter"], rows[-1]["what"]) == ("lm", 13, "the LM, later")
    assert "| the LM, later | 13 |" in synthesis.format_synthesis(rows)
    monkeypatch.setitem(designs.STUDIES, "lm", designs.LM_STUDY.with_changes(chapter=None, what=None))
    assert "lm" not in {row["study"] for row in synthesis.part_iv_synthesis(tmp_path)}


def tables_path(name):
    return measure.results_folder() / f"{designs.STUDIES[name]['name']}_tables.json"


def test_a_flipped_verdict_moves_a_comparison_between_the_columns(tmp_path):
    for path in measure.results_folder().glob("*_tables.json"):
        (tmp_path / path.name).write_text(path.read_text())
    before = {row["study"]: row for row in synthesis.part_iv_synthesis(tmp_path)}
    saved = json.loads((tmp_path / "lm_study_tables.json").read_text())
    first = saved["second_look"]["comparisons"][0]  # the LM study's verdicts stand at its second look
    first["told_apart"], first["p_holm"] = True, 0.001
    (tmp_path / "lm_study_tables.json").write_text(json.dumps(saved))
    after = {row["study"]: row for row in synthesis.part_iv_synthesis(tmp_path)}
    assert after["lm"]["ties"] == before["lm"]["ties"] - 1
    assert after["lm"]["wins"] + after["lm"]["losses"] == before["lm"]["wins"] + before["lm"]["losses"] + 1
    assert "| language modelling | 10 | 12 of 12 | 0-4 |" in synthesis.format_synthesis(list(after.values()))
    found = tables.study_findings(designs.LM_STUDY, saved["second_look"])
    assert len(found["wins"]) + len(found["losses"]) == after["lm"]["wins"] + after["lm"]["losses"]


README = measure.results_folder().parents[1] / "README.md"


def _glance(text: str) -> str:
    """README's results at a glance from its table's first line to the end of the section (the claims table and
    list, the tuning table and list, the closing paragraph)."""
    section = text.split("## Results at a glance\n", 1)[1].split("\n## ", 1)[0]
    lines = section.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    return "\n".join(lines[start:]).strip()


def _generated() -> str:
    return synthesis.format_glance(synthesis.gma_claims(), synthesis.tuning_claims())


def test_readme_results_at_a_glance_is_the_claims_table_of_the_records():
    """README's table, its tuning table and its closing paragraph are :func:`synthesis.format_glance` of the
    records, character for character: a record that moves, or a sentence edited by hand, fails here."""
    assert _glance(README.read_text()) == _generated()


def test_any_one_wrong_number_in_readme_s_glance_fails():
    """Each number README's glance prints, changed alone by one unit of its last digit, breaks the check above."""
    import re

    text, generated = README.read_text(), _generated()
    glance = _glance(text)
    numbers = list(re.finditer(r"\d+(?:[.,]\d+)*", glance))
    assert len(numbers) > 150, len(numbers)
    for match in numbers:
        digits = match.group(0)
        changed = digits[:-1] + str((int(digits[-1]) + 1) % 10)
        wrong = glance[:match.start()] + changed + glance[match.end():]
        assert wrong != generated, match.group(0)


def test_the_rows_name_rivals_and_the_tuning_rows_only_routings():
    """The claims table compares GMA with another mixer in every row; GMA's routings against each other are in the
    tuning table; the closing paragraph names every claim under its verdict, each verdict once."""
    rows, tuning = synthesis.gma_claims(), synthesis.tuning_claims()
    assert not any("routing" in r["against"] for r in rows), [r["against"] for r in rows]
    assert tuning and all("routing" in r["against"] for r in tuning)
    claims = {r["claim"]: r for r in rows}
    recall = claims["recall with the default routing"]
    assert recall["side"] == synthesis.verdict_of(recall["basis"])
    assert {b["rival"] for b in recall["basis"]} == {"linear", "sdpa"} and len(recall["basis"]) == 24
    assert {(b["arm"], b["width"]) for b in recall["basis"]} == {
        (f"gma_k{k}", w) for k in (8, 16, 32, 64, 128, 256) for w in (64, 128)}
    listops = claims["ListOps at LRA's lengths"]
    assert {b["rival"] for b in listops["basis"]} == {"sdpa", "linear", "performer"}
    paragraph = synthesis.what_gma_is_for(rows)
    for i, r in enumerate(rows, start=1):
        assert paragraph.count(f"(row {i}, against") == 1
        before = paragraph.split(f"{r['claim']} (row {i}, against", 1)[0]
        heads = {"for": "GMA is for", "not for": "It is not for", "not shown": "Not shown"}
        assert before.rfind(heads[r["side"]]) == max(before.rfind(h) for h in heads.values()), r["claim"]


def test_each_claim_is_computed_from_its_record(tmp_path):
    shutil.copytree(measure.results_folder(), tmp_path, dirs_exist_ok=True)  # the records and their run folders
    before = synthesis.gma_claims(tmp_path)
    assert {row["side"] for row in before} <= {"for", "not for", "not shown"}
    assert all(row["chapter"] in (8, 9, 10, 11, 12) for row in before)
    saved = json.loads((tmp_path / "text_standin_tables.json").read_text())
    first = next(c for c in saved["declared"]["comparisons"] if c["against"] == "softmax")
    first["mean"] += 0.01
    first["ci95"] = [first["ci95"][0] - 0.5, first["ci95"][1]]  # now it holds 0
    first["told_apart"], first["p_holm"] = False, 0.2
    (tmp_path / "text_standin_tables.json").write_text(json.dumps(saved))
    after = {row["record"]: row for row in synthesis.gma_claims(tmp_path)}["text_standin_tables.json"]
    assert after != {row["record"]: row for row in before}["text_standin_tables.json"]
    assert "not told apart, the interval allowing GMA from" in after["evidence"] and after["side"] == "not shown"


def test_a_comparison_not_told_apart_is_never_written_as_parity():
    for row in synthesis.gma_claims():
        if "not told apart" in row["evidence"]:  # with both ends of its interval, which says what it is
            assert "unadjusted 95% interval" in row["evidence"], row
            assert " allows up to" not in row["evidence"], row
        for word in ("parity", "on par ", "same as", "level with", "matches"):
            assert word not in row["evidence"] + row["number"], row


def test_a_remedy_losing_to_gma_is_not_counted_as_gma_losing():
    """The Text stand-in's variance remedy is told apart *behind* default GMA: it counts in the remedies' columns,
    and GMA against the other mixers has no loss."""
    text = {row["study"]: row for row in synthesis.part_iv_synthesis()}["text"]
    saved = json.loads(tables_path("text").read_text())
    remedy = next(c for c in saved["declared"]["comparisons"] if c["arm"] == "gma_variance_d_route")
    assert remedy["told_apart"] and remedy["mean"] < 0
    assert text["remedies"][2] >= 1 and text["against_mixers"][2] == 0


def test_part_iv_ties_its_computed_sentences_to_the_records_with_asserts():
    """nbval runs Part IV without stored outputs, so a sentence is checked only by an ``assert`` in its cell: the
    claims' verdicts, the recall row, the figure's reading, the tuning table and the closing paragraph each have
    one, and the page ends with the paragraph."""
    import nbformat

    cells = nbformat.read(README.parent / "book" / "part_iv_findings.ipynb", as_version=4).cells
    code = [c.source for c in cells if c.cell_type == "code"]
    checked = [source for source in code if "\nassert " in "\n" + source or "    assert " in source]
    for needle in ("study.verdict_of(c[\"basis\"])", "recall with the default routing",
                   "prompts.claims_figure_measured(claims)", "study.tuning_claims()", "study.what_gma_is_for(claims)"):
        assert any(needle in source for source in checked), needle
    assert "study.what_gma_is_for(claims)" in code[-1] and "display(Markdown(paragraph))" in code[-1]
    assert not any("dissolves" in c.source for c in cells if c.cell_type == "markdown")


def test_the_slot_memory_row_reads_the_balanced_assignment_study_and_its_runs(tmp_path):
    """The claims row of GMA with its keys in slots of their own is the balanced-assignment study's primary family
    as saved (one comparison per S, GMA minus linear attention), judged by the one rule; its scope counts the runs
    that reached the step ceiling and says whether the declared goal was reached, both read again here from the
    runs; with no saved table there is no row."""
    design = designs.SLOT_BALANCED_STUDY
    row = {r["record"]: r for r in synthesis.gma_claims()}[synthesis.SLOT_MEMORY_TABLES]
    saved = synthesis.standing_family(json.loads(tables_path("slot-balanced").read_text()))
    by_metric = {c["metric"]: c for c in saved["comparisons"]}
    assert [b["n_pairs"] for b in row["basis"]] == list(designs.SLOT_ROUTING_PAIRS)
    for b, metric in zip(row["basis"], design.metrics):
        assert b["difference"] == by_metric[metric]["mean"] and b["told_apart"] == by_metric[metric]["told_apart"]
        assert f"S={b['n_pairs']} {100 * b['difference']:+.1f} points" in row["number"]
    assert row["side"] == synthesis.verdict_of(row["basis"])
    arm, rival = design.primary[0]
    records = {name: study.load_arm(design, name) for name in (arm, rival)}
    ceiling = capacity.ceiling_count(design, records)
    assert ceiling["recorded"] == 2 * len(design.seeds) * len(design.metrics)
    assert f"that {ceiling['at_ceiling']} of its {ceiling['recorded']} runs reached" in row["scope"]
    goal = capacity.slot_goal(design, study.declared_comparisons(design), records)["arms"][arm]
    assert row["scope"].endswith("reached") == (goal["status"] == "reached")
    assert synthesis._slot_memory_claim(tmp_path) == []
