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

import contextlib
import json
import os
import re
import signal
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from tracekit.collect import commands as C
from tracekit.collect import tools
from tracekit.errors import InputError, TracekitError
from tracekit.runfolder import check_replaceable

PROFILERS = ("nsys", "ncu", "torch", "auto")


class ProfilerError(TracekitError):
    """The profiler or the workload under it failed; the message ends with its own last words."""

    exit_code = 1


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


def _say(msg: str, quiet: bool) -> None:
    if not quiet:
        print(f"tracekit collect: {msg}", file=sys.stderr, flush=True)


# a Python exception's last line, as a worker rank prints it (torchrun prefixes "[rankN]:")
_EXCEPTION = re.compile(r"^(?:\[rank\d+\]:\s*)?([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)(?::.*)?)$")
# torchrun's failure summary: it names no cause, only where to look
_TORCHRUN_BOILERPLATE = re.compile(
    r"ChildFailedError|Root Cause|error_file|^Failures:|FAILED$|^traceback\s*:|^\[\d+\]:$|^[=-]{8,}$"
    r"|^Traceback \(most recent call last\)|^File \"")


def _tail(text: str, n: int = 3) -> str:
    """The profiler's own last words, in one line: a Python exception raised by the workload (or
    one of its torchrun ranks) when there is one, else its last lines that say error/illegal/
    failed/... (nsys's "Illegal --trace argument"), else its last ``n`` lines; progress bars,
    usage boilerplate and torchrun's failure summary left out."""
    lines = [ln.strip() for ln in text.replace("\r", "\n").splitlines() if ln.strip()]
    lines = [ln for ln in lines if not (ln.startswith("[") and "%" in ln)
             and not re.match(r"(usage:|Try '|Possible |\$ )", ln)
             and not _TORCHRUN_BOILERPLATE.search(ln)]
    raised = list(dict.fromkeys(m.group(1) for ln in lines if (m := _EXCEPTION.match(ln))))
    if raised:
        return " | ".join(raised[-2:])
    key = [ln for ln in lines if re.search(
        r"error|illegal|invalid|fail|not found|exception|denied|killed|unrecognized|no such", ln, re.I)]
    return " | ".join(key[-2:] if key else lines[-n:]) or "(no output)"


def _kill_tree(pid: int, token: str) -> None:
    """Kill what one command started: its process group (``start_new_session``), the processes
    whose environment carries ``TRACEKIT_COLLECT_TOKEN=token`` (the workload and its ranks, which
    nsys starts outside that group), and the nsys agent of its session, which nsys detaches and
    names ``--session-name=profile-X-PID``."""
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)
    marker = f"TRACEKIT_COLLECT_TOKEN={token}".encode()
    for proc in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError, ValueError):
            cmd = (proc / "cmdline").read_bytes().split(b"\0")
            agent = b"--start-agent" in cmd and any(
                c.startswith(b"--session-name=") and c.endswith(b"-%d" % pid) for c in cmd)
            if agent or marker in (proc / "environ").read_bytes().split(b"\0"):
                os.kill(int(proc.name), signal.SIGKILL)


class _Stalled(ProfilerError):
    """nsys kept running, doing nothing, long after the workload had exited (see NSYS_STALL_S)."""


# nsys 2022.4 on a CPU-only machine sometimes never exits after the profiled program has (its
# detached agent spins; seen in about one run in five on a busy 2-core machine, with and without
# CPU sampling). Normal shutdown after the program exits takes seconds; while nsys imports its
# stream, a QdstrmImporter process runs. A run whose workload has written all its results, and
# whose nsys has neither exited nor started importing for NSYS_STALL_S seconds, is killed and
# profiled again, up to NSYS_ATTEMPTS times in all.
NSYS_STALL_S = float(os.environ.get("TRACEKIT_NSYS_STALL_S", "45"))
NSYS_ATTEMPTS = 3
# nsys output of agent failures that leave no report and pass when profiled again
NSYS_TRANSIENT = ("sem_open", "End of file")


def _importing() -> bool:
    """True while a QdstrmImporter process runs (nsys converting its stream into a report; it
    writes to a temporary file whose name does not tell which session it belongs to)."""
    for proc in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            if b"QdstrmImporter" in (proc / "cmdline").read_bytes():
                return True
    return False


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


def _run(cmd: list[str], what: str, log: Path, timeout: float | None, env: dict | None = None,
         stall: list[Path] | None = None) -> str:
    """Run ``cmd`` with stdout+stderr into ``log``; :class:`ProfilerError` quoting its last lines
    when it fails or runs past ``timeout`` seconds (then it and its nsys agent are killed).

    ``stall=result_files``: once every result file exists (the workload is done), the command
    must exit within :data:`NSYS_STALL_S` seconds during which no QdstrmImporter runs, else it is
    killed and :class:`_Stalled` raised. Returns the output."""
    with open(log, "ab") as f:
        f.write(("$ " + shlex.join(cmd) + "\n").encode())
        f.flush()
        token = uuid.uuid4().hex
        try:
            p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, start_new_session=True,
                                 env={**os.environ, **(env or {}), "TRACEKIT_COLLECT_TOKEN": token})
        except OSError as exc:
            raise ProfilerError(f"cannot start {what} ({cmd[0]}): {exc.strerror}") from None
        try:
            rc = _wait(p, timeout, stall)
        except _Stalled:
            _kill_tree(p.pid, token)
            p.wait()
            raise
        except subprocess.TimeoutExpired:
            _kill_tree(p.pid, token)
            p.wait()
            raise ProfilerError(f"{what} did not finish within {timeout:.0f} s (killed): "
                                f"{_tail(log.read_text(errors='replace'))}") from None
        except BaseException:  # KeyboardInterrupt / SIGTERM: leave nothing running
            _kill_tree(p.pid, token)
            p.wait()
            raise
    out = log.read_text(errors="replace")
    if rc != 0:
        raise ProfilerError(f"{what} failed (exit status {rc}): {_tail(out)}")
    return out


def _wait(p: subprocess.Popen, timeout: float | None, files: list[Path] | None) -> int:
    if files is None:
        return p.wait(timeout=timeout)
    start = time.monotonic()
    idle_since = None
    while True:
        try:
            return p.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            pass
        now = time.monotonic()
        if timeout is not None and now - start > timeout:
            raise subprocess.TimeoutExpired(p.args, timeout)
        if all(f.is_file() for f in files) and not _importing():
            idle_since = idle_since or now
            if now - idle_since > NSYS_STALL_S:
                raise _Stalled(f"nsys did not exit {NSYS_STALL_S:.0f} s after the workload had finished")
        else:
            idle_since = None


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
    threads_env = {"OMP_NUM_THREADS": str(tpr)}
    # the tool checks happen before anything runs
    if profiler == "nsys":
        nsys = tools.nsys_info()
    elif profiler == "ncu":
        ncu_path, ncu_ver = tools.ncu_version()
        if not cuda:
            raise tools.ToolNotFoundError("--profiler ncu needs an NVIDIA GPU and driver, and this "
                                          "machine has none; use --profiler nsys or torch here")
    if not tools.torch_importable():
        raise tools.ToolNotFoundError(f"torch is not importable by {sys.executable}: {tools.TORCH_INSTALL}")

    run_dir.parent.mkdir(parents=True, exist_ok=True)
    work = run_dir.parent / f".{run_dir.name}.collect-{uuid.uuid4().hex[:10]}"
    work.mkdir()
    log = work / "profiler.log"
    cmds: list[list[str]] = []
    notes: list[str] = []
    t0 = time.monotonic()
    try:
        result_json = str(work / RESULT_JSON)
        if profiler == "nsys":
            target = C.runner_command(workload, result_json)
            base = str(work / "profile")
            prof_cmd = C.nsys_profile_command(nsys, target, base, cuda=cuda, extra=extra)
            exp_cmd = C.nsys_export_command(nsys, base + ".nsys-rep", base + ".sqlite")
            _say(f"running {workload.name} ({workload.preset}, {workload.nproc} rank(s), {tpr} "
                 f"thread(s) per rank) under nsys {nsys.version}", quiet)
            cmds += [prof_cmd]
            results = _result_paths(work, workload.nproc)
            for attempt in range(1, NSYS_ATTEMPTS + 1):
                try:
                    _run(prof_cmd, f"nsys profile ({workload.name})", log, o.timeout_s,
                         env=threads_env, stall=results)
                    break
                except _Stalled as exc:
                    if attempt == NSYS_ATTEMPTS:
                        raise ProfilerError(f"{exc} ({NSYS_ATTEMPTS} attempts); try "
                                            "--extra-profiler-args '--sample=none'") from None
                    notes.append(f"nsys profile attempt {attempt} killed: {exc}; profiled again")
                    _say(f"attempt {attempt} of {NSYS_ATTEMPTS} killed: {exc}; profiling again",
                         quiet)
                except ProfilerError:
                    # nsys 2022.4 sometimes loses its agent while other nsys sessions run
                    # (SystemException from sem_open before the target starts, or "End of file"
                    # from the agent's connection) and writes no report: profile again
                    text = log.read_text(errors="replace")
                    marker = next((m for m in NSYS_TRANSIENT if m in text), None)
                    if marker is None or Path(base + ".nsys-rep").exists() or attempt == NSYS_ATTEMPTS:
                        raise
                    notes.append(f"nsys profile retried after a transient agent failure ({marker})")
                    _say(f"attempt {attempt} of {NSYS_ATTEMPTS} failed: nsys lost its agent "
                         f"({marker}), no report; profiling again", quiet)
                for stale in [*results, *work.glob("profile.*")]:
                    stale.unlink(missing_ok=True)
            if not Path(base + ".nsys-rep").is_file():
                raise ProfilerError(f"nsys wrote no report: {_tail(log.read_text(errors='replace'))}")
            cmds.append(exp_cmd)
            _run(exp_cmd, "nsys export", log, o.timeout_s)
            inputs = [Path(base + ".sqlite")]
            version = {"nsys": nsys.version}
            notes.append("no capture range: warm-up steps are in the trace, marked by their NVTX "
                         "message ('step N (warmup)') and by step_summary.warmup")
        elif profiler == "torch":
            tdir = work / "torch"
            target = C.runner_command(workload, result_json, torch_profile=str(tdir),
                                      profile_memory=o.profile_memory)
            cmds.append(target)
            _say(f"running {workload.name} ({workload.preset}, {workload.nproc} rank(s), {tpr} "
                 f"thread(s) per rank) under torch.profiler", quiet)
            try:
                _run(target, f"the workload {workload.name} under torch.profiler", log, o.timeout_s,
                     env=threads_env)
            except ProfilerError as exc:
                # a rank that fails at exit, after every rank wrote its trace and then its result
                # (the last thing the runner does, after its last collective), left complete
                # outputs: torch 2.13 + Gloo abort now and then while tearing down
                # ("terminate called without an active exception")
                done = _result_paths(work, workload.nproc)
                if not all(p.is_file() for p in done) or len(list(tdir.glob("rank*.json"))) != workload.nproc:
                    raise
                note = (f"{exc} -- after every rank had written its trace and result, so they are "
                        "converted")
                _say(f"warning: {note}", quiet)
                notes.append(note)
            inputs = sorted(tdir.glob("rank*.json"))
            if not inputs:
                raise ProfilerError("torch.profiler wrote no trace")
            version = {}
            notes.append("torch.profiler records the measured steps only (started after warm-up)")
        else:  # ncu
            target = C.runner_command(workload, result_json)
            warm = _run_steps(workload)[0]
            steps = list(o.ncu_steps) if o.ncu_steps else [warm]
            base = str(work / "profile")
            prof_cmd = C.ncu_profile_command(ncu_path, target, base, steps=steps, warmup_steps=warm,
                                             launch_count=o.ncu_launch_count,
                                             metric_args=C.ncu_metric_args(list(tools.ncu_sets(ncu_path))),
                                             extra=extra)
            cmds.append(prof_cmd)
            _say(f"running {workload.name} ({workload.preset}) under ncu {ncu_ver} (steps "
                 f"{', '.join(map(str, steps))}, at most {o.ncu_launch_count} launches)", quiet)
            _run(prof_cmd, f"ncu ({workload.name})", log, o.timeout_s, env=threads_env)
            rep = Path(base + ".ncu-rep")
            if not rep.is_file():
                raise ProfilerError(f"ncu wrote no report (no kernel matched the NVTX filter?): "
                                    f"{_tail(log.read_text(errors='replace'))}")
            csv_cmd = C.ncu_csv_command(ncu_path, str(rep))
            cmds.append(csv_cmd)
            csv = work / "profile.csv"
            with open(csv, "wb") as f:
                p = subprocess.run(csv_cmd, stdout=f, stderr=subprocess.PIPE, timeout=o.timeout_s)
            if p.returncode != 0:
                raise ProfilerError(f"ncu --import failed: {_tail(p.stderr.decode(errors='replace'))}")
            inputs = [csv]
            version = {"ncu": ncu_ver}
        wall = time.monotonic() - t0
        results = _read_results(work, workload.nproc)
        _say("done: " + ", ".join(f"rank {r['rank']} {len(r.get('step_wall_ns') or [])} steps, "
                                  f"mean {r['mean_step_ns'] / 1e6:.1f} ms" for r in results), quiet)
        cpu_rows = host_cpu_table(results) if profiler == "torch" else None
        extra_manifest = _manifest(results, profiler, version, cmds, wall, notes)
        extra_manifest["collect"]["threads_per_rank"] = tpr
        extra_manifest["collect"]["threads_per_rank_from"] = tpr_rule
        extra_manifest["collect"]["threads_seen"] = [r.get("threads") for r in results]
        if cpu_rows is not None:
            src = next(r["cpu_samples"] for r in results if r.get("cpu_samples"))
            extra_manifest["collect"]["host_cpu_samples"] = {
                "rows": cpu_rows.num_rows, "interval_ms": src.get("interval_ms"),
                "source": f"/proc/PID/task/TID/{src.get('source')} read by the runner",
                "table": "cpu_thread_state (out_state 'Sampled')"}
        extra_manifest["collect"]["requested"] = {**asdict(workload), "profiler": o.profiler,
                                                  "extra_profiler_args": o.extra_profiler_args,
                                                  "profile_memory": o.profile_memory}
        if o.keep_raw:
            extra_manifest["collect"]["raw"] = sorted(
                str(Path("raw") / p.relative_to(work)) for p in work.rglob("*") if p.is_file())
        convert(inputs, run_dir, force=o.force, extra_manifest=extra_manifest,
                extra_tables=None if cpu_rows is None else {"cpu_thread_state": cpu_rows})
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
