"""Replay cost against job size: an N-rank job built by replicating the ranks of a job run folder.

    python benchmarks/whatif_scale.py [--whole] JOB_RUN N [N ...]

JOB_RUN is a converted job (e.g. 8 ranks of tests/jobgen.py: ``make_job(out, 8, offsets_ns=[0]*8,
drifts_ppm=[0.0]*8)`` then ``tracekit convert out/*.json -o JOB_RUN``). For each N, rank r of the
new job is a copy of rank r % n of JOB_RUN with its pids moved by 100,000 x (r // n), its NVTX
range IDs by 10^9 x (r // n) (IDs are unique in a job), and processes.rank = r (collectives keep
their sequence numbers, so all N ranks' calls match); the job's graph is built and replayed
(baseline and no-straggler) in a fresh process, and the wall time of each phase and the
process's peak RSS are printed as one JSON line per N. The graph is built in per-rank parts
(tracekit.whatif.parts, what ``tracekit whatif`` does); ``--whole`` builds it over the whole
job at once (graph.load: the baseline the parts are compared with). DuckDB's memory limit is
$TRACEKIT_MEMORY_LIMIT (default 4GB); past $TRACEKIT_WHATIF_DISK_NODES event rows (default 2 M)
the graph's arrays are in mapped files (tracekit.whatif.store): ``peak_anon_mb`` is then the
process's own memory, ``peak_rss_mb`` adds the mapped pages the kernel may drop.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from versions import versions_line  # noqa: E402

PID_STEP = 100_000
RANGE_STEP = 1_000_000_000  # added to a copy's NVTX range IDs per replica (a source has fewer)


def build(src: Path, n: int, out: Path) -> Path:
    man = json.loads((src / "manifest.json").read_text())
    base = len(man["ranks"])
    out.mkdir(parents=True)
    tables = {}
    for name in man["tables"]:
        if not (src / name).is_dir():  # a job-level file (clock_model.parquet): rows per rank
            tables[name] = _replicate_job_table(src, man["tables"][name]["files"], n, base, out)
            continue
        files = sorted((src / name).glob("rank-*.parquet"))
        (out / name).mkdir()
        rows = 0
        for r in range(n):
            t = pq.read_table(files[r % base])
            shift = PID_STEP * (r // base)
            if "pid" in t.column_names and shift:
                i = t.column_names.index("pid")
                t = t.set_column(i, "pid", pc.add(t.column("pid"), pa.scalar(shift, t.schema.field("pid").type)))
            if name == "nvtx_ranges" and shift:  # range IDs are unique in a job (steps join on them)
                for c in ("range_id", "parent_range_id"):
                    i = t.column_names.index(c)
                    t = t.set_column(i, c, pc.add(t.column(c), pa.scalar(RANGE_STEP * (r // base),
                                                                         t.schema.field(c).type)))
            if name == "processes":
                i = t.column_names.index("rank")
                t = t.set_column(i, "rank", pa.array([r] * t.num_rows, t.schema.field("rank").type))
            pq.write_table(t, out / name / f"rank-{r:05d}.parquet")
            rows += t.num_rows
        tables[name] = {"rows": rows, "files": [f"{name}/rank-{r:05d}.parquet" for r in range(n)]}
    ranks = []
    for r in range(n):
        src_rank = dict(man["ranks"][r % base])
        shift = PID_STEP * (r // base)
        src_rank.update(rank=r, pid=src_rank["pid"] + shift, pids=[p + shift for p in src_rank["pids"]])
        ranks.append(src_rank)
    man.update(run_id=f"job{n}", tables=tables, ranks=ranks, inputs=[], job={**man["job"], "ranks": n})
    (out / "manifest.json").write_text(json.dumps(man))
    return out


def _replicate_job_table(src: Path, files: list[str], n: int, base: int, out: Path) -> dict:
    """A job-level table with a ``rank`` column: rank r's rows are source rank r % base's."""
    t = pa.concat_tables([pq.read_table(src / f) for f in files])
    ranks = t.column("rank").to_numpy()
    parts = []
    for r in range(n):
        rows = t.filter(pa.array(ranks == r % base))
        parts.append(rows.set_column(t.column_names.index("rank"), "rank",
                                     pa.array([r] * rows.num_rows, t.schema.field("rank").type)))
    whole = pa.concat_tables(parts)
    pq.write_table(whole, out / files[0])
    return {"rows": whole.num_rows, "files": [files[0]]}


def measure(run: Path, whole: bool = False) -> dict:
    from tracekit.query import Engine
    from tracekit.whatif import graph as _graph
    from tracekit.whatif import load_graph, step_times
    from tracekit.whatif.replay import replay
    from tracekit.whatif.scenarios import apply, parse

    anon = _AnonPeak()
    t = time.perf_counter()
    with Engine([run], memory_limit=os.environ.get("TRACEKIT_MEMORY_LIMIT") or "4GB") as eng:
        g = _graph.load(eng.con) if whole else load_graph(eng)
    t_graph = time.perf_counter() - t
    t = time.perf_counter()
    s = replay(g)
    t_base = time.perf_counter() - t
    base = step_times(g, s)
    err = float(abs(base - g.steps.column("measured_ns").to_numpy()).max())
    passes = s.passes
    del s  # as tracekit.whatif.whatif does: one schedule at a time
    t = time.perf_counter()
    s2 = replay(g, *apply(g, parse("no-straggler")))
    t_ns = time.perf_counter() - t
    return {"method": "whole" if whole else "parts", "nodes": g.n, "steps": g.steps.num_rows,
            "graph_s": round(t_graph, 2),
            "baseline_s": round(t_base, 2), "baseline_passes": passes,
            "no_straggler_s": round(t_ns, 2), "no_straggler_passes": s2.passes,
            "max_baseline_error_ns": err,
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            "peak_anon_mb": anon.stop(), "on_disk": g.store.disk}


class _AnonPeak:
    """The process's peak anonymous memory (RssAnon of /proc/self/status, sampled every 20 ms, in
    MiB): its own memory, without the pages of mapped files (tracekit.whatif.store) that the
    kernel may write back and drop. None where /proc is not there."""

    def __init__(self):
        import threading

        self.peak, self._done = 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._done.wait(0.02):
            try:
                text = Path("/proc/self/status").read_text()
            except OSError:
                self.peak = None
                return
            kb = next(int(ln.split()[1]) for ln in text.splitlines() if ln.startswith("RssAnon:"))
            self.peak = max(self.peak, kb)

    def stop(self):
        self._done.set()
        self._thread.join()
        return None if self.peak is None else round(self.peak / 1024)


def main(argv: list[str]) -> None:
    if argv and argv[0] == "--measure":
        print(json.dumps({"ranks": int(argv[2]), **measure(Path(argv[1]), argv[3:] == ["--whole"])}),
              flush=True)
        return
    whole = argv[:1] == ["--whole"]
    argv = argv[1:] if whole else argv
    src, sizes = Path(argv[0]), [int(a) for a in argv[1:]]
    print(versions_line(), flush=True)
    tmp = Path(tempfile.mkdtemp(prefix="tracekit-whatif-scale-"))
    try:
        for n in sizes:
            run = build(src, n, tmp / f"job{n}")
            subprocess.run([sys.executable, __file__, "--measure", str(run), str(n)]
                           + (["--whole"] if whole else []), check=True)
            shutil.rmtree(run)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
