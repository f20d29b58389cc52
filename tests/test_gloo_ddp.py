"""One real Gloo DDP job (issue 35): 2 ranks on 127.0.0.1 under the PyTorch profiler, rank 1 doing
150 ms of real extra compute in ``record_function("extra_work")`` before every backward
(benchmarks/gloo_ddp.py, which also runs the full sweep against clean twins). What tracekit says
about it is checked against the raw Kineto JSON, read here with ``json``: the late rank is named,
the delay it caused per step is the extra work within what the machine's noise allows, and the
study's exposed communication is the Gloo time no operator of the rank covers, recounted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tracekit.query import Engine

ROOT = Path(__file__).resolve().parent.parent
EXTRA_MS = 150.0
pytestmark = pytest.mark.slow
torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def job(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("gloo") / "job"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gloo_ddp.py"), "job", str(out), "--nproc", "2",
                    "--extra-ms", str(EXTRA_MS), "--steps", "6"], check=True, capture_output=True, timeout=600)
    return out


def _events(path: Path) -> list[dict]:
    return [e for e in json.loads(path.read_text())["traceEvents"] if e.get("ph") == "X"]


def _union(iv):
    out = []
    for a, b in sorted(iv):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def _uncovered(a_union, b_union) -> float:
    """Length of the union ``a_union`` outside the union ``b_union``."""
    total = 0.0
    for a, b in a_union:
        cur = a
        for c, d in b_union:
            if d <= cur or c >= b:
                continue
            total += max(0.0, c - cur)
            cur = max(cur, d)
        total += max(0.0, b - cur)
    return total


def _span(e):
    return float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))


def test_the_late_rank_is_named_with_its_delay(job):
    extra = [e["dur"] * 1e3 for e in _events(job / "rank1.json") if e["name"] == "extra_work"]
    assert len(extra) == 6 and min(extra) >= EXTRA_MS * 1e6
    with Engine([job / "run"]) as eng:
        rows = {r["rank"]: r for r in eng.query("stragglers").to_pylist()}
    # one host: one clock (PyTorch's own host_name), so the bound is 0, not unknown
    assert rows[1]["bound_ns"] == rows[0]["bound_ns"] == 0
    assert rows[1]["straggler"] and not rows[0]["straggler"]
    assert rows[1]["last_arrivals"] >= 0.9 * rows[1]["collectives"]
    # DDP's buckets wait for rank 1 together: counted once, the delay per step is the extra work
    # (the machine's noise: +-35 %), not a multiple of it
    per_step = rows[1]["delay_caused_per_step_ns"]
    mean_extra = sum(extra) / len(extra)
    assert 0.65 * mean_extra <= per_step <= 1.35 * mean_extra, (per_step, mean_extra)


def test_exposed_gloo_time_is_recounted_from_the_raw_trace(job):
    want = []
    for rank in (0, 1):
        ev = _events(job / f"rank{rank}.json")
        gloo = [e for e in ev if e["name"].startswith("gloo:")]
        gloo_tids = {e["tid"] for e in gloo}
        ops = _union([_span(e) for e in ev if e.get("cat") == "cpu_op" and not e["name"].startswith("c10d::")
                      and e["tid"] not in gloo_tids])
        for s0, s1 in sorted(_span(e) for e in ev if e["name"].startswith("step ")):
            g = _union([(max(a, s0), min(b, s1)) for a, b in map(_span, gloo) if min(b, s1) > max(a, s0)])
            want.append(_uncovered(g, ops) * 1e3)  # us -> ns
    with Engine([job / "run"]) as eng:
        got = [r["comm_ns"] for r in eng.query("study_step_phases").to_pylist()]
    assert len(got) == len(want) == 12
    assert sum(want) > 0.5 * EXTRA_MS * 1e6 * 6  # rank 0 waits about the extra work every step
    # Kineto's microsecond floats against the Parquet's nanoseconds
    assert sum(got) == pytest.approx(sum(want), rel=0.01)


def _top_ops(ev: list[dict], skip_tids: set) -> list[dict]:
    """The cpu_op events no other cpu_op of their thread encloses (the graph's host nodes)."""
    out, reach = [], {}
    for e in sorted((e for e in ev if e.get("cat") == "cpu_op" and e["tid"] not in skip_tids),
                    key=lambda e: (e["pid"], e["tid"], float(e["ts"]), -float(e.get("dur", 0)))):
        a, b = _span(e)
        key = (e["pid"], e["tid"])
        if key not in reach or b > reach[key]:
            if key not in reach or a >= reach[key]:
                out.append(e)
            reach[key] = max(reach.get(key, b), b)
    return out


def test_whatif_acts_on_the_gloo_job(job):
    """Issue 35 items 1 and 3: the graph of the CPU ranks holds every Gloo range as a collective
    matched across the ranks and handed over by its c10d call; the baseline is exact;
    no-straggler gives back about the extra work (this machine's noise: 0.4-1.6 x; before the
    graph of a CPU run had step marks only and every saving was 0); ops:.=F scales the top
    operators' time, recounted from the JSON; the critical path names `extra_work` with its
    recorded time in every step."""
    from tracekit.whatif import load_graph, notes, whatif

    ev = {r: _events(job / f"rank{r}.json") for r in (0, 1)}
    gloo = {r: [e for e in ev[r] if e["name"].startswith("gloo:")] for r in ev}
    with Engine([job / "run"]) as eng:
        g = load_graph(eng)
        out = whatif(eng, ["baseline", "no-straggler", "ops:.=0.5"])
        names = eng.query("critical_path_names").to_pylist()
    calls = sum(len(v) for v in gloo.values())
    assert g.counts["collective_calls"] == calls == g.counts["wait:gloo start"]
    assert g.counts["instances"] == len(gloo[0]) == len(gloo[1])
    assert g.counts.get("wait:gloo wait", 0) > 0
    rows = out.to_pylist()
    assert all(r["baseline_err_pct"] == 0 for r in rows if r["scenario"] == "baseline")
    extra = {}
    for e in ev[1]:
        if e["name"] == "extra_work":
            step = next(s["name"] for s in ev[1] if s["name"].startswith("step ")
                        and _span(s)[0] <= _span(e)[0] < _span(s)[1])
            extra[int(step.split()[1])] = float(e["dur"]) * 1e3
    saved = sorted(r["saved_ns"] for r in rows if r["scenario"] == "no-straggler")
    mean_extra = sum(extra.values()) / len(extra)
    assert 0.4 * mean_extra <= saved[len(saved) // 2] <= 1.6 * mean_extra, (saved, mean_extra)
    top = [e for r in ev for e in _top_ops(ev[r], {x["tid"] for x in gloo[r]})]
    every = [e for r in ev for e in ev[r] if e.get("cat") == "cpu_op" and e["tid"] not in {x["tid"] for x in gloo[r]}]
    ms = sum(float(e["dur"]) for e in top) / 1e3
    line = next(x for x in notes(out) if x.startswith("ops:.=0.5 scales"))
    assert line.startswith(f"ops:.=0.5 scales {len(every):,} operators of {len({e['name'] for e in every})} names (")
    assert float(line.split("(")[1].split(" ms")[0].replace(",", "")) == pytest.approx(ms, rel=1e-4)
    got = {r["step"]: r["time_ns"] for r in names if r["name"] == "extra_work" and r["source"] == "range"}
    assert set(got) == set(extra)
    # Under load the walk sometimes gives the first 0.9-2.1 ms of extra_work (0.6-1.4 %) to a
    # collective: the host gap before extra_work's first operator "holds" the replayed end of a
    # transfer rank 1 waited in, though no recorded gloo range is open there (an open question,
    # stop 49's notes). The bound allows 2 % for it; the rest is extra_work's own time.
    for step, dur in extra.items():
        assert 0.98 * dur <= got[step] <= dur * 1.0001, (step, got[step], dur)
