"""Part IV at a glance: each study's row counts its declared comparisons as the saved table decided them."""
import json

from gma_teach import measure
from gma_teach.runs import settings, synthesis, tables


def test_every_row_counts_each_declared_comparison_once_as_its_table_decided():
    rows = {row["study"]: row for row in synthesis.part_iv_synthesis()}
    assert set(rows) == {"listops-lra", "text", "lm", "collapse", "recall"}
    for name, row in rows.items():
        assert row["wins"] + row["ties"] + row["losses"] == row["recorded"] <= row["declared"]
        if name == "recall":
            declared = json.loads((measure.results_folder() / "recall_study_tables.json").read_text())["declared"]
            declared = {**declared, "seeds": list(settings.RECALL_STUDY["seeds"])}
        else:
            saved = json.loads(tables_path(name).read_text())
            declared = synthesis.standing_family(saved)
            # a study with a declared second look is counted there, on all its seeds
            assert (declared is saved.get("second_look")) == ("second_look" in saved)
        assert row["ties"] == sum(not c["told_apart"] for c in declared["comparisons"])
        assert row["seeds"] == f"{declared['seeds'][0]}-{declared['seeds'][-1]}"
    assert [row["chapter"] for row in synthesis.part_iv_synthesis()] == sorted(row["chapter"] for row in rows.values())


def tables_path(name):
    return measure.results_folder() / f"{settings.STUDIES[name]['name']}_tables.json"


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
    found = tables.study_findings(settings.LM_STUDY, saved["second_look"])
    assert len(found["wins"]) + len(found["losses"]) == after["lm"]["wins"] + after["lm"]["losses"]
