"""PyTorch CUDA caching-allocator snapshots (``torch.cuda.memory._dump_snapshot``) to
``allocator_events``.

A snapshot is a pickle of plain Python data (dicts, lists, strings, numbers, tuples)::

    {"segments": [{"device", "address", "total_size", "allocated_size", "stream", "blocks", ...}],
     "device_traces": [[{"action", "addr", "size", "stream", "time_us", "frames"}, ...], ...]}

``device_traces[d]`` is the allocator's history on device ``d`` while
``torch.cuda.memory._record_memory_history()`` was on (a ring of at most ``max_entries``
entries: the oldest ones may be gone). It is read with :func:`load_snapshot`, an unpickler that
refuses every global (class, function) the file names: a pickle needs one to run code (its
``__reduce__`` names a callable), and a snapshot needs none; it runs in a child process with a
memory and a CPU-time limit, killed with this process
(:mod:`~tracekit.collectors.memsnapshot.safe_pickle`), which also reads the entries (checking
each value's type before it hashes or prints it) and hands back flat columns. A file that names
a global, is cut short, needs too much memory or time, holds a value of another type where an
entry's action or a frame's line or name is read, or is not a snapshot is an
:class:`~tracekit.errors.InputError` (one line, exit 2).

Actions (the entry's ``action`` -> ``allocator_events.action``): ``alloc`` -> 'alloc';
``free_requested`` -> 'free' (the tensor's memory is freed: PyTorch's allocated total, what
``torch.cuda.memory_allocated`` and the profiler's 'Total Allocated' report, drops here);
``free_completed`` -> 'free_completed' (the block returned to the cache once the streams using
it were done: it can be reused); ``segment_alloc`` / ``segment_map`` -> 'segment_alloc' and
``segment_free`` / ``segment_unmap`` -> 'segment_free' (memory taken from / given back to CUDA;
the ``*_map`` forms are expandable segments); ``oom`` -> 'oom'. ``snapshot`` markers are not rows
(counted in the manifest). The totals are the allocator's state at the snapshot (the segments'
``allocated_size`` and ``total_size`` summed per device) minus the changes after each entry, so
the last entry's totals are those of the segments and a history that lost its oldest entries
still has the right totals.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from tracekit.collectors.common import describe_input
from tracekit.collectors.memsnapshot.safe_pickle import ACTIONS  # one mapping for both processes
from tracekit.errors import InputError
from tracekit.progress import NULL_PROGRESS, Progress
from tracekit.runfolder import RunWriter

NAME = "memsnapshot"
__all__ = ["ACTIONS", "NAME", "collect", "column_sources", "load_snapshot", "sniff"]

_ALLOC_DELTA = {"alloc": 1, "free": -1}
_RESERVED_DELTA = {"segment_alloc": 1, "segment_free": -1}
_SUFFIXES = (".pickle", ".pkl")


def sniff(path: Path) -> bool:
    """A pickle (protocol 2 or newer) named ``*.pickle`` / ``*.pkl``, or one whose first KiB
    names ``segments`` or ``device_traces``."""
    try:
        with open(path, "rb") as f:
            head = f.read(1024)
    except OSError:
        return False
    if len(head) < 2 or head[0] != 0x80 or not 2 <= head[1] <= 5:
        return False
    return Path(path).suffix.lower() in _SUFFIXES or b"segments" in head or b"device_traces" in head


# Memory and CPU time the unpickling process may use: a snapshot unpickles to a few times its
# size, at tens of MB per second.
LOAD_MEMORY_BASE = 1 << 30
LOAD_MEMORY_PER_BYTE = 24
LOAD_CPU_BASE_S = 60
LOAD_CPU_PER_MB_S = 2


def load_snapshot(path: Path, scratch: Path | None = None) -> dict:
    """The entries of the snapshot in ``path`` as flat columns
    (:func:`~tracekit.collectors.memsnapshot.safe_pickle.flatten`'s dict), read by
    :mod:`safe_pickle` in a child process: every global refused, memory limited to
    :data:`LOAD_MEMORY_BASE` + :data:`LOAD_MEMORY_PER_BYTE` x the file's size, CPU time to
    :data:`LOAD_CPU_BASE_S` + :data:`LOAD_CPU_PER_MB_S` per MB, killed when this process dies;
    the columns are read back here with the same refusing unpickler. ``scratch``: a folder for
    the child's output (default: a temporary folder). :class:`InputError` when the file is cut
    short, names a class or function, needs more memory or time, holds a value of a type a
    snapshot never has where tracekit reads one, or is not a snapshot. Ctrl-C stops the child."""
    import os
    import signal
    import subprocess
    import sys
    import tempfile

    from tracekit.collectors.memsnapshot import safe_pickle

    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", path=path) from None
    cpu_s = LOAD_CPU_BASE_S + LOAD_CPU_PER_MB_S * (size >> 20)
    with tempfile.TemporaryDirectory(dir=scratch, prefix=".snapshot-") as tmp:
        out = Path(tmp) / "plain.pickle"
        limit = LOAD_MEMORY_BASE + LOAD_MEMORY_PER_BYTE * size
        try:
            proc = subprocess.run([sys.executable, "-I", safe_pickle.__file__, str(path), str(out), str(limit),
                                   str(cpu_s), str(os.getpid())],
                                  check=False, capture_output=True, text=True, timeout=3 * cpu_s + 30,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise InputError(f"reading it took more than {3 * cpu_s + 30} s; refused", path=path) from None
        reason = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        if proc.returncode == -signal.SIGXCPU:
            raise InputError(f"reading it needs more than {cpu_s} s of CPU time (a damaged or hostile "
                             "file: shared references that take forever to hash or print?); refused",
                             path=path)
        if proc.returncode == safe_pickle.REFUSED:
            raise InputError(f"not a safe memory snapshot: {reason}", path=path)
        if proc.returncode == safe_pickle.NOT_SNAPSHOT:
            raise InputError(f"not a PyTorch memory snapshot: {reason}"
                             if not reason.startswith("a pickle") else reason, path=path)
        if proc.returncode != 0:
            raise InputError(f"cannot read the memory snapshot pickle: {reason}", path=path)
        with open(out, "rb") as f:
            return safe_pickle.NoGlobals(f).load()


def _totals(cols: dict, end_alloc: dict, end_res: dict) -> tuple[np.ndarray, np.ndarray]:
    """Each entry's allocated and reserved totals on its device: the device's totals at the
    snapshot minus the changes of its later entries (the entries come grouped by device)."""
    size = np.array(cols["size"], dtype=np.int64)
    dev = np.array(cols["device"], dtype=np.int64)
    act = np.array(cols["action"], dtype=object)
    last = np.flatnonzero(np.r_[dev[1:] != dev[:-1], True]) if len(dev) else np.zeros(0, np.int64)
    group = np.repeat(np.arange(len(last)), np.diff(np.r_[-1, last]))  # each entry's device group
    out = []
    for deltas, end in ((_ALLOC_DELTA, end_alloc), (_RESERVED_DELTA, end_res)):
        sign = np.zeros(len(act), dtype=np.int64)
        for a, v in deltas.items():
            sign[act == a] = v
        cs = np.cumsum(size * sign)
        after = cs[last][group] - cs  # the changes of the later entries of the same device
        at_end = np.array([end.get(int(d), 0) for d in dev[last]], dtype=np.int64)
        out.append(at_end[group] - after)
    return out[0], out[1]


def collect(paths: list[Path], writer: RunWriter, progress: Progress = NULL_PROGRESS) -> None:
    """Convert one snapshot into ``writer``'s ``allocator_events`` (several snapshots of one
    process would repeat the same history: one file per run folder)."""
    if len(paths) > 1:
        raise InputError("give one memory snapshot per run folder (each holds the allocator's "
                         "whole history; several would count it twice)", path=paths[1])
    path = Path(paths[0])
    snap = load_snapshot(path, scratch=writer.path)
    writer.manifest["inputs"].append(describe_input(path, "torch-memory-snapshot"))
    cols, counts = snap["columns"], snap["counts"]
    n = len(cols["device"])
    alloc, reserved = _totals(cols, snap["end_alloc"], snap["end_reserved"])
    table = pa.table({
        "timestamp_ns": pa.array(np.array(cols["time_us"], dtype=np.int64) * 1000, pa.int64()),
        "device_id": pa.array(cols["device"], pa.int32()),
        "action": pa.array(cols["action"], pa.string()),
        "bytes": pa.array(cols["size"], pa.int64()),
        "address": pa.array(cols["addr"], pa.int64()),
        "stream_id": pa.array(cols["stream"], pa.int64()),
        "total_allocated_bytes": pa.array(alloc, pa.int64()),
        "total_reserved_bytes": pa.array(reserved, pa.int64()),
        "frame": pa.array(cols["frame"], pa.string()),
        "seq": pa.array(np.arange(n, dtype=np.int64)),
        "device_type": pa.array(["cuda"] * n, pa.string()),
        "source": pa.array(["snapshot"] * n, pa.string()),
    })
    writer.write_table("allocator_events", [table])
    skipped = {k: v for k, v in counts.items() if k != "action snapshot"}
    if skipped:
        writer.warn(f"{path.name}: {sum(skipped.values())} snapshot entrie(s) were not read: "
                    + ", ".join(f"{v} {k}" for k, v in sorted(skipped.items())))
    writer.manifest["sources"][NAME] = {
        "format": "torch-memory-snapshot",
        "clock": "timestamp_ns = time_us x 1000 (the allocator's clock, Unix epoch)",
        "devices": snap["devices"],
        "segments": snap["segments"],
        "entries": n,
        "skipped": counts,
    }
