"""The benchmark script runs (at quick sizes) and records its provenance; its speed targets are not unit tests."""
import json

from gma_teach import bench


def test_quick_benchmark_writes_table_and_provenance(tmp_path, capsys):
    out = tmp_path / "bench.json"
    rows = bench.main(["--quick", "--json", str(out)])
    table = capsys.readouterr().out
    assert "causal mixing: chunked vs cumsum" in table and "GMA linear vs SDPA" in table
    record = json.loads(out.read_text())
    assert {"hardware", "date", "commit", "command", "rows"} <= set(record)
    assert len(record["rows"]) == len(rows) == 4
    for row in rows:
        assert row.fast_ms > 0 and row.slow_ms > 0
        assert row.holds is None, "quick sizes are not the targets' sizes"
    causal = next(row for row in rows if row.comparison.startswith("causal"))
    assert 0 < causal.memory_ratio < 1, "the chunked form must hold less than the materialized cumsum"
