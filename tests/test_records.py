"""Every recorded result file states where, when, how and from which code it was made, with a command that runs.

A reader who opens any file of :func:`gma_teach.measure.results_folder` must find the keys of
:data:`gma_teach.measure.PROVENANCE_KEYS` at its top level: the hardware, the torch threads, the machine's load
average, the date, the commit and the command. The command must name a module of this repository that still runs
as a program, so that it can be typed again.

A commit may end in ``+dirty``: tracked files had changed when the run started. Before
:func:`gma_teach.measure.git_commit` left the records' folder out of that check, a study's own saved seeds were
enough to mark every later seed of the same checkout so; those records keep the mark they were written with.
"""
import ast
import datetime
import importlib.util
import json
import re
from pathlib import Path

import pytest

from gma_teach import measure, records

ROOT = Path(__file__).resolve().parents[1]
RECORDS = sorted([*measure.results_folder().glob("*.json"),
                  *measure.results_folder().glob("*.runs/*.json")])  # a record, and each run of the run store
COMMAND = re.compile(r"python (?:-m (?P<module>[\w.]+)|(?P<script>tools/\w+\.py))(?: |$)")


def _runs_as_a_program(module: str) -> bool:
    """Whether ``python -m module`` runs this repository's code: a module with an ``if __name__ == "__main__"``
    block, or a package with a ``__main__`` module."""
    spec = importlib.util.find_spec(module)
    if spec is None or not module.startswith("gma_teach"):
        return False
    if spec.submodule_search_locations is not None:
        return importlib.util.find_spec(module + ".__main__") is not None
    tree = ast.parse(Path(spec.origin).read_text())
    return any(isinstance(node, ast.If) and "__main__" in ast.unparse(node.test) for node in tree.body)


def test_there_are_records():
    assert len(RECORDS) >= 30, measure.results_folder()


@pytest.mark.parametrize("path", RECORDS, ids=[str(path.relative_to(measure.results_folder())) for path in RECORDS])
def test_each_record_states_its_provenance_and_a_command_that_runs(path):
    record = json.loads(path.read_text())
    missing = [key for key in measure.PROVENANCE_KEYS if key not in record]
    assert not missing, f"{path.name} lacks {missing}"
    assert isinstance(record["hardware"], dict) and {"cpu", "torch", "device"} <= set(record["hardware"])
    assert isinstance(record["threads"], int) and record["threads"] >= 1
    assert record["load"] is None or (len(record["load"]) == 3 and all(value >= 0 for value in record["load"]))
    assert datetime.datetime.fromisoformat(record["date"]).tzinfo is not None
    assert re.fullmatch(r"[0-9a-f]{7,40}(\+dirty)?", record["commit"]), f"{path.name}: commit {record['commit']!r}"
    found = COMMAND.match(record["command"])
    assert found, f"{path.name}: command {record['command']!r}"
    if found["module"]:
        assert _runs_as_a_program(found["module"]), f"{path.name}: python -m {found['module']} does not run"
    else:
        assert (ROOT / found["script"]).is_file(), f"{path.name}: {found['script']} does not exist"


def test_the_command_check_tells_a_program_from_a_library_module():
    assert _runs_as_a_program("gma_teach.study") and _runs_as_a_program("gma_teach.routing_record")
    assert not _runs_as_a_program("gma_teach.measure")  # a library module: no __main__ block
    assert not _runs_as_a_program("gma_teach.diagnostics")  # a package without __main__
    assert not _runs_as_a_program("json.tool")  # runs, but is not this repository's code


def test_write_record_replaces_a_record_in_one_step(tmp_path, monkeypatch):
    path = tmp_path / "deeper" / "run.json"
    assert records.write_record(path, {"seed": 0, "folder": tmp_path}) == path
    assert json.loads(path.read_text()) == {"seed": 0, "folder": str(tmp_path)} and path.read_text().endswith("}\n")
    records.write_record(path, {"seed": 1})
    assert json.loads(path.read_text()) == {"seed": 1}

    def interrupted(source, target):  # the writer dies between writing the text and putting it in place
        raise KeyboardInterrupt

    monkeypatch.setattr(records.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        records.write_record(path, {"seed": 2})
    assert json.loads(path.read_text()) == {"seed": 1}  # the old record stands whole
    assert [p.name for p in path.parent.iterdir()] == ["run.json"]  # and no partial file is left
    with pytest.raises(TypeError, match="record must be a dict"):
        records.write_record(path, [1, 2])


def _writes_json_to_a_file(text: str) -> bool:
    """Whether a module's source dumps JSON into a file (``json.dump`` to anything but ``sys.stdout``) or makes
    JSON text and writes text files."""
    for node in ast.walk(ast.parse(text)):
        if (isinstance(node, ast.Call) and ast.unparse(node.func) == "json.dump"
                and not (len(node.args) > 1 and ast.unparse(node.args[1]) == "sys.stdout")):
            return True
    return "json.dumps(" in text and "write_text(" in text


def test_every_json_writer_of_the_package_goes_through_write_record():
    package = ROOT / "gma_teach"
    writers = [str(path.relative_to(ROOT)) for path in sorted(package.rglob("*.py"))
               if path.name != "records.py" and _writes_json_to_a_file(path.read_text())]
    assert not writers, f"JSON written outside gma_teach.records.write_record: {writers}"
    assert _writes_json_to_a_file("import json\njson.dump(record, handle, indent=1)\n")
    assert _writes_json_to_a_file("path.write_text(json.dumps(record))\n")
    assert not _writes_json_to_a_file("import json, sys\njson.dump(answers, sys.stdout)\n")


def test_git_commit_names_the_checkout_of_the_folder_it_is_given(tmp_path):
    assert records.git_commit(tmp_path) == "unknown"  # not a checkout
    here = records.git_commit(ROOT)
    assert here == "unknown" or re.fullmatch(r"[0-9a-f]{40}(\+dirty)?", here)


def test_a_process_records_the_commit_it_started_from(monkeypatch):
    """A study runs for hours, seed after seed, while the checkout moves on: every seed names the commit of the code
    the process imported, the one it first read, not the checkout's later head."""
    heads = iter(["a" * 40, "b" * 40])
    monkeypatch.setattr(records, "git_commit", lambda folder=None: next(heads))
    monkeypatch.setattr(records, "_PROCESS_COMMIT", [])
    assert [records.provenance("python -m x")["commit"] for _ in range(2)] == ["a" * 40, "a" * 40]
