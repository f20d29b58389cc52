"""Detected steps that look like layers get a note (issue 28): a kernel sequence repeated inside one
long host range (a vLLM forward pass and its decoder layers) is flagged, training iterations not."""

from __future__ import annotations

from tracekit.query.engine import Engine


def _layers(run_factory, repeats=12):
    ks, t = [], 1000
    for _ in range(repeats):
        t += 500
        for n in ("a", "b", "c"):
            ks.append((t, t + 100, n))
            t += 150
    return run_factory({
        "kernels": {"start_ns": [k[0] for k in ks], "end_ns": [k[1] for k in ks],
                    "duration_ns": [100] * len(ks), "device_id": [0] * len(ks), "pid": [1] * len(ks),
                    "stream_id": [7] * len(ks), "name": [k[2] for k in ks]},
        "nvtx_ranges": {"start_ns": [0], "end_ns": [t + 1000], "duration_ns": [t + 1000], "pid": [1],
                        "tid": [1], "name": ["execute_model"], "style": ["push/pop"], "domain": [""],
                        "range_id": [1], "depth": [0]},
    })


def test_repeats_inside_one_range_are_flagged(run_factory):
    run = _layers(run_factory)
    with Engine([run]) as eng:
        rows = eng.query("step_summary").to_pylist()
        notes = eng.notices
    # 11 steps of 950 ns, the last one to its last kernel's end (400 ns): 10850 / 12 = 904.2 ns;
    # the range spans 0 .. 13400 ns (12400 after the last kernel's slot, + 1000)
    assert len(rows) == 12 and sorted({r["wall_ns"] for r in rows}) == [400, 950]
    assert notes == [('step_summary: run run1, pid 1: the 12 detected steps (0.9 µs each on average) '
                     'all lie inside one NVTX range, "execute_model" (13.4 µs): they may be the layers '
                     'of one pass, not training steps; --step-pattern REGEX names the real steps')]


def test_training_iterations_of_a_real_trace_are_not_flagged(nsys_run):
    with Engine([nsys_run("nsys2026_h100_2gpu_pytorch_slice")]) as eng:
        rows = eng.query("step_summary").to_pylist()
        assert len(rows) == 48 and eng.notices == []
