"""Real Gloo DDP jobs as the proof of tracekit's predictions (issue 35).

    python benchmarks/gloo_ddp.py [--ranks 2,4] [--extra-ms 20,50,100] [--repeats 3] [--work DIR]
    python benchmarks/gloo_ddp.py job OUT --nproc 2 --extra-ms 50   # one job, converted into OUT/run

Each *job* is N processes on 127.0.0.1 (PyTorch DDP, Gloo backend, one intra-op thread per rank),
training a small MLP under the PyTorch profiler: warm-up steps, then measured steps in
`step N` ranges (each rank writes OUT/rank{N}.json with its host name, as `tracekit collect`
does). With ``--extra-ms X`` the last rank does X ms of real extra compute (matrix products
until X ms of wall time have passed) inside ``record_function("extra_work")`` before
``backward`` in every step; its *clean twin* is the same job with X = 0. The traces are
converted (`tracekit convert OUT/rank*.json -o OUT/run`), and

- **measured**: the straggler's effect per step = median over measured steps and ranks of the
  step time of the job minus that of its clean twin (the trace's `step N` ranges, as whatif's
  ``measured_ns``);
- **predicted**: `tracekit whatif OUT/run -s no-straggler`: median over steps and ranks of
  baseline_ns - predicted_ns; `tracekit query stragglers OUT/run`: the late rank's
  ``straggler`` and ``delay_caused_ns`` per step (÷ measured steps).

Each (ranks, X) is run ``--repeats`` times (job and twin alternating, so load drifts hit both);
the table gives the median and the spread (min-max) over the repeats. Results go to
WORK/results_gloo_ddp.json and to stdout as a Markdown table (docs/whatif.md "Validation against
real reruns" holds one run's table, with the load it ran under).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRACEKIT = [sys.executable, "-m", "tracekit"]


# ------------------------------------------------------------------------- one rank (worker)
def worker(out: Path, rank: int, world: int, extra_ms: float, steps: int, warmup: int, width: int) -> None:
    """One rank of the job (run in its own process with MASTER_ADDR/PORT set)."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    layers = []
    for _ in range(4):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    # 1 MB buckets: the gradients all-reduce in several buckets, on Gloo's worker threads
    model = DDP(torch.nn.Sequential(*layers, torch.nn.Linear(width, 10)), bucket_cap_mb=1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(rank)
    a = torch.randn(64, 64, generator=gen)
    prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
    for i in range(warmup + steps):
        if i == warmup:
            prof.start()
        x = torch.randn(32, width, generator=gen)
        y = torch.randint(0, 10, (32,), generator=gen)
        with torch.profiler.record_function(f"step {i}"):
            loss = torch.nn.functional.cross_entropy(model(x), y)
            if extra_ms > 0:
                with torch.profiler.record_function("extra_work"):
                    t_end = time.perf_counter() + extra_ms / 1e3
                    while time.perf_counter() < t_end:
                        a = torch.tanh(a @ a)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    prof.stop()
    prof.add_metadata_json("hostname", json.dumps(socket.gethostname()))
    prof.export_chrome_trace(str(out / f"rank{rank}.json"))
    dist.barrier()
    dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_job(out: Path, nproc: int, extra_ms: float, *, steps: int = 8, warmup: int = 3, width: int = 512,
            timeout: float = 300) -> Path:
    """Launch one job of ``nproc`` ranks (the last rank does ``extra_ms`` extra per step), convert
    its traces; returns the run folder OUT/run."""
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("rank*.json"):
        old.unlink()
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()),
               OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    procs = []
    for r in range(nproc):
        x = extra_ms if r == nproc - 1 else 0.0
        procs.append(subprocess.Popen(
            [sys.executable, __file__, "_worker", str(out), str(r), str(nproc), str(x), str(steps),
             str(warmup), str(width)], env=env))
    deadline = time.monotonic() + timeout
    try:
        for p in procs:
            rc = p.wait(timeout=max(1.0, deadline - time.monotonic()))
            if rc != 0:
                raise RuntimeError(f"rank process exited {rc}")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    run = out / "run"
    subprocess.run(TRACEKIT + ["convert", *map(str, sorted(out.glob("rank*.json"))), "-o", str(run),
                               "--force"], check=True, capture_output=True, text=True)
    return run


# ------------------------------------------------------------------------------ analysis
def _json_rows(args: list[str]) -> list[dict]:
    p = subprocess.run(TRACEKIT + args + ["-f", "json"], check=True, capture_output=True, text=True)
    return json.loads(p.stdout)


def analyze(run: Path, late_rank: int) -> dict:
    """What tracekit says about one converted job: measured step (median over steps and ranks),
    no-straggler's predicted saving, the late rank's straggler verdict and delay per step."""
    wi = _json_rows(["whatif", str(run), "-s", "no-straggler"])
    steps = sorted({r["step"] for r in wi})
    st = {r["rank"]: r for r in _json_rows(["query", "stragglers", str(run)])}
    late = st.get(late_rank, {})
    return {
        "steps": len(steps),
        "measured_step_ns": statistics.median(r["measured_ns"] for r in wi),
        "no_straggler_saving_ns": statistics.median(r["baseline_ns"] - r["predicted_ns"] for r in wi),
        # the total: a step that saves nothing counts here, not in the median
        "no_straggler_mean_saving_ns": statistics.mean(r["baseline_ns"] - r["predicted_ns"] for r in wi),
        "straggler": bool(late.get("straggler")),
        "any_straggler": any(bool(r.get("straggler")) for r in st.values()),
        "delay_caused_per_step_ns": (late.get("delay_caused_ns") or 0) / max(1, len(steps)),
    }


def _spread(values: list[float]) -> tuple[float, float, float]:
    return statistics.median(values), min(values), max(values)


def sweep(args) -> dict:
    """Run (unless ``--analyze-only``: the folders of an earlier sweep) and analyze every job:
    per rank count and repeat, the clean twin first, then each X."""
    work = args.work
    res = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
           "load": os.getloadavg(), "cpus": os.cpu_count(), "cases": []}
    folders = {}
    for i in range(args.repeats):
        for n in args.ranks:
            for x in [0.0, *args.extra_ms]:
                d = work / f"n{n}_x{x:g}_r{i}"
                folders[(n, x, i)] = d / "run" if args.analyze_only else \
                    run_job(d, n, x, steps=args.steps)
                print(f"ran {d.name}", flush=True)
    res["load_after_runs"] = os.getloadavg()
    for n in args.ranks:
        for x in args.extra_ms:
            reps = []
            for i in range(args.repeats):
                clean, late = analyze(folders[(n, 0.0, i)], n - 1), analyze(folders[(n, x, i)], n - 1)
                late["extra_work_ns"] = extra_work_ns(folders[(n, x, i)])
                reps.append({"clean": clean, "late": late,
                             "measured_effect_ns": late["measured_step_ns"] - clean["measured_step_ns"]})
                print(f"ranks {n} X {x:g} ms #{i}: effect {reps[-1]['measured_effect_ns'] / 1e6:.1f} ms, "
                      f"no-straggler {late['no_straggler_saving_ns'] / 1e6:.1f} ms, "
                      f"delay/step {late['delay_caused_per_step_ns'] / 1e6:.1f} ms "
                      f"(extra_work {late['extra_work_ns'] / 1e6:.1f} ms), "
                      f"straggler {late['straggler']} (twin: {clean['any_straggler']})", flush=True)
            res["cases"].append({"ranks": n, "extra_ms": x, "repeats": reps})
    return res


def extra_work_ns(run: Path) -> float:
    """Mean duration of the run's `extra_work` ranges (the real extra work per step), read from
    the Parquet run folder."""
    import duckdb

    q = f"SELECT avg(end_ns - start_ns) FROM read_parquet('{run}/nvtx_ranges/*.parquet') WHERE name = 'extra_work'"
    return float(duckdb.sql(q).fetchall()[0][0] or 0.0)


def table(res: dict) -> str:
    """The Markdown table of a sweep: per (ranks, X), median [min-max] over the repeats."""
    def ms(vals):
        m, lo, hi = _spread([v / 1e6 for v in vals])
        return f"{m:.1f} [{lo:.1f}, {hi:.1f}]"

    def pct(num, den):
        m, lo, hi = _spread([100 * r["late"][num] / r["late"][den] for r in reps])
        return f"{m:.0f} [{lo:.0f}, {hi:.0f}]"

    lines = ["| ranks | extra ms | extra_work ms | measured effect ms | no-straggler ms | error % "
             "| no-straggler / extra_work % | mean saving / extra_work % "
             "| delay_caused/step ms | straggler (late / twins) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for c in res["cases"]:
        reps = c["repeats"]
        eff = [r["measured_effect_ns"] for r in reps]
        pred = [r["late"]["no_straggler_saving_ns"] for r in reps]
        err = 100 * (statistics.median(pred) - statistics.median(eff)) / statistics.median(eff)
        verdict = (f"{sum(r['late']['straggler'] for r in reps)}/{len(reps)} true / "
                   f"{sum(not r['clean']['any_straggler'] for r in reps)}/{len(reps)} false")
        lines.append(f"| {c['ranks']} | {c['extra_ms']:g} | {ms([r['late']['extra_work_ns'] for r in reps])} | "
                     f"{ms(eff)} | {ms(pred)} | {err:+.1f} | "
                     f"{pct('no_straggler_saving_ns', 'extra_work_ns')} | "
                     f"{pct('no_straggler_mean_saving_ns', 'extra_work_ns')} | "
                     f"{ms([r['late']['delay_caused_per_step_ns'] for r in reps])} | {verdict} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "_worker":
        o, r, w, x, s, wu, width = argv[1:8]
        worker(Path(o), int(r), int(w), float(x), int(s), int(wu), int(width))
        return 0
    if argv and argv[0] == "job":
        p = argparse.ArgumentParser(prog="gloo_ddp.py job")
        p.add_argument("out", type=Path)
        p.add_argument("--nproc", type=int, default=2)
        p.add_argument("--extra-ms", type=float, default=0.0)
        p.add_argument("--steps", type=int, default=8)
        a = p.parse_args(argv[1:])
        print(run_job(a.out, a.nproc, a.extra_ms, steps=a.steps))
        return 0
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", type=lambda s: [int(v) for v in s.split(",")], default=[2, 4])
    p.add_argument("--extra-ms", type=lambda s: [float(v) for v in s.split(",")], default=[20.0, 50.0, 100.0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--work", type=Path, default=ROOT / "benchmarks" / "work" / "gloo_ddp")
    p.add_argument("--analyze-only", action="store_true", help="Analyze the jobs of an earlier sweep in WORK.")
    a = p.parse_args(argv)
    res = sweep(a)
    a.work.mkdir(parents=True, exist_ok=True)
    (a.work / "results_gloo_ddp.json").write_text(json.dumps(res, indent=1))
    print(f"load average {res['load'][0]:.1f} -> {res['load_after_runs'][0]:.1f} on {res['cpus']} CPUs")
    print(table(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
