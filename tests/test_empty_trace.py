"""An empty or event-less PyTorch-profiler trace is an error (issue 28): exit 2, one line naming
the file, no run folder written."""

from __future__ import annotations

import json

import pytest

from tracekit.cli import run as cli


@pytest.mark.parametrize("doc", [
    {"traceEvents": []},
    {"traceEvents": [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}}],
     "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-40GB"}]},
])
def test_event_less_kineto_trace_is_an_error(tmp_path, capsys, doc):
    src = tmp_path / "trace.json"
    src.write_text(json.dumps(doc))
    out = tmp_path / "run"
    assert cli(["convert", str(src), "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "trace.json: holds no profiler events" in err[0]
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["trace.json"]
