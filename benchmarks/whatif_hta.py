"""Validate `critical_path_summary` and `tracekit whatif` on the shared Kineto GPU traces with
steps (issue 34 item 5; docs/whatif.md "Validation"): against HTA's critical path of the same
steps, against the raw trace (GPU busy, launch-to-start latency, the busiest stream's work) and
against the floors every prediction must respect.

    python benchmarks/whatif_hta.py -o /tmp/whatif_hta [--hta-python /work/htavenv/bin/python]

HTA is never a tracekit dependency: it runs in its own venv (``python3 -m venv /work/htavenv &&
/work/htavenv/bin/pip install traceinsight 'pandas==2.2.*' psutil``) as a subprocess
(benchmarks/hta_critical_path.py); without it the HTA columns say so. tracekit runs as its CLI
(public query names and whatif's output columns only), the raw figures come from
tests/helpers/kineto_steps.py (the JSON read directly; tests/helpers/nsys_steps.py the CUPTI
tables of the nsys exports). Writes only under ``-o`` (the converted run folders, reused when
present) and prints four Markdown tables: tracekit's and HTA's path per Kineto step, the path
against the raw trace per Kineto step, the floors of every scenario per Kineto trace, and per nsys
export with steps the path and the raw GPU busy time and launch-to-start latency.

Sides. tracekit's path (from the step's host range end back to its start, so its length is the
step's wall time): GPU = kernel + memcpy + memset + collective transfer, host = host + launch +
other, wait = sync wait + stream wait. HTA's path (the longest path, by edge weight, through the
graph of the CPU events that start in the step's range and the GPU work they launched, wherever
that runs): GPU = gpu_compute_bound + gpu_communication_bound, host = cpu_bound + data_loading +
gpu_kernel_launch_overhead, wait = gpu_kernel_kernel_overhead. HTA gives weight 0 to the edges
between consecutive top-level operators of a thread and to synchronization edges (a blocking
call's wait): its path's weighted length is shorter than its span (last node - first node) by
that time, which neither side of HTA's breakdown holds.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from helpers import nsys_steps  # noqa: E402
from helpers.kineto_steps import step_figures  # noqa: E402

FIXTURES = ROOT.parent / "shared" / "fixtures" / "kineto"
NSYS = ROOT.parent / "shared" / "fixtures" / "nsys"
NO_STEPS = ("nsys2022.4export_8gpu_jax_no_kernels", "nsys2025.5_rtx4060_no_kernels")
TRACES = ["kineto_h100_timesformer_infer", "kineto_mi300_resnet_actckpt_train",
          "kineto_a100_nccl_2ranks_rank0", "kineto_a100_triton"]
SCENARIOS = ["baseline", "launch=0", "host=0.5", "host=2", "kernels:.=0.5", "kernels:gemm=0.5",
             "comm=0.5", "no-straggler"]
REMOVES = {"launch=0", "host=0.5", "kernels:.=0.5", "kernels:gemm=0.5", "comm=0.5", "no-straggler"}
TK_SIDE = {"kernel": "gpu", "memcpy": "gpu", "memset": "gpu", "collective transfer": "gpu",
           "host": "host", "launch": "host", "other": "host", "sync wait": "wait", "stream wait": "wait"}
HTA_SIDE = {"gpu_compute_bound": "gpu", "gpu_communication_bound": "gpu", "cpu_bound": "host",
            "data_loading": "host", "gpu_kernel_launch_overhead": "host", "dependency": "host",
            "gpu_kernel_kernel_overhead": "wait", "sync": "wait"}


def _tk(*args: str) -> str:
    return subprocess.run([sys.executable, "-m", "tracekit", *args], check=True,
                          capture_output=True, text=True).stdout


def _run(out: Path, stem: str, src: Path | None = None) -> Path:
    run = out / stem
    if not (run / "manifest.json").exists():
        _tk("convert", str(src or FIXTURES / f"{stem}.json.gz"), "-o", str(run))
    return run


def _median(v):
    v = sorted(x for x in v if x is not None)
    return (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2 if v else None


def _nsys_row(out: Path, stem: str) -> str:
    """One row per nsys export: its steps (detected: windows of GPU work) recounted from the
    CUPTI tables (tests/helpers/nsys_steps.py) beside step_summary and critical_path_summary."""
    src = NSYS / f"{stem}.sqlite"
    run = _run(out, stem, src)
    steps = json.loads(_tk("query", "step_summary", str(run), "-f", "json"))
    raw = nsys_steps.step_figures(src, [(r["start_ns"], r["start_ns"] + r["wall_ns"], r["pid"]) for r in steps])
    exact = sum(a["gpu_busy_ns"] == r["gpu_busy_ns"] for a, r in zip(raw, steps))
    tk = _tk_path(run)
    gpu = _median(100 * tk[n]["gpu"] / tk[n]["wall"] for n in tk if tk[n]["wall"])
    busy = _median(100 * a["gpu_busy_any_ns"] / r["wall_ns"] for a, r in zip(raw, steps) if r["wall_ns"])
    q = _median(a["queue_delay_ns_median"] for a in raw)
    qs = "" if q is None else f"{q / 1e3:.1f}"
    return (f"| {stem} | {len(steps)} | {exact}/{len(steps)} | {gpu:.1f} | {busy:.1f} | {qs} | "
            f"{sum(a['queue_delay_ns_median'] is not None for a in raw)} |")


def _tk_path(run: Path) -> dict:
    """Per step: wall ns and ns per side of critical_path_summary."""
    per: dict = {}
    for r in json.loads(_tk("query", "critical_path_summary", str(run), "-f", "json")):
        d = per.setdefault(r["step"], {"wall": r["wall_ns"], "gpu": 0, "host": 0, "wait": 0})
        d[TK_SIDE[r["category"]]] += r["time_ns"]
    return per


def _hta_path(python: str, stem: str, steps: list[int]) -> dict:
    if not Path(python).exists():
        return {n: {"error": f"HTA not installed ({python})"} for n in steps}
    p = subprocess.run([python, str(ROOT / "benchmarks" / "hta_critical_path.py"),
                        str(FIXTURES / f"{stem}.json.gz"), *[f"ProfilerStep#{n}" for n in steps]],
                       capture_output=True, text=True)
    if p.returncode:
        return {n: {"error": p.stderr.strip().splitlines()[-1]} for n in steps}
    out = {}
    doc = json.loads(p.stdout)
    for r in doc["steps"]:
        n = int(r["step"].split("#")[1])
        if not r["ok"]:
            out[n] = {"error": "HTA's analysis failed"}
            continue
        d = {"hta": doc["hta"], "len": r["weight_us"] * 1e3, "span": (r["last_node_us"] - r["first_node_us"]) * 1e3,
             "start_after": (r["first_node_us"] - r["start_us"]) * 1e3, "gpu": 0.0, "host": 0.0, "wait": 0.0}
        for k, v in r["by"].items():
            d[HTA_SIDE[k]] += v * 1e3
        out[n] = d
    return out


def _pct(a, b) -> str:
    return f"{100 * a / b:.1f}" if b else ""


def _ms3(d) -> str:
    return f"{d['gpu'] / 1e6:.3f} / {d['host'] / 1e6:.3f} / {d['wait'] / 1e6:.3f}"


def _hta_table(rows) -> None:
    print("| trace | step | tracekit path ms | GPU / host / wait ms | HTA | HTA path span ms | HTA weighted ms"
          " | GPU / host / wait ms | HTA path starts after the step's start, ms | GPU difference ms |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for stem, n, tk, h in rows:
        lead = f"| {stem} | {n} | {tk['wall'] / 1e6:.3f} | {_ms3(tk)} |"
        if "error" in h:
            print(f"{lead} {h['error']} | | | | | |")
            continue
        print(f"{lead} {h['hta']} | {h['span'] / 1e6:.3f} | {h['len'] / 1e6:.3f} | {_ms3(h)} | "
              f"{h['start_after'] / 1e6:.3f} | {(tk['gpu'] - h['gpu']) / 1e6:+.3f} |")


def _raw_table(rows) -> None:
    print("| trace | step | wall ms | path on GPU work % | raw GPU busy % | busy without NCCL % | busiest stream ms"
          " | launch-to-start median ms |")
    print("|---|---|---|---|---|---|---|---|")
    for stem, raw, tk in rows:
        q = raw["queue_delay_ns_median"]
        print(f"| {stem} | {raw['step']} | {raw['wall_ns'] / 1e6:.3f} | {_pct(tk['gpu'], tk['wall'])}"
              f" | {_pct(raw['gpu_busy_ns'], raw['wall_ns'])} | {_pct(raw['gpu_busy_no_nccl_ns'], raw['wall_ns'])}"
              f" | {raw['busiest_stream_ns'] / 1e6:.3f} | {'' if q is None else f'{q / 1e6:.3f}'} |")


def _floors(run: Path, raw: dict) -> list[str]:
    """One table row per scenario: predicted (median over steps), the bound, violations, n/a."""
    rows = json.loads(_tk("whatif", str(run), *[a for s in SCENARIOS for a in ("-s", s)], "-f", "json"))
    out = []
    for s in SCENARIOS:
        mine = [r for r in rows if r["scenario"] == s]
        na = [r for r in mine if r["predicted_ns"] is None]
        ok = [r for r in mine if r["predicted_ns"] is not None]
        below = sum(r["predicted_ns"] < min(r["gpu_floor_ns"], r["baseline_ns"]) for r in ok)
        slower = sum(r["predicted_ns"] > r["baseline_ns"] for r in ok) if s in REMOVES else 0
        exact = sum(r["gpu_floor_ns"] == raw[r["step"]]["busiest_stream_ns"] for r in ok)
        sp = sorted(r["speedup"] for r in ok)
        med = sorted(r["predicted_ns"] for r in ok)
        out.append(f"| {run.name} | {s} | {med[len(med) // 2] / 1e6:.3f} | "
                   f"{min(r['gpu_floor_ns'] for r in ok) / 1e6:.3f} | {sp[0]:.3f}-{sp[-1]:.3f} | {below} | "
                   f"{slower} | {exact}/{len(ok)} | |" if ok else
                   f"| {run.name} | {s} | n/a | | | | | | {na[0]['note']} |")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--out", type=Path, required=True)
    ap.add_argument("--hta-python", default="/work/htavenv/bin/python",
                    help="HTA's Python; several, comma-separated, compare HTA versions")
    ap.add_argument("--no-floors", action="store_true", help="skip the whatif floors table")
    ap.add_argument("--nsys", default=",".join(sorted(p.name[:-7] for p in NSYS.glob("*.sqlite")
                                                      if p.name[:-7] not in NO_STEPS)),
                    help="nsys exports (stems) for the per-trace table; '' for none")
    ap.add_argument("--traces", default=",".join(TRACES))
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    hta_rows, raw_rows, floor_rows = [], [], []
    for stem in filter(None, a.traces.split(",")):
        run = _run(a.out, stem)
        raw = {r["step"]: r for r in step_figures(FIXTURES / f"{stem}.json.gz")}
        tk = _tk_path(run)
        for python in a.hta_python.split(","):
            hta = _hta_path(python, stem, sorted(tk))
            hta_rows += [(stem, n, tk[n], hta.get(n, {"error": "no such step for HTA"})) for n in sorted(tk)]
        raw_rows += [(stem, raw[n], tk[n]) for n in sorted(tk) if n in raw]
        if not a.no_floors:
            floor_rows += _floors(run, raw)
    _hta_table(hta_rows)
    print()
    _raw_table(raw_rows)
    print()
    print("| trace | scenario | predicted ms (median) | GPU floor ms (min) | speedup | below a floor"
          " | removing, slower | floor = raw busiest stream | n/a |")
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(floor_rows))
    print()
    print("| nsys export | steps | step_summary gpu_busy_ns = recount | path on GPU work % (median) | raw GPU busy %"
          " (any GPU, median) | launch-to-start median us | steps with a launch in the export |")
    print("|---|---|---|---|---|---|---|")
    for stem in filter(None, a.nsys.split(",")):
        print(_nsys_row(a.out, stem), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
