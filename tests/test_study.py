"""The study driver: t quantiles and paired intervals against scipy, seeds skipped when recorded, summaries."""
import json
import math
import random
import statistics

import pytest

from gma_teach import designs, preset, stats, study
from gma_teach.runs import study_cli

TINY_STUDY = {
    "name": "tiny_study", "scale": "tiny",
    "overrides": {"tokenizer": "bytes", "max_train_tokens": 6000, "max_val_tokens": 2000, "n_steps": 4,
                  "eval_every": 2, "n_components": 6},  # an arm's own K wins over the setting's
    "seeds": (0, 1),
    "arms": {"gma": {"mixer": "gma", "n_components": 8},
             "gma_remedy": {"mixer": "gma", "n_components": 8, "gma_options": {"init_variance": "d_route"}},
             "none": {"mixer": "none"}},
}


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GMA_TEACH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CI", "1")


@pytest.mark.parametrize("dof", [1, 2, 3, 5, 10, 29, 30, 31, 45, 100, 1000])
def test_t_quantile_matches_scipy(dof):
    scipy_stats = pytest.importorskip("scipy.stats")
    assert stats.t_quantile_975(dof) == pytest.approx(float(scipy_stats.t.ppf(0.975, dof)), abs=1e-4)


def test_t_quantile_rejects_bad_dof():
    with pytest.raises(ValueError, match="dof"):
        stats.t_quantile_975(0)
    with pytest.raises(TypeError, match="dof"):
        stats.t_quantile_975(2.0)


def test_paired_difference_by_hand_and_against_scipy():
    a, b = [3.0, 5.0, 4.0], [1.0, 2.0, 2.0]  # differences 2, 3, 2: mean 7/3, sample std sqrt(1/3)
    result = stats.paired_difference(a, b)
    assert result["differences"] == [2.0, 3.0, 2.0] and result["n"] == 3
    assert result["mean"] == pytest.approx(7 / 3) and result["std"] == pytest.approx(math.sqrt(1 / 3))
    half = 4.302653 * math.sqrt(1 / 3) / math.sqrt(3)
    assert result["ci95"] == pytest.approx([7 / 3 - half, 7 / 3 + half], abs=1e-6)
    scipy_stats = pytest.importorskip("scipy.stats")
    low, high = scipy_stats.t.interval(0.95, 2, loc=7 / 3, scale=statistics.stdev([2, 3, 2]) / math.sqrt(3))
    assert result["ci95"] == pytest.approx([low, high], abs=1e-5)
    with pytest.raises(ValueError, match="one value per seed"):
        stats.paired_difference([1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="at least 2"):
        stats.paired_difference([1], [2])


def test_fisher_exact_p_by_hand_and_against_scipy():
    # 5 of 5 against 1 of 5: of the C(10, 6) = 210 splits of six hits, 5 + 1 and 1 + 5 are the two least likely,
    # each C(5, 5) C(5, 1) / 210 = 5 / 210
    assert stats.fisher_exact_p(5, 5, 1, 5) == pytest.approx(10 / 210)
    assert stats.fisher_exact_p(3, 3, 3, 3) == 1.0 and stats.fisher_exact_p(0, 4, 0, 7) == 1.0
    scipy_stats = pytest.importorskip("scipy.stats")
    for runs_a, runs_b in [(3, 5), (5, 5), (2, 9), (7, 4)]:
        for hits_a in range(runs_a + 1):
            for hits_b in range(runs_b + 1):
                table = [[hits_a, runs_a - hits_a], [hits_b, runs_b - hits_b]]
                expected = scipy_stats.fisher_exact(table, alternative="two-sided").pvalue
                assert stats.fisher_exact_p(hits_a, runs_a, hits_b, runs_b) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("arguments, error, message", [
    ((6, 5, 1, 5), ValueError, r"hits_a must be an int in \[0, 5\], got 6"),
    ((1, 5, -1, 5), ValueError, r"hits_b must be an int in \[0, 5\], got -1"),
    ((1, 0, 1, 5), ValueError, "runs_a must be >= 1, got 0"),
    ((1.0, 5, 1, 5), TypeError, "hits_a must be an int, got float"),
])
def test_fisher_exact_p_rejects_impossible_counts(arguments, error, message):
    with pytest.raises(error, match=message):
        stats.fisher_exact_p(*arguments)


def test_run_arm_records_each_seed_and_skips_recorded_ones(tmp_path, capsys):
    record = study.run_arm(TINY_STUDY, "gma", seeds=(0,), folder=tmp_path, command="test")
    path = study.record_path(TINY_STUDY, "gma", tmp_path)
    assert not path.exists() and (tmp_path / "tiny_study_gma.runs" / "seed-0.json").is_file()  # a run, a file
    saved = study.read_record(path)
    assert saved["summary"]["seeds"] == [0] and saved["complete"] is False and record["runs"][0]["seed"] == 0
    for key in ("hardware", "threads", "load", "date", "commit", "command"):
        assert key in saved and key in saved["runs"][0]["provenance"]
    run = saved["runs"][0]
    assert run["n_components"] == 8  # the arm's K, not the setting's 6
    assert run["tokenizer"].startswith("bytes") and run["val"]["bits_per_byte"] > 0
    assert "active_share" in saved["summary"] and len(saved["summary"]["per_layer"]) == 1
    capsys.readouterr()
    again = study.run_arm(TINY_STUDY, "gma", seeds=(0, 1), folder=tmp_path, command="test")
    printed = capsys.readouterr().out
    assert "seed 1" in printed and "seed 0" not in printed  # seed 0 was recorded: skipped
    assert [r["seed"] for r in again["runs"]] == [0, 1] and again["complete"] is True
    assert again["runs"][0] == json.loads(json.dumps(run))  # the recorded seed is kept as it was
    other = {**TINY_STUDY, "overrides": {**TINY_STUDY["overrides"], "n_steps": 6}}
    with pytest.raises(ValueError, match="another setting"):
        study.run_arm(other, "gma", folder=tmp_path)
    with pytest.raises(ValueError, match="arm"):
        study.run_arm(TINY_STUDY, "mamba", folder=tmp_path)


def test_study_table_pairs_common_seeds(tmp_path):
    for arm in TINY_STUDY["arms"]:
        study.run_arm(TINY_STUDY, arm, folder=tmp_path, command="test")
    table = study.study_table(TINY_STUDY, tmp_path)
    assert set(table["arms"]) == set(TINY_STUDY["arms"]) and table["reference"] == "gma"
    reference = {r["seed"]: r["val"]["bits_per_byte"] for r in study.load_arm(TINY_STUDY, "gma", tmp_path)["runs"]}
    other = {r["seed"]: r["val"]["bits_per_byte"] for r in study.load_arm(TINY_STUDY, "none", tmp_path)["runs"]}
    assert table["paired"]["none"]["differences"] == pytest.approx([other[s] - reference[s] for s in (0, 1)])
    assert "active_share" not in table["arms"]["none"] and "active_share" in table["arms"]["gma_remedy"]
    text = study.format_study_table(table)
    assert "gma_remedy" in text and "95% CI" in text and "order at the last evaluation" in text
    ordering = table["ordering"]
    assert sorted(ordering["last"]) == sorted(TINY_STUDY["arms"])
    assert ordering["stable"] == (ordering["last"] == ordering["previous"]) == (not ordering["swapped"])
    means = ordering["last_means"]
    assert [means[arm] for arm in ordering["last"]] == sorted(means.values())
    shares = study.study_table(TINY_STUDY, tmp_path, metric="active_share")
    assert set(shares["paired"]) == {"gma_remedy"}  # "none" has no routing to pair
    final = {arm: {r["seed"]: study.final_health(r)["active_share"] for r in study.load_arm(TINY_STUDY, arm,
                                                                                           tmp_path)["runs"]}
             for arm in ("gma", "gma_remedy")}
    assert shares["paired"]["gma_remedy"]["differences"] == pytest.approx(
        [final["gma_remedy"][s] - final["gma"][s] for s in (0, 1)])
    record = study.load_arm(TINY_STUDY, "gma", tmp_path)
    curve = study.health_curve(record, layer=0)
    assert curve["steps"] == [0, 2, 4] and curve["n"] == 2
    first = [statistics.fmean(r["routing"]["initial"][0]["active_share"]) for r in record["runs"]]
    assert curve["mean"][0] == pytest.approx(statistics.fmean(first))
    with pytest.raises(ValueError, match="no routing health"):
        study.health_curve(study.load_arm(TINY_STUDY, "none", tmp_path))


def test_study_settings_are_consistent():
    for settings in designs.STUDIES.values():
        assert len(settings["seeds"]) >= 3 or not settings["primary"], settings["name"]  # a pilot tests nothing
        for spec in settings["arms"].values():
            assert spec.get("prepare") in (None, *designs.PREPARATIONS)
    lm_arms = designs.LM_STUDY["arms"]
    assert {"sdpa", "linear", "performer", "none", "uniform"} <= set(lm_arms)
    assert {lm_arms[f"gma_k{k}"]["n_components"] for k in (32, 64, 128)} == {32, 64, 128}


def test_a_classification_study_records_test_accuracy(tmp_path):
    tiny = {"name": "tiny_listops", "experiment": "listops", "scale": "tiny",
            "overrides": {"n_train": 64, "n_val": 16, "n_test": 32, "epochs": 1, "n_components": 4}, "seeds": (0, 1),
            "arms": {"gma": {"mixer": "gma"}, "gma_k3": {"mixer": "gma", "n_components": 3},
                     "gma_wide": {"mixer": "gma", "gma_options": {"init_variance": "d_route"}},
                     "linear": {"mixer": "linear"}}}
    for arm in tiny["arms"]:
        record = study.run_arm(tiny, arm, folder=tmp_path, command="test")
        assert record["complete"] and 0 <= record["summary"]["test_accuracy"]["mean"] <= 1
        if arm.startswith("gma"):  # the arm's K if it names one, else the setting's
            assert {r["n_components"] for r in record["runs"]} == {3 if arm == "gma_k3" else 4}
            spec = designs.Arm.from_spec(study.load_arm(tiny, arm, tmp_path)["spec"])
            assert all(r["gma_options"] == spec.gma_options
                       for r in record["runs"])
    table = study.study_table(tiny, tmp_path)
    assert table["metric"] == "test_accuracy" and "linear" in table["paired"]
    assert "test accuracy" in study.format_study_table(table)
    assert designs.LISTOPS_LRA_STUDY["overrides"]["min_length"] == 500  # LRA's lengths


def test_recorded_study_files_are_consistent():
    """Every recorded arm: its summary is what its runs give, each seed names its tokenizer, reports bits per byte
    and carries its provenance, and it sits at the path its study gives it."""
    from gma_teach import measure

    checked = 0
    for settings in designs.STUDIES.values():
        for arm in settings["arms"]:
            record = study.load_arm(settings, arm)
            if record is None:
                continue
            checked += 1
            owner, owner_arm = study.recorded_under(settings, arm)
            assert record["arm"] == owner_arm and record["study"] == owner["name"]
            assert designs.Arm.from_spec(record["spec"]) == settings["arms"][arm]
            assert json.loads(json.dumps(study.summarize_arm(owner, owner_arm, record["runs"]))) == record["summary"]
            for run in record["runs"]:
                assert set(measure.PROVENANCE_KEYS) <= set(run["provenance"])
                if settings.get("experiment", "lm") == "lm":
                    assert run["tokenizer"].startswith("GPT-2 BPE") and run["val"]["bits_per_byte"] > 0
    assert checked >= 1 or not any(measure.results_folder().glob("routing_collapse_*.json"))


def test_recorded_tables_are_what_the_records_give():
    """A saved ``<study>_tables.json`` (README quotes its intervals) is recomputed from the arms' records."""
    for settings in designs.STUDIES.values():
        path = study.tables_path(settings)
        if path.exists() and settings.widths:  # the recall study: one table over its widths
            saved = json.loads(path.read_text())
            assert saved["study"] == settings["name"]
            assert saved["table"] == json.loads(json.dumps(study.recall_table(None, settings))), path.name
        elif path.exists():
            saved = json.loads(path.read_text())
            assert saved["study"] == settings["name"]
            assert saved["tables"] == json.loads(json.dumps(study.study_tables(settings))), path.name
            assert saved["declared"] == json.loads(json.dumps(study.declared_comparisons(settings))), path.name
            assert saved["design"] == json.loads(json.dumps(study_cli._design(settings))), path.name
            if "left_plateau" in saved:
                assert saved["left_plateau"] == json.loads(json.dumps(study.left_plateau(settings)))
            if "context_recovered" in saved:
                assert saved["context_recovered"] == json.loads(json.dumps(study.context_recovered(settings)))
            if "gma_against_baselines" in saved:
                assert saved["gma_against_baselines"] == json.loads(json.dumps(study.gma_against_baselines(settings)))


def test_summary_save_records_the_tables(tmp_path, monkeypatch, capsys):
    with_sdpa = {**TINY_STUDY, "arms": {**TINY_STUDY["arms"], "sdpa": {"mixer": "sdpa"}}}
    for arm in with_sdpa["arms"]:
        study.run_arm(with_sdpa, arm, folder=tmp_path, command="test")
    monkeypatch.setitem(designs.STUDIES, "tiny", with_sdpa)
    tables = study.main(["tiny", "--summary", "--save", "--out-dir", str(tmp_path)])
    saved = json.loads(study.tables_path(with_sdpa, tmp_path).read_text())
    assert set(saved["tables"]) == {"val_bits_per_byte", "routing_information"} == set(tables)
    assert saved["tables"] == json.loads(json.dumps(tables)) and saved["command"].endswith("--summary --save --out-dir "
                                                                                        + str(tmp_path))
    assert saved["context_recovered"] == json.loads(json.dumps(study.context_recovered(with_sdpa, tmp_path)))
    assert set(saved["context_recovered"]["arms"]) == {"gma", "gma_remedy"}
    assert saved["gma_against_baselines"] == json.loads(json.dumps(study.gma_against_baselines(with_sdpa, tmp_path)))
    assert set(saved["gma_against_baselines"]["pairs"]["gma_remedy"]) == {"none", "sdpa"}
    printed = capsys.readouterr().out
    assert "95% CI" in printed and "recovers" in printed and "gma_remedy - sdpa" in printed
    assert saved["declared"] == json.loads(json.dumps(study.declared_comparisons(with_sdpa, tmp_path)))


def test_an_arm_shared_with_another_study_is_trained_and_recorded_once(tmp_path, capsys):
    sharing = {**TINY_STUDY, "name": "tiny_comparison", "shared_with": TINY_STUDY,
               "arms": {"k8": {"mixer": "gma", "n_components": 8}, "linear": {"mixer": "linear"}}}
    assert study.recorded_under(sharing, "k8") == (TINY_STUDY, "gma")
    assert study.recorded_under(sharing, "linear") == (sharing, "linear")
    other_setting = {**sharing, "overrides": {**TINY_STUDY["overrides"], "n_steps": 6}}
    assert study.recorded_under(other_setting, "k8") == (other_setting, "k8")  # another setting: not shared
    study.run_arm(TINY_STUDY, "gma", seeds=(0,), folder=tmp_path, command="test")
    capsys.readouterr()
    record = study.run_arm(sharing, "k8", seeds=(0, 1), folder=tmp_path, command="test")
    assert "seed 0" not in capsys.readouterr().out  # seed 0 came from the other study's record
    assert record["arm"] == "gma" and [r["seed"] for r in record["runs"]] == [0, 1]
    assert sorted(p.name for p in tmp_path.glob("*.runs")) == ["tiny_study_gma.runs"]
    study.run_arm(sharing, "linear", folder=tmp_path, command="test")
    table = study.study_table(sharing, tmp_path)
    assert set(table["arms"]) == {"k8", "linear"} and table["arms"]["k8"]["seeds"] == [0, 1]


def test_the_lm_study_reads_the_collapse_study_runs_of_the_same_setting():
    assert designs.LM_STUDY["overrides"] == designs.COLLAPSE_STUDY["overrides"] == designs.LM_SETTING
    assert study.recorded_under(designs.LM_STUDY, "gma_k64") == (designs.COLLAPSE_STUDY, "default")
    owner, arm = study.recorded_under(designs.LM_STUDY, "gma_k64_var_bal")
    assert owner is designs.COLLAPSE_STUDY and owner["arms"][arm]["gma_options"] == designs.VARIANCE_AND_BALANCE


def test_a_recorded_seed_is_reproduced_exactly_on_the_same_machine(tmp_path):
    """What ``python -m gma_teach.study <study> --arms A --seeds S --out-dir D`` promises: the same numbers."""
    first = study.run_arm(TINY_STUDY, "gma_remedy", seeds=(1,), folder=tmp_path / "a", command="test")["runs"][0]
    again = study.run_arm(TINY_STUDY, "gma_remedy", seeds=(1,), folder=tmp_path / "b", command="test")["runs"][0]
    assert again["val"] == first["val"] and again["history"]["val_loss"] == first["history"]["val_loss"]
    assert again["routing"] == first["routing"]


def test_evaluating_more_often_does_not_change_the_training(tmp_path):
    """The cause study evaluates every 50 steps where the collapse study evaluates every 200: the runs must be the
    same training, so that step 600 of one is step 600 of the other."""
    from gma_teach.experiments import run_lm

    setting = {key: value for key, value in TINY_STUDY["overrides"].items() if key != "n_components"}
    often = run_lm("gma", scale_name="tiny", seed=3, n_components=8, **{**setting, "eval_every": 1})
    rarely = run_lm("gma", scale_name="tiny", seed=3, n_components=8, **{**setting, "eval_every": 4})
    assert often["history"]["steps"][-1] == rarely["history"]["steps"][-1] == 4
    assert often["history"]["val_loss"][-1] == rarely["history"]["val_loss"][-1]
    assert often["routing"]["evaluations"][-1] == rarely["routing"]["evaluations"][-1]


def test_training_speed_is_measured_for_every_arm_in_one_process(tmp_path):
    speed = study.measure_training_speed(TINY_STUDY, steps=1, repeat=1, warmup=0)
    assert set(speed["seconds_per_step"]) == set(TINY_STUDY["arms"]) == set(speed["tokens_per_second"])
    for arm, seconds in speed["seconds_per_step"].items():
        assert seconds > 0
        assert speed["tokens_per_second"][arm] == pytest.approx(speed["tokens_per_step"] / seconds)
    assert study.load_speed(TINY_STUDY, tmp_path) is None
    with pytest.raises(ValueError, match="language-model"):
        study.measure_training_speed(designs.TEXT_STUDY)


def test_the_initial_routing_scan_records_every_setting_and_seed(tmp_path, monkeypatch):
    scan = {"name": "tiny_init_scan", "scale": "tiny", "seeds": (0, 1), "n_blocks": 2,
            "settings": {"default": {}, "variances at d_route": {"init_variance": "d_route"}}}
    monkeypatch.setattr(study_cli, "INIT_SCAN", scan)  # the command line reads it
    record = study.main(["init-scan", "--out-dir", str(tmp_path)])
    assert json.loads((tmp_path / "tiny_init_scan.json").read_text()) == json.loads(json.dumps(record, default=str))
    assert record["command"] == f"python -m gma_teach.study init-scan --out-dir {tmp_path}"
    for setting in record["settings"].values():
        assert [r["seed"] for r in setting["seeds"]] == [0, 1]
        shares = [r["active_share"] for r in setting["seeds"]]
        assert setting["active_share"]["mean"] == pytest.approx(statistics.fmean(shares))
        assert all(0 < share <= 1 for share in shares)
    # larger initial variances flatten the untrained routing: the logits spread less
    spreads = {name: s["logit_spread"]["mean"] for name, s in record["settings"].items()}
    assert spreads["variances at d_route"] < spreads["default"]


def test_context_recovered_is_the_share_of_sdpas_gain_over_no_mixing(tmp_path):
    three = {**TINY_STUDY, "name": "context", "seeds": (0, 1, 2),
             "arms": {"sdpa": {"mixer": "sdpa"}, "gma": {"mixer": "gma"}, "linear": {"mixer": "linear"},
                      "none": {"mixer": "none"}}}
    bits = {"sdpa": [2.0, 2.2, 2.1], "gma": [2.5, 2.5, 2.4], "linear": [2.9, None, 2.6], "none": [3.0, 3.0, 2.8]}
    for arm, values in bits.items():
        runs = [{"seed": seed, "val": {"bits_per_byte": value}, "history": {"val_bits_per_byte": [9.0, value]}}
                for seed, value in enumerate(values) if value]
        study.record_path(three, arm, tmp_path).write_text(json.dumps({"arm": arm, "runs": runs, "summary": {}}))
    result = study.context_recovered(three, tmp_path)
    assert result["gain"] == pytest.approx(statistics.fmean([1.0, 0.8, 0.7])) and result["exploratory"] is True
    assert set(result["arms"]) == {"gma", "linear"}
    gma = result["arms"]["gma"]
    # a ratio of the mean gains, not a mean of per-seed ratios (which would be 0.5636...)
    assert gma["seeds"] == [0, 1, 2] and gma["mean"] == pytest.approx((0.5 + 0.5 + 0.4) / (1.0 + 0.8 + 0.7))
    assert gma["mean"] != pytest.approx(statistics.fmean([0.5 / 1.0, 0.5 / 0.8, 0.4 / 0.7]))
    fieller = stats.fieller_ratio_interval([0.5, 0.5, 0.4], [1.0, 0.8, 0.7])
    assert gma["ci95"] == pytest.approx(fieller["ci95"]) and gma["bounded"] is True
    assert gma["ci95"][0] <= gma["mean"] <= gma["ci95"][1] and gma["method"] == fieller["method"]
    booted = study.context_recovered(three, tmp_path, method="bootstrap")["arms"]["gma"]
    assert booted["ci95"] == pytest.approx(stats.ratio_of_means_interval([0.5, 0.5, 0.4], [1.0, 0.8, 0.7],
                                                                         n_boot=10_000, seed=0)["ci95"])
    assert booted["n_boot"] == 10_000 and booted["mean"] == gma["mean"]
    # the bootstrap's interval is narrower than Fieller's at three seeds: it under-covers
    assert booted["ci95"][1] - booted["ci95"][0] < gma["ci95"][1] - gma["ci95"][0]
    with pytest.raises(ValueError, match="method must be one of"):
        study.context_recovered(three, tmp_path, method="percentile")
    linear = result["arms"]["linear"]
    assert linear["seeds"] == [0, 2] and linear["mean"] == pytest.approx((0.1 + 0.2) / (1.0 + 0.7))
    against = study.gma_against_baselines(three, tmp_path)
    assert against["metric"] == "val_bits_per_byte" and set(against["pairs"]) == {"gma"}
    assert set(against["pairs"]["gma"]) == {"sdpa", "linear", "none"}
    assert against["pairs"]["gma"]["linear"]["seeds"] == [0, 2]
    assert against["pairs"]["gma"]["linear"]["differences"] == pytest.approx([2.5 - 2.9, 2.4 - 2.6])
    assert against["pairs"]["gma"]["sdpa"]["mean"] == pytest.approx(statistics.fmean([0.5, 0.3, 0.3]))
    (tmp_path / "context_linear.json").unlink()
    one_seed = {**three, "arms": {**three["arms"]}}
    study.record_path(one_seed, "linear", tmp_path).write_text(
        json.dumps({"runs": [{"seed": 2, "val": {"bits_per_byte": 2.6}}]}))
    assert study.context_recovered(one_seed, tmp_path)["arms"]["linear"]["ci95"] is None
    with pytest.raises(ValueError, match="baseline"):
        study.context_recovered(three, tmp_path, baseline="uniform")
    study.record_path(three, "none", tmp_path).write_text(json.dumps(  # sdpa's gains 1.0, -0.8, 0.7: not told from 0
        {"runs": [{"seed": seed, "val": {"bits_per_byte": value}} for seed, value in enumerate([3.0, 1.4, 2.8])]}))
    unsure = study.context_recovered(three, tmp_path)["arms"]["gma"]
    assert unsure["ci95"] is None and unsure["bounded"] is False and len(unsure["confidence_set"]) in (1, 2)
    assert None in unsure["confidence_set"][0] + unsure["confidence_set"][-1]  # said unbounded, never a finite interval
    study.record_path(three, "none", tmp_path).write_text(json.dumps(  # gains of 0.2, -0.3 and 0.1 average 0
        {"runs": [{"seed": seed, "val": {"bits_per_byte": value}} for seed, value in enumerate([2.2, 1.9, 2.2])]}))
    with pytest.raises(ValueError, match=r"sdpa gains nothing over none on average over seeds \[0, 1, 2\]"):
        study.context_recovered(three, tmp_path)
    with pytest.raises(ValueError, match="language-model"):
        study.context_recovered(designs.TEXT_STUDY)


def test_the_ordering_names_the_pairs_that_swapped_between_the_last_two_evaluations():
    def arm(*per_seed):  # per seed: bits per byte at the evaluation before the last, and at the last
        return {"runs": [{"seed": seed, "history": {"val_bits_per_byte": [9.0, *values]}}
                         for seed, values in enumerate(per_seed)]}

    arms = {"a": arm((2.0, 1.0), (2.0, 1.2)), "b": arm((1.5, 1.5), (1.5, 1.5)), "c": arm((1.0, 2.0), (1.0, 2.0)),
            "d": arm((3.0, 0.5))}  # d has one seed: left out, so seed 1 still counts
    ordering = study.ordering_at_last_evaluations(arms)
    assert ordering["seeds"] == [0, 1] and ordering["left_out"] == ["d"]
    assert ordering["last"] == ["a", "b", "c"] and ordering["previous"] == ["c", "b", "a"]
    assert ordering["last_means"]["a"] == pytest.approx(1.1)
    assert ordering["swapped"] == [["a", "b"], ["a", "c"], ["b", "c"]] and ordering["stable"] is False
    two = study.ordering_at_last_evaluations({"d": arms["d"], "e": arm((4.0, 4.0), (4.0, 4.0)), "b": arms["b"]})
    assert two["seeds"] == [0, 1] and two["left_out"] == ["d"] and two["last"] == ["b", "e"]
    assert two["swapped"] == [] and two["stable"] is True
    text = study.format_study_table({"metric": "val_bits_per_byte", "reference": "a", "arms": {}, "paired": {},
                                     "ordering": ordering})
    assert "a < b was b < a" in text and "b < c was c < b" in text and "not ordered: d" in text
    assert ordering["told_apart"] == [["b", "c"]]  # c - b is +0.5 at both seeds; a - b is not told apart
    # a and b given a third seed (whose numbers would reverse them) leave the others in, on the seeds all share
    extra = {name: {"runs": arms[name]["runs"] + [{"seed": 2, "history": {"val_bits_per_byte": [9.0, 1.0, value]}}]}
             for name, value in (("a", 5.0), ("b", 0.1))}
    three = study.ordering_at_last_evaluations({**arms, **extra})
    assert three["seeds"] == [0, 1] and three["left_out"] == ["d"] and three["last"] == ["a", "b", "c"]


def test_the_ordering_says_which_pairs_the_seeds_tell_apart_and_whether_those_swapped():
    def arm(previous, last):  # per seed: bits per byte at the evaluation before the last, and at the last
        return {"runs": [{"seed": seed, "history": {"val_bits_per_byte": [9.0, p, q]}}
                         for seed, (p, q) in enumerate(zip(previous, last))]}

    a = arm([3.0, 3.0, 3.0], [1.0, 1.1, 1.05])
    b = arm([2.0, 2.0, 2.0], [1.2, 0.9, 1.15])  # b - a per seed: +0.2, -0.2, +0.1: not told apart
    c = arm([1.0, 1.0, 1.0], [2.0, 2.1, 2.05])  # c - b: +0.8, +1.2, +0.9 (interval [0.45, 1.48]); c - a: +1 each
    ordering = study.ordering_at_last_evaluations({"a": a, "b": b, "c": c})
    assert ordering["last"] == ["a", "b", "c"] and len(ordering["swapped"]) == 3
    assert ordering["told_apart"] == [["a", "c"], ["b", "c"]] == ordering["told_apart_swapped"]
    settled = study.ordering_at_last_evaluations({"a": a, "b": b, "c": arm([4.0, 4.0, 4.0], [2.0, 2.1, 2.05])})
    assert settled["swapped"] == [["a", "b"]] and settled["told_apart_swapped"] == []
    assert settled["told_apart"] == [["a", "c"], ["b", "c"]]
    text = study.format_study_table({"metric": "val_bits_per_byte", "reference": "a", "arms": {}, "paired": {},
                                     "ordering": settled})
    assert "all 3 pairs (exploratory): 2 unadjusted intervals exclude 0, 2 survive Holm, and none of those " \
           "swapped" in text
    assert settled["exploratory"] is True and settled["interval_excludes_zero"] == settled["told_apart"]


def test_the_ordering_tells_apart_only_what_survives_holm_over_all_its_pairs():
    def arm(last):
        return {"runs": [{"seed": seed, "history": {"val_bits_per_byte": [9.0, 5.0, q]}}
                         for seed, q in enumerate(last)]}

    # b - a per seed: +0.10, +0.14, +0.12: t = 10.4 on 2 dof, p = 0.0091; alone its interval excludes 0
    arms = {"a": arm([1.0, 1.0, 1.0]), "b": arm([1.10, 1.14, 1.12])}
    alone = study.ordering_at_last_evaluations(arms)
    assert alone["told_apart"] == [["a", "b"]] and alone["p_holm"]["a < b"] == pytest.approx(
        stats.paired_t_p([1.10, 1.14, 1.12], [1.0, 1.0, 1.0]))
    # among six more arms far from both, noisy ones: 28 pairs, and Holm multiplies the pair's p by up to 28
    generator = random.Random(0)
    noisy = {f"n{i}": arm([3.0 + generator.uniform(-0.5, 0.5) for _ in range(3)]) for i in range(6)}
    crowded = study.ordering_at_last_evaluations({**arms, **noisy})
    assert ["a", "b"] in crowded["interval_excludes_zero"] and ["a", "b"] not in crowded["told_apart"]
    assert crowded["p_holm"]["a < b"] > 0.05 and crowded["p"]["a < b"] == alone["p"]["a < b"]
    assert list(crowded["p_holm"].values()) == stats.holm(list(crowded["p"].values()))


def test_every_study_setting_names_keys_of_its_preset():
    """A study's overrides replace preset entries (pinned on purpose, each setting's docstring says why); a key the
    preset does not have, or no longer has after a rename, fails here rather than when the study runs."""
    for name, setting in designs.STUDIES.items():
        experiment = setting.get("experiment", "lm")
        if experiment in ("recall", "capacity"):  # its setting is every size it trains with, no preset under it
            continue
        known = set(vars(preset(experiment, setting["scale"])))
        unknown = sorted(set(setting["overrides"]) - known)
        assert not unknown, f"study {name!r} overrides {unknown}, which preset {experiment!r} does not have"


def _write_arm(study_settings, arm, folder, values, key="bits_per_byte"):
    runs = [{"seed": seed, "val": {key: value}, "history": {"val_bits_per_byte": [9.0, value]}}
            for seed, value in values.items()]
    study.record_path(study_settings, arm, folder).write_text(json.dumps(
        {"arm": arm, "runs": runs, "summary": {"seeds": list(values)}}))


def test_declared_comparisons_are_holm_adjusted_over_the_whole_family(tmp_path):
    declared = {**TINY_STUDY, "name": "declared", "seeds": (0, 1, 2), "metric": "val_bits_per_byte",
                "arms": {"gma": {"mixer": "gma"}, "linear": {"mixer": "linear"}, "sdpa": {"mixer": "sdpa"},
                         "none": {"mixer": "none"}},
                "primary": [("gma", "linear"), ("gma", "sdpa"), ("gma", "none")], "test": "paired t, Holm"}
    _write_arm(declared, "gma", tmp_path, {0: 2.00, 1: 2.10, 2: 2.05, 3: 9.0})  # seed 3 is not declared
    _write_arm(declared, "linear", tmp_path, {0: 2.10, 1: 2.22, 2: 2.16, 3: 0.0})
    _write_arm(declared, "sdpa", tmp_path, {0: 1.90, 1: 2.15, 2: 1.95})
    result = study.declared_comparisons(declared, tmp_path)
    assert result["family_size"] == 3 and result["seeds"] == [0, 1, 2] and result["test"] == "paired t, Holm"
    by_pair = {(c["arm"], c["against"]): c for c in result["comparisons"]}
    assert set(by_pair) == {("gma", "linear"), ("gma", "sdpa")}  # "none" is not recorded yet
    linear = by_pair[("gma", "linear")]
    assert linear["seeds"] == [0, 1, 2] and linear["differences"] == pytest.approx([-0.10, -0.12, -0.11])
    raw = [stats.paired_t_p([2.00, 2.10, 2.05], [2.10, 2.22, 2.16]),
           stats.paired_t_p([2.00, 2.10, 2.05], [1.90, 2.15, 1.95])]
    assert [linear["p"], by_pair[("gma", "sdpa")]["p"]] == pytest.approx(raw)
    # the unrecorded comparison counts as p = 1, so the family stays three tests
    assert [linear["p_holm"], by_pair[("gma", "sdpa")]["p_holm"]] == pytest.approx(stats.holm(raw + [1.0])[:2])
    assert linear["p"] < 0.05 / 3 and linear["told_apart"] is True
    assert by_pair[("gma", "sdpa")]["told_apart"] is False
    # the table marks the declared pair with its Holm verdict and every other pair exploratory
    table = study.study_table(declared, tmp_path, reference="linear")
    # the table pairs every common seed, 0-3, which is not the declared comparison: so it is exploratory
    assert table["paired"]["gma"]["exploratory"] is True and table["paired"]["gma"]["seeds"] == [0, 1, 2, 3]
    table = study.study_table(declared, tmp_path, reference="sdpa")
    assert table["paired"]["gma"]["exploratory"] is False and table["paired"]["gma"]["told_apart"] is False
    assert table["paired"]["linear"]["exploratory"] is True and "p_holm" not in table["paired"]["linear"]
    assert table["paired"]["linear"]["p"] == pytest.approx(stats.paired_t_p([2.10, 2.22, 2.16], [1.90, 2.15, 1.95]))
    assert "(exploratory)" in study.format_study_table(table) and "Holm p" in study.format_study_table(table)
    assert all(len(line) <= 75 for line in study.format_declared(result))
    assert "told apart" in "\n".join(study.format_declared(result))
    # no primary family: nothing is told apart
    assert study.declared_comparisons({**declared, "primary": []}, tmp_path)["comparisons"] == []


def test_a_pair_on_extra_seeds_is_exploratory_even_when_declared(tmp_path):
    declared = {**TINY_STUDY, "name": "extra", "seeds": (0, 1, 2), "metric": "val_bits_per_byte",
                "arms": {"gma": {"mixer": "gma"}, "linear": {"mixer": "linear"}}, "primary": [("gma", "linear")]}
    _write_arm(declared, "gma", tmp_path, {0: 2.00, 1: 2.10, 2: 2.05, 3: 2.3})
    _write_arm(declared, "linear", tmp_path, {0: 2.10, 1: 2.22, 2: 2.16, 3: 2.2})
    table = study.study_table(declared, tmp_path, reference="linear")
    assert table["paired"]["gma"]["seeds"] == [0, 1, 2, 3] and table["paired"]["gma"]["exploratory"] is True
    against = study.gma_against_baselines(declared, tmp_path)
    assert against["pairs"]["gma"]["linear"]["exploratory"] is True


def test_a_declared_second_look_tests_the_family_on_every_seed_with_p_doubled(tmp_path):
    """The second look pairs the declared seeds 0-4 (a pair missing one counts as not recorded, p = 1), takes
    Holm over the family and doubles each adjusted p for the two looks, and so does the first look; the tables then
    label the five-seed pairs with that verdict, not as exploratory."""
    declared = {**TINY_STUDY, "name": "looks", "seeds": (0, 1, 2), "metric": "val_bits_per_byte",
                "arms": {"gma": {"mixer": "gma"}, "linear": {"mixer": "linear"}, "sdpa": {"mixer": "sdpa"}},
                "primary": [("gma", "linear"), ("gma", "sdpa")], "test": "first",
                "second_look": {"seeds": (0, 1, 2, 3, 4), "test": "second"}}
    gma = {0: 2.00, 1: 2.10, 2: 2.05, 3: 2.20, 4: 2.01}
    linear = {0: 2.10, 1: 2.22, 2: 2.16, 3: 2.31, 4: 2.12}
    _write_arm(declared, "gma", tmp_path, gma)
    _write_arm(declared, "linear", tmp_path, linear)
    _write_arm(declared, "sdpa", tmp_path, {0: 1.90, 1: 2.15, 2: 1.95, 3: 2.30})  # seed 4 missing
    first = study.declared_comparisons(declared, tmp_path)
    assert first["looks"] == 2 and first["seeds"] == [0, 1, 2] and len(first["comparisons"]) == 2
    # the first look pays for the second too: each look at 2.5%, the two together at 5%
    raw_first = [stats.paired_t_p([gma[s] for s in (0, 1, 2)], [other[s] for s in (0, 1, 2)])
                 for other in (linear, {0: 1.90, 1: 2.15, 2: 1.95})]
    assert [c["p_holm"] for c in first["comparisons"]] == pytest.approx(
        [min(1.0, 2 * p) for p in stats.holm(raw_first)])
    assert first["test"].startswith("first; each adjusted p then doubled for the 2 looks")
    assert study.format_declared(first)[1] == "Holm over the family, each p x2 for 2 looks:"
    second = study.declared_comparisons(declared, tmp_path, look="second")
    assert second["looks"] == 2 and second["seeds"] == [0, 1, 2, 3, 4] and second["test"] == "second"
    (only,) = second["comparisons"]  # gma - sdpa lacks seed 4, so it is not recorded on this look
    assert (only["arm"], only["against"], only["seeds"]) == ("gma", "linear", [0, 1, 2, 3, 4])
    raw = stats.paired_t_p(list(gma.values()), list(linear.values()))
    assert only["p"] == pytest.approx(raw)
    assert only["p_holm"] == pytest.approx(min(1.0, 2 * stats.holm([raw, 1.0])[0]))
    assert only["told_apart"] is (only["p_holm"] < 0.05)
    table = study.study_table(declared, tmp_path, reference="linear")
    assert table["paired"]["gma"]["exploratory"] is False and table["paired"]["gma"]["look"] == 2
    assert table["paired"]["gma"]["p_holm"] == pytest.approx(only["p_holm"])
    assert study.format_declared(second)[1] == "Holm over the family, each p x2 for 2 looks:"
    assert "each p times 2 for 2 looks" in study.study_findings(declared, second)["family"]
    with pytest.raises(ValueError, match="look must be"):
        study.declared_comparisons(declared, tmp_path, look="third")
    without = {key: value for key, value in declared.items() if key != "second_look"}
    with pytest.raises(ValueError, match="does not"):
        study.declared_comparisons(without, tmp_path, look="second")
    once = study.declared_comparisons(without, tmp_path)  # a study that looks once is tested once, at 5%
    assert "looks" not in once and once["test"] == "first"
    assert [c["p_holm"] for c in once["comparisons"]] == pytest.approx(stats.holm(raw_first))


def test_last_epoch_accuracy_is_refused_where_validation_is_not_the_test_split():
    with pytest.raises(ValueError, match="validation split is its test split"):
        study.study_table(designs.LISTOPS_LRA_STUDY, metric="last_epoch_test_accuracy")


def test_every_study_declares_its_design():
    """Arms, seeds, metric(s), the primary comparisons (between declared arms) and their test; what was added after
    seeing data is named as exploratory."""
    for name, setting in designs.STUDIES.items():
        metrics = study.declared_metrics(setting)
        assert metrics and all(metric in study.METRIC_PATHS for metric in metrics), name
        assert isinstance(setting["test"], str) and setting["seeds"], name
        for arm, against in setting["primary"]:
            assert arm in setting["arms"] and against in setting["arms"] and arm != against, (name, arm, against)
        assert "exploratory" in setting, name
    assert designs.STUDIES["cause"]["primary"] == ()
    assert {("gma_k32_var_bal", "linear"), ("gma_k128", "sdpa")} <= set(designs.LM_STUDY["primary"])
    assert designs.TEXT_STUDY["metric"] == "last_epoch_test_accuracy"
    assert "post hoc" in designs.LISTOPS_LRA_STUDY["exploratory"]["tests"]


def test_the_text_studys_last_epoch_accuracy_is_its_last_evaluation():
    """The Text stand-in evaluates on its test split after every epoch: the last of those is the test accuracy of
    the last epoch's weights, and the record's ``test`` (the best epoch's) is the largest of them."""
    record = study.load_arm(designs.TEXT_STUDY, "gma")
    if record is None:
        pytest.skip("the Text stand-in is not recorded")
    table = study.study_table(designs.TEXT_STUDY)
    assert table["metric"] == "last_epoch_test_accuracy"
    for run in record["runs"]:
        assert run["test"]["accuracy"] == pytest.approx(max(run["history"]["val_metric"]))
    last = [run["history"]["val_metric"][-1] for run in record["runs"]]
    assert table["arms"]["gma"]["last_epoch_test_accuracy"]["mean"] == pytest.approx(statistics.fmean(last))


def test_left_plateau_counts_seeds_above_the_majority_class_and_labels_fisher_post_hoc(tmp_path):
    classifier = {"name": "plateau", "experiment": "listops", "scale": "tiny", "overrides": {}, "seeds": (0, 1, 2),
                  "arms": {"gma": {"mixer": "gma"}, "performer": {"mixer": "performer"}, "sdpa": {"mixer": "sdpa"}}}
    accuracies = {"gma": [0.15, 0.15, 0.15, 0.15, 0.32], "performer": [0.36] * 5, "sdpa": [0.34, 0.15, 0.36, 0.2, 0.3]}
    for arm, values in accuracies.items():
        runs = [{"seed": seed, "test": {"accuracy": value}} for seed, value in enumerate(values)]
        study.record_path(classifier, arm, tmp_path).write_text(json.dumps(
            {"runs": runs, "summary": {"majority_baseline": 0.2}}))  # 0.2 itself has not left it
    result = study.left_plateau(classifier, tmp_path)
    assert result["counts"] == {"gma": [1, 5], "performer": [5, 5], "sdpa": [3, 5]} and result["exploratory"] is True
    raw = [stats.fisher_exact_p(5, 5, 1, 5), stats.fisher_exact_p(3, 5, 1, 5)]
    assert result["fisher"]["performer"]["p"] == pytest.approx(10 / 210) == pytest.approx(raw[0])
    assert [result["fisher"][arm]["p_holm"] for arm in ("performer", "sdpa")] == pytest.approx(stats.holm(raw))
    with pytest.raises(ValueError, match="classifier study"):
        study.left_plateau(designs.LM_STUDY)


def test_the_study_table_prints_the_mean_and_its_95_percent_half_width():
    from gma_teach.stats import describe, mean_half_width

    values = [2.41, 2.38, 2.45]
    mean, half_width = mean_half_width(values)
    table = {"metric": "val_bits_per_byte", "reference": "a", "paired": {},
             "arms": {"a": {"seeds": [0, 1, 2], "val_bits_per_byte": describe(values)},
                      "b": {"seeds": [0], "val_bits_per_byte": describe([2.5])}}}
    text = study.format_study_table(table)
    assert text.splitlines()[0] == "mean +- 95% half-width over seeds"
    assert f"{mean:.4f}+-{half_width:.4f}" in text and "2.5000 (1 seed)" in text
    assert f"+-{describe(values)['std']:.4f}" not in text  # not the standard deviation


def test_seeds_needed_plans_each_declared_comparison_at_holms_strictest_step():
    declared = {"family_size": 4, "comparisons": [
        {"arm": "gma", "against": "sdpa", "metric": "val_bits_per_byte", "mean": 0.06, "std": 0.03},
        {"arm": "gma", "against": "linear", "metric": "val_bits_per_byte", "mean": 0.0, "std": 0.03},
        {"arm": "gma_remedy", "against": "linear", "metric": "val_bits_per_byte", "mean": 0.001, "std": 0.05}]}
    planned = study.seeds_needed(declared, at_most=200)
    assert planned["alpha"] == pytest.approx(0.05 / 4) and planned["exploratory"] is True
    assert planned["power"] == 0.80
    first, zero, tiny = planned["comparisons"]
    assert first["seeds"] == stats.seeds_to_tell_apart(0.06, 0.03, alpha=0.05 / 4, power=0.80)
    # at that many seeds the paired t-test at Holm's strictest step has 80% power, one fewer does not
    n = first["seeds"]
    assert stats.paired_t_power(0.06, 0.03, n, alpha=0.05 / 4) >= 0.80
    assert stats.paired_t_power(0.06, 0.03, n - 1, alpha=0.05 / 4) < 0.80
    # and more than the seeds at which data of exactly this mean and spread would just pass (about 50% power)
    values = [0.06 + 0.03 * z for z in _standardized(n - 1)]
    assert stats.paired_t_p(values, [0.0] * (n - 1)) < 0.05 / 4
    assert study.seeds_needed(declared, power=0.95, at_most=200)["comparisons"][0]["seeds"] > n
    assert zero["seeds"] is None and tiny["seeds"] is None
    assert (first["arm"], first["against"]) == ("gma", "sdpa")


def _standardized(count):
    """``count`` evenly spaced numbers with mean 0 and sample standard deviation 1."""
    z = [i - (count - 1) / 2 for i in range(count)]
    scale = (sum(v * v for v in z) / (count - 1)) ** 0.5
    return [v / scale for v in z]
