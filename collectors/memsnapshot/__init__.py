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
memory limit (:mod:`~tracekit.collectors.memsnapshot.safe_pickle`). A file that names a global,
is cut short, needs too much memory or is not a snapshot is an
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
from tracekit.errors import InputError
from tracekit.progress import NULL_PROGRESS, Progress
from tracekit.runfolder import RunWriter

NAME = "memsnapshot"
__all__ = ["ACTIONS", "NAME", "collect", "column_sources", "load_snapshot", "sniff"]

ACTIONS = {"alloc": "alloc", "free_requested": "free", "free_completed": "free_completed",
           "segment_alloc": "segment_alloc", "segment_map": "segment_alloc",
           "segment_free": "segment_free", "segment_unmap": "segment_free", "oom": "oom"}
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


# Memory the unpickling process may use: a snapshot unpickles to a few times its size.
LOAD_MEMORY_BASE = 1 << 30
LOAD_MEMORY_PER_BYTE = 24
LOAD_TIMEOUT_S = 3600


def load_snapshot(path: Path, scratch: Path | None = None) -> dict:
    """The snapshot in ``path``, unpickled by :mod:`safe_pickle` in a child process (every global
    refused, memory limited to :data:`LOAD_MEMORY_BASE` + :data:`LOAD_MEMORY_PER_BYTE` x the
    file's size), then read back here with the same refusing unpickler. ``scratch``: a folder
    for the child's output (default: a temporary folder). :class:`InputError` when the file is
    cut short, names a class or function, needs more memory, or is not a snapshot."""
    import subprocess
    import sys
    import tempfile

    from tracekit.collectors.memsnapshot import safe_pickle

    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", path=path) from None
    with tempfile.TemporaryDirectory(dir=scratch, prefix=".snapshot-") as tmp:
        out = Path(tmp) / "plain.pickle"
        limit = LOAD_MEMORY_BASE + LOAD_MEMORY_PER_BYTE * size
        try:
            proc = subprocess.run([sys.executable, "-I", safe_pickle.__file__, str(path), str(out), str(limit)],
                                  check=False, capture_output=True, text=True, timeout=LOAD_TIMEOUT_S,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise InputError(f"unpickling took more than {LOAD_TIMEOUT_S} s; refused", path=path) from None
        reason = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        if proc.returncode == safe_pickle.REFUSED:
            raise InputError(f"not a safe memory snapshot: {reason}", path=path)
        if proc.returncode != 0:
            raise InputError(f"cannot read the memory snapshot pickle: {reason}", path=path)
        with open(out, "rb") as f:
            obj = safe_pickle.NoGlobals(f).load()
    if not isinstance(obj, dict) or not isinstance(obj.get("segments"), list) \
            or not isinstance(obj.get("device_traces"), list):
        raise InputError("a pickle but not a PyTorch memory snapshot (a dict with 'segments' and "
                         "'device_traces' lists, as torch.cuda.memory._dump_snapshot writes)", path=path)
    return obj


def _int(v):
    return v if type(v) is int and -(2**63) <= v < 2**63 else None


def _frame(frames) -> str | None:
    """The innermost frame outside torch's own files (else the innermost) as 'file:line name'."""
    if not isinstance(frames, list):
        return None
    good = [f for f in frames if isinstance(f, dict) and isinstance(f.get("filename"), str)]
    if not good:
        return None
    pick = next((f for f in good if "/torch/" not in f["filename"] and not f["filename"].startswith("??")), good[0])
    return f"{pick['filename']}:{pick.get('line')} {pick.get('name')}"[:1000]


def _end_totals(segments: list) -> tuple[dict, dict]:
    alloc, reserved = {}, {}
    for s in segments:
        if not isinstance(s, dict):
            continue
        d = _int(s.get("device"))
        if d is None:
            continue
        alloc[d] = alloc.get(d, 0) + (_int(s.get("allocated_size")) or 0)
        reserved[d] = reserved.get(d, 0) + (_int(s.get("total_size")) or 0)
    return alloc, reserved


def _device_rows(device: int, trace: list, end_alloc: int, end_res: int, counts: dict, seq0: int) -> dict:
    rows = {k: [] for k in ("timestamp_ns", "action", "bytes", "address", "stream_id", "frame")}
    for e in trace:
        act = ACTIONS.get(e.get("action")) if isinstance(e, dict) else None
        if act is None:
            key = f"action {str(e.get('action'))[:40]}" if isinstance(e, dict) else "entry not a dict"
            counts[key] = counts.get(key, 0) + 1
            continue
        t, size = _int(e.get("time_us")), _int(e.get("size"))
        if t is None or size is None or size < 0 or not -(2**53) < t < 2**53:
            counts["entry without time_us or size"] = counts.get("entry without time_us or size", 0) + 1
            continue
        rows["timestamp_ns"].append(t * 1000)
        rows["action"].append(act)
        rows["bytes"].append(size)
        rows["address"].append(None if act == "oom" else _int(e.get("addr")))
        rows["stream_id"].append(_int(e.get("stream")))
        rows["frame"].append(_frame(e.get("frames")))
    n = len(rows["action"])
    size = np.array(rows["bytes"], dtype=np.int64)
    da = size * np.array([_ALLOC_DELTA.get(a, 0) for a in rows["action"]], dtype=np.int64)
    dr = size * np.array([_RESERVED_DELTA.get(a, 0) for a in rows["action"]], dtype=np.int64)
    # total after entry i = total at the snapshot - the changes of the entries after i
    after_a = np.concatenate([np.cumsum(da[::-1])[::-1][1:], [0]]) if n else da
    after_r = np.concatenate([np.cumsum(dr[::-1])[::-1][1:], [0]]) if n else dr
    rows["total_allocated_bytes"] = (end_alloc - after_a).tolist()
    rows["total_reserved_bytes"] = (end_res - after_r).tolist()
    rows["device_id"] = [device] * n
    rows["seq"] = list(range(seq0, seq0 + n))
    return rows


def collect(paths: list[Path], writer: RunWriter, progress: Progress = NULL_PROGRESS) -> None:
    """Convert one snapshot into ``writer``'s ``allocator_events`` (several snapshots of one
    process would repeat the same history: one file per run folder)."""
    if len(paths) > 1:
        raise InputError("give one memory snapshot per run folder (each holds the allocator's "
                         "whole history; several would count it twice)", path=paths[1])
    path = Path(paths[0])
    snap = load_snapshot(path, scratch=writer.path)
    writer.manifest["inputs"].append(describe_input(path, "torch-memory-snapshot"))
    end_alloc, end_res = _end_totals(snap["segments"])
    counts: dict = {}
    tables, seq = [], 0
    for device, trace in enumerate(snap["device_traces"]):
        if not isinstance(trace, list) or not trace:
            continue
        rows = _device_rows(device, trace, end_alloc.get(device, 0), end_res.get(device, 0), counts, seq)
        seq += len(rows["seq"])
        tables.append(rows)
    types = {"timestamp_ns": pa.int64(), "device_id": pa.int32(), "action": pa.string(), "bytes": pa.int64(),
             "address": pa.int64(), "stream_id": pa.int64(), "total_allocated_bytes": pa.int64(),
             "total_reserved_bytes": pa.int64(), "frame": pa.string(), "seq": pa.int64()}
    batches = []
    for rows in tables:
        n = len(rows["seq"])
        t = pa.table({k: pa.array(rows[k], type=v) for k, v in types.items()})
        t = t.append_column("device_type", pa.array(["cuda"] * n, pa.string()))
        batches.append(t.append_column("source", pa.array(["snapshot"] * n, pa.string())))
    writer.write_table("allocator_events", batches)
    skipped = {k: v for k, v in counts.items() if k != "action snapshot"}
    if skipped:
        writer.warn(f"{path.name}: {sum(skipped.values())} snapshot entrie(s) were not read: "
                    + ", ".join(f"{v} {k}" for k, v in sorted(skipped.items())))
    writer.manifest["sources"][NAME] = {
        "format": "torch-memory-snapshot",
        "clock": "timestamp_ns = time_us x 1000 (the allocator's clock, Unix epoch)",
        "devices": [d for d, tr in enumerate(snap["device_traces"]) if isinstance(tr, list) and tr],
        "segments": len(snap["segments"]),
        "entries": seq,
        "skipped": counts,
    }

