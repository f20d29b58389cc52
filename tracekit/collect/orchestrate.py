"""``tracekit collect``: run a workload under a profiler and convert the output into a run folder.

Steps: check the tools (one-line :class:`ToolNotFoundError` with install advice), run the runner
under the profiler in a hidden work folder beside the run folder, export, convert with
:func:`tracekit.convert.convert` (atomic: the run folder appears whole or not at all) adding the
workload, environment and exact command lines to the manifest, then delete the work folder.

Raw profiler outputs (``.nsys-rep``, SQLite export, ``.ncu-rep``, Chrome traces) are deleted after
a successful conversion unless ``keep_raw`` is set: then they are moved into ``RUN_DIR/raw/`` and
listed in the manifest (``collect.raw``). A run folder stays small by default; the manifest
always records each input's name, size and SHA-256.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tracekit.collect import commands as C
from tracekit.collect import tools
from tracekit.collect.process import NSYS_ATTEMPTS, NSYS_TRANSIENT, ProfilerError, Stalled
from tracekit.collect.process import run_logged as _run  # tests replace orchestrate._run
from tracekit.collect.process import say as _say
from tracekit.collect.process import tail as _tail
from tracekit.errors import InputError
from tracekit.runfolder import check_replaceable
from tracekit.workloads import mlperflog

PROFILERS = ("nsys", "ncu", "torch", "auto")


@dataclass
class CollectOptions:
    """Everything ``tracekit collect`` takes besides the workload."""

    profiler: str = "auto"
    extra_profiler_args: str = ""
    force: bool = False
    keep_raw: bool = False
    timeout_s: float | None = None
    # ncu only: which steps (default: the first measured one) and how many launches at most
    ncu_steps: tuple[int, ...] | None = None
    ncu_launch_count: int = 50
    # torch: profile_memory=True ([memory] events -> memory_events); nsys records CUDA memory
    # usage on CUDA machines anyway (commands.nsys_profile_command); ncu cannot
    profile_memory: bool = False


def threads_per_rank(w: C.Workload) -> tuple[int, str]:
    """(intra-op threads of every rank, the rule that gave it): ``--threads-per-rank``, else
    ``$OMP_NUM_THREADS``, else 1 -- torchrun's rule (it gives each of N > 1 ranks one thread
    unless OMP_NUM_THREADS is set), applied to 1-rank runs too, so a study's 1-rank and N-rank
    runs are comparable."""
    if w.threads_per_rank is not None:
        return w.threads_per_rank, "--threads-per-rank"
    env = os.environ.get("OMP_NUM_THREADS", "").strip()
    if env.isdigit() and int(env) >= 1:
        return int(env), "OMP_NUM_THREADS"
    return 1, "torchrun's default (1 thread per rank; set --threads-per-rank to change)"


def host_cpu_table(results: list[dict]):
    """cpu_thread_state rows from the runner's host CPU samples (torch profiler runs), or None
    when no rank sampled (tracekit.workloads.cpusample)."""
    import pyarrow as pa

    parts = [r["cpu_samples"] for r in results if r.get("cpu_samples") and r["cpu_samples"].get("source")]
    if not parts:
        return None
    cols = {c: [v for p in parts for v in p[c]] for c in ("pid", "tid", "cpu", "start_ns", "end_ns")}
    n = len(cols["pid"])
    return pa.table({
        "start_ns": pa.array(cols["start_ns"], pa.int64()), "end_ns": pa.array(cols["end_ns"], pa.int64()),
        "duration_ns": pa.array([e - b for b, e in zip(cols["start_ns"], cols["end_ns"])], pa.int64()),
        "cpu": pa.array(cols["cpu"], pa.int32()), "pid": pa.array(cols["pid"], pa.int64()),
        "tid": pa.array(cols["tid"], pa.int64()), "out_state": pa.array(["Sampled"] * n, pa.string()),
        "block_reason": pa.nulls(n, pa.string()), "is_clipped": pa.array([False] * n, pa.bool_())})


def choose_profiler(profiler: str, quiet: bool = False) -> str:
    """Resolve ``auto``: nsys when on PATH, else the torch profiler (and say which)."""
    if profiler not in PROFILERS:
        raise InputError(f"unknown profiler {profiler!r}; choose one of: {', '.join(PROFILERS)}")
    if profiler != "auto":
        return profiler
    chosen = "nsys" if shutil.which("nsys") else "torch"
    _say(f"--profiler auto: using {chosen}" + ("" if chosen == "nsys" else " (nsys is not on PATH)"),
         quiet)
    return chosen


def _check_workload(w: C.Workload) -> None:
    from tracekit.workloads.registry import PRESETS, REGISTRY

    if w.name not in REGISTRY:
        raise InputError(f"unknown workload {w.name!r}; choose one of: {', '.join(REGISTRY)} "
                         "(`tracekit workloads` lists them)")
    if w.preset not in PRESETS:
        raise InputError(f"unknown preset {w.preset!r}; choose one of: {', '.join(PRESETS)}")
    for flag, v, lo in (("--steps", w.steps, 1), ("--warmup-steps", w.warmup_steps, 0),
                        ("--batch-size", w.batch_size, 1), ("--nproc", w.nproc, 1)):
        if v is not None and v < lo:
            raise InputError(f"{flag} must be at least {lo}, got {v}")
    if w.precision is not None and w.precision not in ("fp32", "amp", "bf16"):
        raise InputError(f"unknown precision {w.precision!r}; choose one of: fp32, amp, bf16")
    if w.threads_per_rank is not None and w.threads_per_rank < 1:
        raise InputError(f"--threads-per-rank must be at least 1, got {w.threads_per_rank}")
    if w.device is not None and w.device not in ("cpu", "cuda") and not re.fullmatch(r"cuda:\d+", w.device):
        raise InputError(f"unknown device {w.device!r}; choose cpu, cuda or cuda:N")


def _check_machine(w: C.Workload, cuda: bool) -> None:
    """What the machine must have for this workload, checked before any profiler starts."""
    on_gpu = w.device != "cpu" and (cuda or (w.device or "").startswith("cuda"))
    if (w.device or "").startswith("cuda") and not cuda:
        raise InputError(f"--device {w.device}: this machine has no NVIDIA GPU and driver")
    if w.precision == "amp" and not on_gpu:
        raise InputError("--precision amp (fp16 + GradScaler) needs a CUDA device; use bf16 on CPUs")
    if on_gpu and w.nproc > 1:
        gpus = tools.cuda_device_count()
        if gpus is not None and w.nproc > gpus:
            raise InputError(f"--nproc {w.nproc}: one GPU per rank, and this machine has {gpus}")


def _run_steps(w: C.Workload) -> tuple[int, int]:
    """(warm-up steps, measured steps) of the run: the workload's, else the runner's defaults."""
    from tracekit.workloads.loop import RunConfig

    return (RunConfig.warmup_steps if w.warmup_steps is None else w.warmup_steps,
            RunConfig.steps if w.steps is None else w.steps)


def _check_ncu_options(o: CollectOptions, w: C.Workload) -> None:
    """``ncu_steps`` name steps the run has (numbered from 0 over warm-up and measured steps);
    ``ncu_launch_count`` >= 1; both only with the ncu profiler."""
    if o.ncu_steps is None and o.ncu_launch_count == CollectOptions.ncu_launch_count:
        return
    if o.profiler != "ncu":
        raise InputError("--ncu-steps and --ncu-launch-count need --profiler ncu")
    if o.ncu_launch_count < 1:
        raise InputError(f"--ncu-launch-count must be at least 1, got {o.ncu_launch_count}")
    total = sum(_run_steps(w))
    bad = [s for s in o.ncu_steps or () if not 0 <= s < total]
    if bad or o.ncu_steps == ():
        raise InputError(f"--ncu-steps: the run has steps 0 to {total - 1} (warm-up steps first), "
                         f"got {', '.join(map(str, bad)) or 'none'}")


RESULT_JSON = "result-{rank}.json"  # the runner's --result-json, one file per rank, in the work folder


def _result_paths(work: Path, nproc: int) -> list[Path]:
    return [work / RESULT_JSON.format(rank=r) for r in range(nproc)]


def _read_results(work: Path, nproc: int) -> list[dict]:
    results = []
    for r, p in enumerate(_result_paths(work, nproc)):
        if not p.is_file():
            raise ProfilerError(f"the workload wrote no result for rank {r} ({p.name}); see the "
                                "profiler output above")
        results.append(json.loads(p.read_text()))
    return results


def _manifest(results: list[dict], profiler: str, profiler_version: dict, cmds: list[list[str]],
              wall_s: float, notes: list[str]) -> dict:
    r0 = results[0]
    ranks = []
    for r in results:
        me = next((x for x in r.get("ranks", []) if x and x.get("rank") == r["rank"]), {})
        ranks.append({"rank": r["rank"], "pid": me.get("pid"), "hostname": me.get("hostname"),
                      "device": me.get("device"), "device_name": me.get("device_name"),
                      "step_wall_ns": r.get("step_wall_ns")})
    workload = {k: r0.get(k) for k in (
        "workload", "suite", "task", "preset", "precision", "batch_size", "batch_unit", "world_size",
        "steps", "warmup_steps", "samples_per_step", "channels_last", "compile", "device_type",
        "seed", "ddp_backend", "shapes", "nvtx_backend")}
    workload["name"] = workload.pop("workload")
    workload["global_batch_size"] = r0.get("samples_per_step")
    workload["ranks"] = ranks
    versions = dict(r0.get("versions") or {})
    versions.update(profiler_version)
    host = r0.get("host") or {}
    environment = {
        "versions": versions,
        "gpus": r0.get("devices") or [],
        "host_cpu": {"model": host.get("cpu_model"), "cores": host.get("cpu_cores"),
                     "physical_cores": host.get("cpu_physical_cores")},
        "hostname": host.get("hostname"),
        "os": host.get("os"),
    }
    return {"workload": workload, "environment": environment,
            "collect": {"profiler": profiler, "commands": [shlex.join(c) for c in cmds],
                        "argv": cmds, "wall_s": round(wall_s, 3), "notes": notes, "raw": []}}


def failure_log(run_dir: Path) -> Path:
    """Where a failed ``collect`` into ``run_dir`` keeps the profiler's and workload's whole
    output: ``<run_dir>.collect-failed.log`` beside it (replaced by the next failure)."""
    return run_dir.with_name(run_dir.name + ".collect-failed.log")


@dataclass
class _Session:
    """One ``tracekit collect`` under way: the workload, its options and its work folder."""

    workload: C.Workload
    options: CollectOptions
    work: Path
    quiet: bool
    extra: list[str]  # --extra-profiler-args, split
    cuda: bool
    tpr: int  # threads per rank
    cmds: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def log(self) -> Path:
        return self.work / "profiler.log"

    @property
    def result_json(self) -> str:
        return str(self.work / RESULT_JSON)

    @property
    def mllog(self) -> str:
        return str(self.work / mlperflog.MLLOG)

    @property
    def env(self) -> dict:
        return {"OMP_NUM_THREADS": str(self.tpr)}

    def running(self, under: str) -> None:
        w = self.workload
        _say(f"running {w.name} ({w.preset}, {w.nproc} rank(s), {self.tpr} thread(s) per rank) "
             f"under {under}", self.quiet)


class _NsysPass:
    """nsys profile (retried when nsys stalls or loses its agent), then nsys export to SQLite."""

    def __init__(self, cuda: bool):
        self.nsys = tools.nsys_info()  # the tool checks happen before anything runs

    def run(self, s: _Session) -> tuple[list[Path], dict]:
        w, o = s.workload, s.options
        base = str(s.work / "profile")
        prof_cmd = C.nsys_profile_command(self.nsys, C.runner_command(w, s.result_json, mllog=s.mllog), base,
                                          cuda=s.cuda, extra=s.extra)
        exp_cmd = C.nsys_export_command(self.nsys, base + ".nsys-rep", base + ".sqlite")
        s.running(f"nsys {self.nsys.version}")
        s.cmds.append(prof_cmd)
        self._profile(s, prof_cmd, base)
        if not Path(base + ".nsys-rep").is_file():
            raise ProfilerError(f"nsys wrote no report: {_tail(s.log.read_text(errors='replace'))}")
        s.cmds.append(exp_cmd)
        _run(exp_cmd, "nsys export", s.log, o.timeout_s)
        s.notes.append("no capture range: warm-up steps are in the trace, marked by their NVTX "
                       "message ('step N (warmup)') and by step_summary.warmup")
        return [Path(base + ".sqlite")], {"nsys": self.nsys.version}

    @staticmethod
    def _profile(s: _Session, prof_cmd: list[str], base: str) -> None:
        w, log = s.workload, s.log
        results = _result_paths(s.work, w.nproc)
        for attempt in range(1, NSYS_ATTEMPTS + 1):
            try:
                _run(prof_cmd, f"nsys profile ({w.name})", log, s.options.timeout_s, env=s.env,
                     stall=results)
                break
            except Stalled as exc:
                if attempt == NSYS_ATTEMPTS:
                    raise ProfilerError(f"{exc} ({NSYS_ATTEMPTS} attempts); try "
                                        "--extra-profiler-args '--sample=none'") from None
                s.notes.append(f"nsys profile attempt {attempt} killed: {exc}; profiled again")
                _say(f"attempt {attempt} of {NSYS_ATTEMPTS} killed: {exc}; profiling again", s.quiet)
            except ProfilerError:
                # nsys 2022.4 sometimes loses its agent while other nsys sessions run
                # (SystemException from sem_open before the target starts, "End of file" from
                # the agent's connection, no local endpoint) and writes no report: profile again
                text = log.read_text(errors="replace")
                marker = next((m for m in NSYS_TRANSIENT if m in text), None)
                if marker is None or Path(base + ".nsys-rep").exists() or attempt == NSYS_ATTEMPTS:
                    raise
                s.notes.append(f"nsys profile retried after a transient agent failure ({marker})")
                _say(f"attempt {attempt} of {NSYS_ATTEMPTS} failed: nsys lost its agent "
                     f"({marker}), no report; profiling again", s.quiet)
            for stale in [*results, *s.work.glob("profile.*")]:
                stale.unlink(missing_ok=True)


class _TorchPass:
    """The runner with torch.profiler on (a Chrome trace per rank, measured steps only)."""

    def __init__(self, cuda: bool):
        pass

    def run(self, s: _Session) -> tuple[list[Path], dict]:
        w = s.workload
        tdir = s.work / "torch"
        target = C.runner_command(w, s.result_json, mllog=s.mllog, torch_profile=str(tdir),
                                  profile_memory=s.options.profile_memory)
        s.cmds.append(target)
        s.running("torch.profiler")
        try:
            _run(target, f"the workload {w.name} under torch.profiler", s.log, s.options.timeout_s,
                 env=s.env)
        except ProfilerError as exc:
            # a rank that fails at exit, after every rank wrote its trace and then its result
            # (the last thing the runner does, after its last collective), left complete
            # outputs: torch 2.13 + Gloo abort now and then while tearing down
            # ("terminate called without an active exception")
            done = _result_paths(s.work, w.nproc)
            if not all(p.is_file() for p in done) or len(list(tdir.glob("rank*.json"))) != w.nproc:
                raise
            note = (f"{exc} -- after every rank had written its trace and result, so they are "
                    "converted")
            _say(f"warning: {note}", s.quiet)
            s.notes.append(note)
        inputs = sorted(tdir.glob("rank*.json"))
        if not inputs:
            raise ProfilerError("torch.profiler wrote no trace")
        s.notes.append("torch.profiler records the measured steps only (started after warm-up)")
        return inputs, {}


class _NcuPass:
    """ncu on the chosen steps' kernels (NVTX filter), then its raw page as CSV."""

    def __init__(self, cuda: bool):
        self.path, self.version = tools.ncu_version()
        if not cuda:
            raise tools.ToolNotFoundError("--profiler ncu needs an NVIDIA GPU and driver, and this "
                                          "machine has none; use --profiler nsys or torch here")

    def run(self, s: _Session) -> tuple[list[Path], dict]:
        w, o = s.workload, s.options
        target = C.runner_command(w, s.result_json, mllog=s.mllog)
        warm = _run_steps(w)[0]
        steps = list(o.ncu_steps) if o.ncu_steps else [warm]
        base = str(s.work / "profile")
        prof_cmd = C.ncu_profile_command(self.path, target, base, steps=steps, warmup_steps=warm,
                                         launch_count=o.ncu_launch_count,
                                         metric_args=C.ncu_metric_args(list(tools.ncu_sets(self.path))),
                                         extra=s.extra)
        s.cmds.append(prof_cmd)
        _say(f"running {w.name} ({w.preset}) under ncu {self.version} (steps "
             f"{', '.join(map(str, steps))}, at most {o.ncu_launch_count} launches)", s.quiet)
        _run(prof_cmd, f"ncu ({w.name})", s.log, o.timeout_s, env=s.env)
        rep = Path(base + ".ncu-rep")
        if not rep.is_file():
            raise ProfilerError(f"ncu wrote no report (no kernel matched the NVTX filter?): "
                                f"{_tail(s.log.read_text(errors='replace'))}")
        csv_cmd = C.ncu_csv_command(self.path, str(rep))
        s.cmds.append(csv_cmd)
        csv = s.work / "profile.csv"
        with open(csv, "wb") as f:
            p = subprocess.run(csv_cmd, stdout=f, stderr=subprocess.PIPE, timeout=o.timeout_s)
        if p.returncode != 0:
            raise ProfilerError(f"ncu --import failed: {_tail(p.stderr.decode(errors='replace'))}")
        return [csv], {"ncu": self.version}


_PASSES = {"nsys": _NsysPass, "torch": _TorchPass, "ncu": _NcuPass}


def _collect_manifest(s: _Session, results: list[dict], profiler: str, version: dict, wall: float,
                      tpr_rule: str, cpu_rows) -> dict:
    """The manifest entries ``tracekit collect`` adds to the run folder's (``collect``, ...)."""
    o = s.options
    extra_manifest = _manifest(results, profiler, version, s.cmds, wall, s.notes)
    extra_manifest["collect"]["threads_per_rank"] = s.tpr
    extra_manifest["collect"]["threads_per_rank_from"] = tpr_rule
    extra_manifest["collect"]["threads_seen"] = [r.get("threads") for r in results]
    if cpu_rows is not None:
        src = next(r["cpu_samples"] for r in results if r.get("cpu_samples"))
        extra_manifest["collect"]["host_cpu_samples"] = {
            "rows": cpu_rows.num_rows, "interval_ms": src.get("interval_ms"),
            "source": f"/proc/PID/task/TID/{src.get('source')} read by the runner",
            "table": "cpu_thread_state (out_state 'Sampled')"}
    extra_manifest["collect"]["requested"] = {**asdict(s.workload), "profiler": o.profiler,
                                              "extra_profiler_args": o.extra_profiler_args,
                                              "profile_memory": o.profile_memory}
    if o.keep_raw:
        extra_manifest["collect"]["raw"] = sorted(
            str(Path("raw") / p.relative_to(s.work)) for p in s.work.rglob("*") if p.is_file())
    return extra_manifest


def collect(workload: C.Workload, run_dir: str | os.PathLike, options: CollectOptions | None = None,
            *, quiet: bool = False) -> Path:
    """Train ``workload`` under ``options.profiler`` and convert the result into ``run_dir``.

    Raises :class:`InputError` for a bad workload/option or an existing ``run_dir`` (without
    ``force``), :class:`ToolNotFoundError` (a subclass) when the profiler, torch or a GPU that
    the profiler needs is missing, :class:`ProfilerError` when the profiler or workload fails
    (with the last lines of its output; its whole output is kept in :func:`failure_log`).
    Nothing else is left behind on error: no run folder, no work folder.
    """
    from tracekit.convert import convert

    o = options or CollectOptions()
    _check_workload(workload)
    _check_ncu_options(o, workload)
    run_dir = Path(run_dir).absolute()
    check_replaceable(run_dir, force=o.force)
    profiler = choose_profiler(o.profiler, quiet)
    if o.profile_memory and profiler == "ncu":
        raise InputError("--profile-memory: ncu does not record memory over time; use --profiler "
                         "torch (profile_memory=True) or nsys (--cuda-memory-usage=true)")
    extra = shlex.split(o.extra_profiler_args or "")
    cuda = tools.cuda_present()
    _check_machine(workload, cuda)
    if o.profile_memory and profiler == "nsys" and not cuda:
        _say("--profile-memory under nsys records CUDA memory usage, and this machine has no GPU: "
             "no memory events will be recorded (use --profiler torch for host memory)", quiet)
    tpr, tpr_rule = threads_per_rank(workload)
    runner = _PASSES[profiler](cuda)  # the tool checks happen before anything runs
    if not tools.torch_importable():
        raise tools.ToolNotFoundError(f"torch is not importable by {sys.executable}: {tools.TORCH_INSTALL}")

    run_dir.parent.mkdir(parents=True, exist_ok=True)
    work = run_dir.parent / f".{run_dir.name}.collect-{uuid.uuid4().hex[:10]}"
    s = _Session(workload, o, work, quiet, extra, cuda, tpr)
    log = s.log
    t0 = time.monotonic()
    try:  # mkdir inside: a Ctrl-C right after it still removes the folder
        work.mkdir()
        inputs, version = runner.run(s)
        wall = time.monotonic() - t0
        results = _read_results(work, workload.nproc)
        _say("done: " + ", ".join(f"rank {r['rank']} {len(r.get('step_wall_ns') or [])} steps, "
                                  f"mean {r['mean_step_ns'] / 1e6:.1f} ms" for r in results), quiet)
        cpu_rows = host_cpu_table(results) if profiler == "torch" else None
        extra_manifest = _collect_manifest(s, results, profiler, version, wall, tpr_rule, cpu_rows)
        extra_tables = {} if cpu_rows is None else {"cpu_thread_state": cpu_rows}
        extra_tables.update(mlperflog.run_tables(Path(s.mllog), extra_manifest))
        convert(inputs, run_dir, force=o.force, extra_manifest=extra_manifest,
                extra_tables=extra_tables or None)
        failure_log(run_dir).unlink(missing_ok=True)  # an earlier attempt's
        if o.keep_raw:
            os.rename(work, run_dir / "raw")
    except ProfilerError as exc:
        if not log.is_file():
            raise
        kept = failure_log(run_dir)
        os.replace(log, kept)
        raise ProfilerError(f"{exc} (its whole output: {kept})") from None
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    return run_dir
