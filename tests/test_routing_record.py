"""Chapter 11's routing record from the command line (tiny sizes): the report, the untrained control, provenance."""
import json

import pytest

from gma_teach import routing_record
from gma_teach.runs import arm, chapter_runs  # the code behind the commands, patched here
from gma_teach.runs import routing_record as runner


@pytest.fixture(autouse=True)
def _small(tmp_path, monkeypatch):
    monkeypatch.setenv("GMA_TEACH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CI", "1")
    real = chapter_runs.preset

    def smaller(name, scale_name=None):
        p = real(name, scale_name)
        if name == "lm":
            p.tokenizer, p.max_train_tokens, p.max_val_tokens, p.n_steps, p.eval_every = "bytes", 6000, 2000, 4, 2
        if name == "ch11":
            p.n_tokens, p.n_shuffles = 256, 3
        return p

    monkeypatch.setattr(chapter_runs, "preset", smaller)
    monkeypatch.setattr(arm, "preset", smaller)
    monkeypatch.setattr(runner, "preset", smaller)


def test_main_writes_the_routing_record(tmp_path, capsys):
    out = tmp_path / "routing.json"
    record = routing_record.main(["--scale", "tiny", "--out", str(out)])
    saved = json.loads(out.read_text())
    assert saved["report"]["metrics"]["n_tokens"] >= 256 and saved["scale"] == "tiny"
    assert saved["untrained_control"]["metrics"]["n_components"] == saved["report"]["metrics"]["n_components"]
    assert saved["tokenizer"].startswith("bytes") and saved["command"].endswith(str(out))
    for key in ("hardware", "threads", "load", "date", "commit"):
        assert key in saved
    assert record["layer"] == saved["layer"] == 0 and json.loads(capsys.readouterr().out)["scale"] == "tiny"
