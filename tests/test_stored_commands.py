"""Every command a record of book/results stores still parses with today's command line, and so does the command
that re-runs one of its seeds (gma_teach.experiments reproduce). Nothing here trains at a study's size: the
parsers run and stop (argparse's parse_args is replaced by one that parses and raises), and the one end-to-end
reproduction below runs the recall study's path at a few steps of a tiny copy of its design."""
import argparse
import importlib.util
import json
import shlex
from pathlib import Path
from types import SimpleNamespace

import pytest

from gma_teach import bench, experiments, measure, profiling, record_gpu, routing_record, study
from gma_teach.designs import RECALL_STUDY, RENAMED_ARMS, STUDIES
from gma_teach.runs import reproduce as reproducing

ROOT = Path(__file__).resolve().parents[1]


def _tool_main(name):
    spec = importlib.util.spec_from_file_location(f"tools_{Path(name).stem}", ROOT / name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


ENTRY_POINTS = {"gma_teach.study": study.main, "gma_teach.experiments": experiments.main,
                "gma_teach.bench": bench.main, "gma_teach.profiling": profiling.main,
                "gma_teach.routing_record": routing_record.main, "gma_teach.record_gpu": record_gpu.main,
                "tools/build_book.py": lambda argv: _tool_main("tools/build_book.py")(argv),
                "tools/time_chapters.py": lambda argv: _tool_main("tools/time_chapters.py")(argv)}
"""What runs a stored command: ``python -m MODULE ...`` or ``python tools/NAME.py ...``."""


class Parsed(Exception):
    def __init__(self, prog, namespace):
        super().__init__(prog)
        self.prog, self.namespace = prog, namespace


@pytest.fixture
def parse_only(monkeypatch):
    """``parse(words)``: the namespace today's command line makes of a stored command, run no further."""
    original = argparse.ArgumentParser.parse_args

    def parse_and_stop(self, args=None, namespace=None):
        raise Parsed(self.prog, original(self, args, namespace))

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_and_stop)

    def parse(words: list[str]) -> argparse.Namespace:
        if words[:2] == ["python", "-m"]:
            entry, args = words[2], words[3:]
        else:
            assert words[0] == "python" and len(words) > 1, words
            entry, args = words[1], words[2:]
        assert entry in ENTRY_POINTS, f"no entry point known for {entry!r}"
        try:
            ENTRY_POINTS[entry](args)
        except Parsed as parsed:
            return parsed.namespace
        raise AssertionError(f"{shlex.join(words)} ran past its parser")

    return parse


def stored_records():
    return [(path, json.loads(path.read_text())) for path in sorted(measure.results_folder().glob("*.json"))]


def stored_commands(record: dict) -> set[str]:
    commands = {record["command"]} if record.get("command") else set()
    for run in record.get("runs") or []:
        command = run.get("provenance", {}).get("command") if isinstance(run, dict) else None
        commands |= {command} if command else set()
    return commands


def _check_study_arms(namespace):
    """The study command line takes any arm names and refuses unknown ones only after parsing: check them here."""
    if getattr(namespace, "study", None) in STUDIES and namespace.arms:
        study = STUDIES[namespace.study]
        renamed = RENAMED_ARMS.get(study["name"], {})  # the command line takes an arm's old name
        unknown = {renamed.get(arm, arm) for arm in namespace.arms} - set(study["arms"])
        assert not unknown, f"arms {sorted(unknown)} are no longer arms of study {namespace.study!r}"


def test_every_record_stores_a_command_that_still_parses(parse_only):
    records = stored_records()
    assert len(records) > 50
    checked = 0
    for path, record in records:
        commands = stored_commands(record)
        assert commands, f"{path.name} stores no command"
        for command in commands:
            try:
                namespace = parse_only(shlex.split(command))
            except SystemExit as error:
                raise AssertionError(f"{path.name}: {command!r} no longer parses ({error})") from None
            _check_study_arms(namespace)
            checked += 1
    assert checked >= len(records)


def test_every_recorded_seed_re_runs_through_a_command_that_parses(parse_only):
    studies_seen = set()
    for path, record in stored_records():
        command = str(record.get("command", ""))
        if not (record.get("runs") and command.startswith(("python -m gma_teach.experiments",
                                                           "python -m gma_teach.study"))):
            continue
        for seed in sorted({run["seed"] for run in record["runs"]}):
            words = reproducing.reproduce_command(record, seed, "D")
            namespace = parse_only(["python", *words[1:]])
            if words[2] == "gma_teach.experiments":
                assert (namespace.experiment, namespace.mixer) == (record["experiment"], record["mixer"]), path.name
                assert namespace.seeds == seed + 1 and namespace.out == str(Path("D") / reproducing.REPRODUCED_FILE)
                studies_seen.add(record["experiment"])
                continue
            assert namespace.seeds == [seed] and namespace.out_dir == "D", (path.name, words)
            assert namespace.arms == [record["arm"]], (path.name, words)  # one arm, the record's own
            if record.get("width") is not None:
                assert namespace.widths == [record["width"]], (path.name, words)
            else:
                assert STUDIES[namespace.study]["name"] == record["study"], (path.name, namespace.study)
                _check_study_arms(namespace)
            studies_seen.add(record["study"])
    assert {"listops", "lm", "listops_lra", "lm_study", "recall", "routing_collapse", "routing_collapse_cause",
            "text_standin"} <= studies_seen, studies_seen


def test_a_study_command_that_ran_several_arms_re_runs_only_the_records_arm_and_width():
    stored = "python -m gma_teach.study recall --widths 64 128 --arms sdpa linear --out-dir /x --progress"
    record = {"arm": "linear", "width": 128, "runs": [{"seed": 0, "provenance": {"command": stored}}]}
    words = reproducing.reproduce_command(record, 0, "D")
    assert words[2:] == ["gma_teach.study", "recall", "--progress", "--arms", "linear", "--widths", "128",
                         "--seeds", "0", "--out-dir", "D"]
    record = {"arm": "gma", "runs": [{"seed": 3}], "command": "python -m gma_teach.study text --arms gma linear"}
    assert reproducing.reproduce_command(record, 3, "D")[2:] == ["gma_teach.study", "text", "--arms", "gma",
                                                                  "--seeds", "3", "--out-dir", "D"]


def test_a_seed_made_through_a_shared_arm_re_runs_through_the_study_that_owns_the_record():
    """The LM study's K=64 arms are recorded by the collapse study (``shared_with``): a seed that ``study lm`` made
    re-runs as ``study collapse`` with the record's own arm, which trains the same run."""
    stored = "python -m gma_teach.study lm --arms gma_k128 gma_k64 --seeds 3 4 --out-dir /x"
    record = {"study": "routing_collapse", "arm": "default", "runs": [{"seed": 3, "provenance": {"command": stored}}]}
    assert reproducing.reproduce_command(record, 3, "D")[2:] == ["gma_teach.study", "collapse", "--arms", "default",
                                                                  "--seeds", "3", "--out-dir", "D"]
    assert STUDIES["lm"]["overrides"] == STUDIES["collapse"]["overrides"]
    assert STUDIES["collapse"]["arms"]["default"] == STUDIES["lm"]["arms"]["gma_k64"]


def test_a_recall_run_is_compared_on_its_final_numbers():
    recorded = {"seed": 1, "lr": 3e-3, "final_train_loss": 0.5, "val_mean": 0.75, "test_mean": 0.5,
                "val_accuracy": {"4": 1.0, "8": 0.5}, "test_accuracy": {"4": 0.75, "8": 0.25}, "cpu_seconds": 9.0}
    again = {**recorded, "test_accuracy": {"4": 0.75, "8": 0.5}, "cpu_seconds": 7.0}
    rows = {row["name"]: row for row in reproducing.compare_seed(recorded, again)}
    assert set(rows) == {"final_train_loss", "val_mean", "test_mean", "val_accuracy 4", "val_accuracy 8",
                         "test_accuracy 4", "test_accuracy 8"}  # times are not compared
    assert rows["test_accuracy 8"]["difference"] == 0.25 and rows["val_mean"]["difference"] == 0.0


def test_a_recall_record_is_reproduced_number_for_number(tmp_path, monkeypatch):
    """The path `experiments reproduce` takes for a recall record, end to end, on a tiny copy of the design (3 steps,
    a 16-token task): the re-run command narrowed to the record's arm and width runs in this process, through the
    study's command line, and every compared number comes back equal."""
    tiny = RECALL_STUDY.with_changes(setting=dict(seq_len=16, vocab_size=32, kv_pairs=(2, 3), n_train=64, n_val=16,
                                                  n_test=16, steps=3, warmup=1, batch_size=8),
                                     learning_rates=(1e-3, 3e-3), seeds=(0, 1), widths=(16,))
    monkeypatch.setitem(STUDIES, "recall", tiny)
    records = tmp_path / "records"
    study.main(["recall", "--arms", "linear", "sdpa", "--widths", "16", "--out-dir", str(records)])
    ran = []

    def run_here(command, check, env):  # the subprocess reproduce() starts, run in this process instead
        assert command[2] == "gma_teach.study" and check
        ran.append(command[3:])
        study.main(command[3:])

    monkeypatch.setattr(reproducing, "subprocess", SimpleNamespace(run=run_here))
    path = study.record_path(tiny, "linear", records, width=16)
    result = reproducing.reproduce(path, seed=1, out_dir=tmp_path / "again")
    assert ran == [["recall", "--arms", "linear", "--widths", "16", "--seeds", "1", "--out-dir",
                    str(tmp_path / "again")]]
    assert study.load_arm(tiny, "sdpa", tmp_path / "again", width=16) is None  # only the record's arm
    names = [row["name"] for row in result["rows"]]
    assert "test_mean" in names and "test_accuracy 2" in names
    assert all(row["difference"] == 0 for row in result["rows"]), result["rows"]


def test_the_profiling_records_command_gives_the_sizes_it_recorded(parse_only):
    """The sweep a profiling record's stored command runs today is the sweep the record holds (its lengths beyond
    the chapter's live cell given on the command line)."""
    for path, record in stored_records():
        if not record.get("command", "").startswith("python -m gma_teach.profiling"):
            continue
        args = parse_only(shlex.split(record["command"]))
        if args.block:  # the equal-state block run: its lengths and rounds
            given = {"seq_lens": list(args.seq_lens or profiling.BLOCK_SEQ_LENS), "repeat": args.repeat,
                     "long_repeat": args.long_repeat, "breakdown_len": args.breakdown_len}
            assert {key: record["config"][key] for key in given} == given, path.name
            continue
        config = profiling.sweep_config(args.scale, mixers=args.mixers, seq_lens=args.seq_lens,
                                        softmax_max_len=args.softmax_max_len)
        assert config == record["config"], path.name


def test_an_old_arm_name_runs_as_its_new_one(capsys):
    """A stored command that names an arm by its name before the rename (designs.RENAMED_ARMS) runs that arm."""
    study.main(["listops-lra", "--arms", "gma_remedy", "--summary"])
    assert "arm 'gma_remedy' of listops_lra is now named 'gma_var_bal'" in capsys.readouterr().out
