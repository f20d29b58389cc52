"""Running the profiler's commands for ``tracekit collect``: output into a log, the profiler's own
last words in errors, timeouts, stalled nsys sessions detected and killed with everything they
started."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from tracekit.errors import TracekitError


class ProfilerError(TracekitError):
    """The profiler or the workload under it failed; the message ends with its own last words."""

    exit_code = 1


def say(msg: str, quiet: bool) -> None:
    """``msg`` on stderr as ``tracekit collect: MSG`` unless ``quiet``."""
    if not quiet:
        print(f"tracekit collect: {msg}", file=sys.stderr, flush=True)


# a Python exception's last line, as a worker rank prints it (torchrun prefixes "[rankN]:")
_EXCEPTION = re.compile(r"^(?:\[rank\d+\]:\s*)?([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)(?::.*)?)$")
# torchrun's failure summary: it names no cause, only where to look
_TORCHRUN_BOILERPLATE = re.compile(
    r"ChildFailedError|Root Cause|error_file|^Failures:|FAILED$|^traceback\s*:|^\[\d+\]:$|^[=-]{8,}$"
    r"|^Traceback \(most recent call last\)|^File \"")


def tail(text: str, n: int = 3) -> str:
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


def kill_tree(pid: int, token: str) -> None:
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


class Stalled(ProfilerError):
    """nsys kept running, doing nothing, long after the workload had exited (see NSYS_STALL_S)."""


# nsys 2022.4 on a CPU-only machine sometimes never exits after the profiled program has (its
# detached agent spins; seen in about one run in five on a busy 2-core machine, with and without
# CPU sampling). Normal shutdown after the program exits takes seconds; while nsys imports its
# stream, a QdstrmImporter process runs. A run whose workload has written all its results, and
# whose nsys has neither exited nor started importing for NSYS_STALL_S seconds, or for as long as
# the workload ran when that is longer, is killed and profiled again, up to NSYS_ATTEMPTS times.
NSYS_STALL_S = float(os.environ.get("TRACEKIT_NSYS_STALL_S", "45"))
NSYS_ATTEMPTS = 3
# nsys output of agent failures that leave no report and pass when profiled again ("Local
# Endpoint is not available": 2022.4's client failing to reach its daemon while other sessions
# start and stop, seen in CI once in a few dozen profiles)
NSYS_TRANSIENT = ("sem_open", "End of file", "Local Endpoint is not available")


def importing() -> bool:
    """True while a QdstrmImporter process runs (nsys converting its stream into a report; it
    writes to a temporary file whose name does not tell which session it belongs to)."""
    for proc in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            if b"QdstrmImporter" in (proc / "cmdline").read_bytes():
                return True
    return False


def run_logged(cmd: list[str], what: str, log: Path, timeout: float | None, env: dict | None = None,
         stall: list[Path] | None = None) -> str:
    """Run ``cmd`` with stdout+stderr into ``log``; :class:`ProfilerError` quoting its last lines
    when it fails or runs past ``timeout`` seconds (then it and its nsys agent are killed).

    ``stall=result_files``: once every result file exists (the workload is done), the command
    must exit within :data:`NSYS_STALL_S` seconds (or the workload's own time, when longer) during
    which no QdstrmImporter runs, else it is
    killed and :class:`Stalled` raised. Returns the output."""
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
        except Stalled:
            kill_tree(p.pid, token)
            p.wait()
            raise
        except subprocess.TimeoutExpired:
            kill_tree(p.pid, token)
            p.wait()
            raise ProfilerError(f"{what} did not finish within {timeout:.0f} s (killed): "
                                f"{tail(log.read_text(errors='replace'))}") from None
        except BaseException:  # KeyboardInterrupt / SIGTERM: leave nothing running
            kill_tree(p.pid, token)
            p.wait()
            raise
    out = log.read_text(errors="replace")
    if rc != 0:
        raise ProfilerError(f"{what} failed (exit status {rc}): {tail(out)}")
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
        if all(f.is_file() for f in files) and not importing():
            idle_since = idle_since or now
            # as long as the workload took, at least NSYS_STALL_S: on a busy machine nsys's
            # shutdown is slow in proportion (a 50 s quick start was killed after 45 s and rerun)
            limit = max(NSYS_STALL_S, idle_since - start)
            if now - idle_since > limit:
                raise Stalled(f"nsys did not exit {limit:.0f} s after the workload had finished "
                              f"(it ran {idle_since - start:.0f} s)")
        else:
            idle_since = None
