"""The memory counter tracks of ``tracekit timeline``: one Chrome-trace counter (``ph: C``, cat
``memory``) per device and memory source, named ``memory DEVICE (SOURCE)``, with the series
``allocated_bytes`` and (when recorded) ``reserved_bytes`` after every memory event in the
window (named query ``timeline_memory``). The counter sits in the trace process of the OS
process that allocated, so Perfetto shows it beside that process's threads and GPU streams; a
snapshot's events (no pid) get a process of their own."""

from __future__ import annotations

import json


def write_memory_counters(eng, f, tracks, params: dict, us, origin: int, first: bool) -> tuple[int, bool, list]:
    """Write the counter events to ``f`` (``first``: nothing written before them). Returns (events
    written, whether still nothing was written, metadata events for processes made here)."""
    n = 0
    own: dict = {}
    meta = []
    window = {k: v for k, v in params.items() if k in ("start_ns", "end_ns")}
    for batch in eng.query_batches("timeline_memory", window):
        cols = {k: batch.column(i).to_pylist() for i, k in enumerate(batch.schema.names)}
        buf = []
        for pid, device, source, ts_ns, alloc, res in zip(cols["pid"], cols["device"], cols["source"],
                                                          cols["timestamp_ns"], cols["allocated_bytes"],
                                                          cols["reserved_bytes"]):
            if pid is not None and pid in tracks.pids:
                p = tracks.pids[pid]
            else:
                if pid not in own:
                    own[pid] = len(tracks.pids) + 1_000 + len(own)
                    label = f"memory of pid {pid}" if pid is not None else "allocator snapshot"
                    meta.append({"ph": "M", "name": "process_name", "pid": own[pid], "args": {"name": label}})
                p = own[pid]
            args = {"allocated_bytes": alloc} if res is None else {"allocated_bytes": alloc, "reserved_bytes": res}
            buf.append(f'{{"ph":"C","cat":"memory","name":{json.dumps(f"memory {device} ({source})")},'
                       f'"pid":{p},"ts":{us(ts_ns - origin)},"args":{json.dumps(args)}}}')
            n += 1
        if buf:
            f.write(("" if first else ",\n") + ",\n".join(buf))
            first = False
    return n, first, meta
