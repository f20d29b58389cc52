"""Synchronization tracks of the timeline sit on the GPU of their CUDA context (issue 28): nsys
records device 0 for every sync; CUPTI's stream 0xFFFFFFFF (event, context-wide syncs) is named
as the context's, not as 'stream 4294967295'."""

from __future__ import annotations

import json

from tracekit.cli import run as cli
from tracekit.query.engine import Engine


def _sync_tracks(run, tmp_path):
    out = tmp_path / "t.json"
    assert cli(["timeline", str(run), "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    return sorted({e["args"]["name"] for e in events
                   if e.get("name") == "thread_name" and "synchronization" in e["args"]["name"]})


def test_context_syncs_on_the_second_gpu(nsys_run, tmp_path):
    # the Jacobi solver on devices 0 and 3: contexts 1 and 2, event syncs only
    assert _sync_tracks(nsys_run("nsys2020.5_2xv100_p2p_nvlink"), tmp_path) == [
        "GPU 0 context synchronization", "GPU 3 context synchronization"]


def test_stream_syncs_on_the_gpu_that_runs_the_stream(nsys_run, tmp_path):
    run = nsys_run("nsys2026_h100_2gpu_pytorch_slice")
    tracks = _sync_tracks(run, tmp_path)
    assert tracks == [f"GPU {d} stream {s} synchronization"
                      for d, s in ((0, 22), (0, 26), (0, 7), (1, 15), (1, 30), (1, 34))]
    with Engine([run]) as eng:  # each of those streams ran its GPU work on that device
        rows = eng.sql("SELECT DISTINCT device_id, stream_id FROM kernels "
                       "UNION SELECT DISTINCT device_id, stream_id FROM memcpy").to_pylist()
    on = {(r["device_id"], r["stream_id"]) for r in rows}
    assert {(1, 15), (0, 7)} <= on and (0, 15) not in on
