"""Kineto collector, memory: ``[memory]`` and ``[OutOfMemory]`` instant events to ``memory_events``.

A PyTorch profiler trace taken with ``profile_memory=True`` holds one instant event (``ph: i``,
``cat: cpu_instant_event``) named ``[memory]`` per allocation or free made through PyTorch's
allocators, on the host thread that made it, with args::

    Addr             address of the block
    Bytes            size; negative for a free
    Total Allocated  bytes the allocator has allocated on the device after the event
    Total Reserved   bytes it holds from the device (the CUDA caching allocator's segments)
    Device Type      c10::DeviceType number (0 CPU, 1 CUDA, ...)
    Device Id        device index (-1 for the CPU)

``[OutOfMemory]`` events (an allocation that failed) carry Bytes (the request), the totals and the
device. The mapping below is data (:data:`DEVICE_TYPES`, :data:`EVENT_ACTIONS`); the pass over the
events calls :func:`add_event`, the end of the trace :func:`memory_batches`.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tracekit.collectors.kineto.mapping import MEMORY_PART as PART
from tracekit.collectors.kineto.mapping import to_int
from tracekit.collectors.kineto.reader import to_ns
from tracekit.errors import InputError

i64, s = pa.int64(), pa.string()

# c10::DeviceType numbers (c10/core/DeviceType.h) -> memory_events.device_type. ROCm builds of
# PyTorch report their GPUs as CUDA (1).
DEVICE_TYPES = {0: "cpu", 1: "cuda", 2: "mkldnn", 6: "hip", 9: "xla", 12: "xpu", 13: "mps",
                15: "hpu", 19: "mtia", 20: "privateuseone"}
EVENT_ACTIONS = {"[memory]": "alloc", "[OutOfMemory]": "oom"}  # a negative Bytes makes 'free'
_I64 = 2**63


def _int(v):
    """An integer arg (int, integral Decimal/float, numeric text) that fits int64, else None."""
    v = to_int(v)
    return v if v is None or -_I64 <= v < _I64 else None


def add_event(cols, e: dict, st) -> None:
    """Append one ``[memory]`` / ``[OutOfMemory]`` event to the part ``cols`` (a
    :class:`~tracekit.collectors.kineto.mapping.Columns`); an event without a size, a device or
    a time is counted in ``st.skipped`` (the manifest and a warning say how many)."""
    a = e.get("args") or {}
    name = e.get("name")
    size, dtype = _int(a.get("Bytes")), _int(a.get("Device Type"))
    try:
        ts = to_ns(e.get("ts"))
    except ValueError:
        ts = None
    dev = _int(a.get("Device Id"))
    if size is None or dtype is None or ts is None or (dev is None and dtype != 0):
        key = f"{name} without Bytes, Device Type or ts"
        st.skipped[key] = st.skipped.get(key, 0) + 1
        return
    c = cols.cols
    c["seq"].append(st.memory_rows)
    st.memory_rows += 1
    c["timestamp_ns"].append(ts)
    c["pid"].append(_int(e.get("pid")))
    c["tid"].append(_int(e.get("tid")))
    c["device_type"].append(DEVICE_TYPES.get(dtype, f"type {dtype}"))
    c["device_id"].append(-1 if dev is None else (dev if -2**31 <= dev < 2**31 else None))
    action = EVENT_ACTIONS[name]
    if action == "alloc" and size < 0:
        action = "free"
    c["action"].append(action)
    c["bytes"].append(abs(size) if abs(size) < _I64 else None)
    c["address"].append(_int(a.get("Addr")) if action != "oom" else None)
    c["total_allocated_bytes"].append(_int(a.get("Total Allocated")))
    c["total_reserved_bytes"].append(_int(a.get("Total Reserved")))
    cols.n += 1
    st.counts[name] = st.counts.get(name, 0) + 1


def warn_dropped(st, writer) -> None:
    """Say how many memory events were dropped for lack of a size, a device or a time."""
    for name in EVENT_ACTIONS:
        n = st.skipped.get(f"{name} without Bytes, Device Type or ts", 0)
        if n:
            writer.warn(f"{st.path.name}: {n} {name} event(s) have no numeric Bytes, Device Type "
                        "or ts and were dropped from memory_events")


def memory_batches(parts, states):
    """The memory_events rows of every trace: timestamps on the run's clock (+ base time),
    source 'kineto', seq unique over the run (traces in input order)."""
    offset = 0
    for st in states:
        files = [p for fi, p in parts.files[PART] if fi == st.index]
        for p in files:
            t = pq.read_table(p)
            try:
                ts = pc.add_checked(t.column("timestamp_ns"), pa.scalar(st.base_ns, i64))
            except pa.ArrowInvalid:
                raise InputError("timestamps + baseTimeNanoseconds overflow int64 nanoseconds",
                                 path=st.path) from None
            t = t.set_column(t.schema.get_field_index("timestamp_ns"), "timestamp_ns", ts)
            t = t.set_column(0, "seq", pc.add(t.column("seq"), pa.scalar(offset, i64)))
            t = t.filter(pc.and_(pc.is_valid(t.column("device_id")), pc.is_valid(t.column("bytes"))))
            yield t.append_column("source", pa.array(["kineto"] * len(t), s))
            p.unlink()
        offset += st.memory_rows


def column_sources() -> dict[tuple[str, str], str]:
    """{(memory_events, column): Kineto source}, for docs/schema.md."""
    t = "memory_events"
    return {
        (t, "timestamp_ns"): "ts (us) x 1000 + baseTimeNanoseconds of [memory] / [OutOfMemory] instant events",
        (t, "pid"): "pid", (t, "tid"): "tid",
        (t, "device_type"): "args['Device Type'] (0 cpu, 1 cuda, ...)",
        (t, "device_id"): "args['Device Id'] (-1 for the CPU)",
        (t, "action"): "'alloc' (Bytes > 0), 'free' (Bytes < 0), 'oom' ([OutOfMemory])",
        (t, "bytes"): "abs(args.Bytes)",
        (t, "address"): "args.Addr",
        (t, "total_allocated_bytes"): "args['Total Allocated']",
        (t, "total_reserved_bytes"): "args['Total Reserved']",
        (t, "source"): "'kineto'",
        (t, "seq"): "order of the event in the trace (traces in input order)",
    }
