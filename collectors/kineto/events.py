"""The streaming pass over one Kineto trace: every event to the columns of its table.

:func:`read_file` reads one trace with :class:`~tracekit.collectors.kineto.reader.TraceStream`
and fills the file's :class:`~tracekit.collectors.kineto.mapping.Columns` (flushed to Parquet
parts every :data:`~tracekit.collectors.kineto.mapping.CHUNK_ROWS` rows) and its
:class:`~tracekit.collectors.kineto.mapping.FileState` (counts, names, what was dropped). One
:class:`EventReader` method per event category; the mapping of args to columns is data
(``mapping.ARG``). Per event, so kept lean: local names, no per-event objects beyond the dicts
the JSON parser made.
"""

from __future__ import annotations

import contextlib
import gc
import json
import re

from tracekit.collectors.kineto import memory as MEM
from tracekit.collectors.kineto import reader as R
from tracekit.collectors.kineto.mapping import (
    ALL_PART_COLUMNS,
    ANNOTATION_DOMAINS,
    API_CATEGORIES,
    ARG,
    CHUNK_ROWS,
    COMM_OP,
    MEMCPY_NAME,
    MEMSET_NAME,
    NCCL_KERNEL,
    SYNC_TYPES,
    TRACEKIT_STEP,
    Columns,
    FileState,
    Parts,
    dim,
    input_dims,
    text_list,
    to_float,
    to_int,
)
from tracekit.progress import Progress


# --- small converters (per event; kept lean) ----------------------------------------------
def _well_shaped(e: dict) -> bool:
    """name/cat are text (or absent) and args an object (or absent): true for every event
    PyTorch writes; the rest go through :func:`_reshape`."""
    n, c, a = e.get("name"), e.get("cat"), e.get("args")
    return (n is None or type(n) is str) and (c is None or type(c) is str) and \
        (a is None or type(a) is dict)


def _reshape(e) -> dict | None:
    """A damaged event made safe to read: None when it is not an object; a non-object args
    dropped; a non-text name or category written as JSON text."""
    if not isinstance(e, dict):
        return None
    e = dict(e)
    if not isinstance(e.get("args"), (dict, type(None))):
        e["args"] = None
    for k in ("name", "cat"):
        if e.get(k) is not None and not isinstance(e[k], str):
            e[k] = json.dumps(e[k], default=str)
    return e


I64_MAX, I32_MAX = 2**63 - 1, 2**31 - 1


def fit(v, hi):
    """v when it fits a signed integer column with maximum hi, else None (a damaged size is
    unknown, not a reason to reject the trace)."""
    return v if v is None or -hi - 1 <= v <= hi else None


@contextlib.contextmanager
def gc_paused():
    """The cyclic garbage collector off while a trace streams: the parse allocates a dict per
    event, freed by reference counting (events hold no cycles), and the collections those
    allocations trigger took 14 % of the conversion time of a 174 MB trace."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class EventReader:
    """The columns of one trace being read, and one method per event category that appends an
    event's row (``start``/``dur`` in ns, ``a`` its args)."""

    def __init__(self, st: FileState, parts: Parts):
        self.st, self.parts = st, parts
        self.fi = st.index
        self.tabs = {t: Columns(t) for t in ALL_PART_COLUMNS}
        self.step_re = re.compile(TRACEKIT_STEP)
        # the X-event categories tracekit reads: category -> method
        self.by_cat = {"kernel": self.kernel, "gpu_memcpy": self.memcpy, "gpu_memset": self.memset,
                       "cuda_sync": self.sync, **dict.fromkeys(API_CATEGORIES, self.api),
                       **dict.fromkeys(ANNOTATION_DOMAINS, self.annotation)}

    def _done(self, t: Columns) -> None:
        t.n += 1
        if t.n >= CHUNK_ROWS:
            self.parts.flush(t, self.fi)

    def gpu_common(self, c, e, a, start, dur):
        c["start_ns"].append(start)
        c["end_ns"].append(start + dur)
        c["duration_ns"].append(dur)
        dev = a.get(ARG["device_id"])
        dev_id = to_int(dev) if dev is not None else to_int(e.get("pid"))
        if dev_id is None and dev is not None:
            self.st.bad_devices += 1  # "cuda:0", true, [0]: NULL, and said (_warn_dropped)
        c["device_id"].append(dev_id)
        c["context_id"].append(to_int(a.get(ARG["context_id"])))
        stream_id = a.get(ARG["stream_id"])
        c["stream_id"].append(to_int(stream_id) if stream_id is not None else to_int(e.get("tid")))
        c["correlation_id"].append(to_int(a.get(ARG["correlation_id"])))

    def comm_row(self, kernel, a, start=None, device=None, stream=None, corr=None):
        """A communication call's sizes (args of an NCCL kernel or of record_param_comms)."""
        st, t = self.st, self.tabs["_comms"]
        c = t.cols
        c["seq"].append(st.comm_rows)
        st.comm_rows += 1
        c["kernel"].append(kernel)
        c["external_id"].append(to_int(a.get(ARG["external_id"])))
        c["start_ns"].append(start)
        c["device_id"].append(device)
        c["stream_id"].append(stream)
        c["correlation_id"].append(corr)
        coll, dtype = a.get(ARG["collective"]), a.get(ARG["dtype"])
        c["collective"].append(coll if coll is None or type(coll) is str else str(coll))
        c["dtype"].append(dtype if dtype is None or type(dtype) is str else str(dtype))
        c["in_elements"].append(fit(to_int(a.get(ARG["in_elements"])), I64_MAX))
        c["out_elements"].append(fit(to_int(a.get(ARG["out_elements"])), I64_MAX))
        c["group_size"].append(fit(to_int(a.get(ARG["group_size"])), I32_MAX))
        pg = a.get(ARG["process_group"], a.get(ARG["process_group_alt"]))
        c["process_group"].append(pg if pg is None or type(pg) is str else str(pg))
        c["pg_seq"].append(fit(to_int(a.get(ARG["pg_seq"])), I64_MAX))
        kind = coll.lower() if type(coll) is str else ""
        peer = a.get("Dst Rank") if kind == "send" else a.get("Src Rank") if kind == "recv" else None
        c["peer_rank"].append(fit(to_int(peer), I32_MAX))
        self._done(t)

    def kernel(self, e, a, start, dur) -> bool:
        st = self.st
        name = e.get("name") or ""
        if start == 0 and dur == 0:
            st.invalid_kernels += 1
            st.invalid_kernel_names[name] = st.invalid_kernel_names.get(name, 0) + 1
            return False
        t = self.tabs["kernels"]
        c = t.cols
        self.gpu_common(c, e, a, start, dur)
        c["name"].append(name)
        g = a.get(ARG["grid"])
        bl = a.get(ARG["block"])
        c["grid_x"].append(dim(g, 0))
        c["grid_y"].append(dim(g, 1))
        c["grid_z"].append(dim(g, 2))
        c["block_x"].append(dim(bl, 0))
        c["block_y"].append(dim(bl, 1))
        c["block_z"].append(dim(bl, 2))
        c["registers_per_thread"].append(to_int(a.get(ARG["registers_per_thread"])))
        if ARG["collective"] in a or ("nccl" in name and NCCL_KERNEL.search(name)):
            self.comm_row(True, a, start, c["device_id"][-1], c["stream_id"][-1], c["correlation_id"][-1])
        self._done(t)
        return True

    def api(self, e, a, start, dur) -> bool:
        st, t = self.st, self.tabs["cuda_api"]
        c = t.cols
        pid = to_int(e.get("pid"))
        c["start_ns"].append(start)
        c["end_ns"].append(start + dur)
        c["duration_ns"].append(dur)
        c["pid"].append(pid)
        c["tid"].append(to_int(e.get("tid")))
        corr = to_int(a.get(ARG["correlation_id"]))
        c["correlation_id"].append(corr)
        c["name"].append(e.get("name") or "")
        c["api"].append(API_CATEGORIES[e.get("cat")])
        st.api_pids.add(pid)
        size = a.get(ARG["api_copy_bytes"]) if ARG["bytes"] not in a else a.get(ARG["bytes"])
        if size is not None and corr is not None:
            st.copy_sizes[corr] = to_int(size)
        self._done(t)
        return True

    def memcpy(self, e, a, start, dur) -> bool:
        t = self.tabs["memcpy"]
        c = t.cols
        self.gpu_common(c, e, a, start, dur)
        m = MEMCPY_NAME.match(e.get("name") or "")
        kind = k if type(k := a.get(ARG["memcpy_kind"])) is str and not k.isdigit() else None
        c["kind"].append(kind or (m.group(1) if m else "Unknown"))
        c["src_kind"].append(m.group(2) if m else None)
        c["dst_kind"].append(m.group(3) if m else None)
        c["bytes"].append(to_int(a.get(ARG["bytes"])))
        c["src_device_id"].append(to_int(a.get(ARG["src_device_id"], a.get(ARG["src_device_id_alt"]))))
        c["dst_device_id"].append(to_int(a.get(ARG["dst_device_id"], a.get(ARG["dst_device_id_alt"]))))
        bw = to_float(a.get(ARG["recorded_bandwidth_gb_s"]))
        finite = bw is not None and bw > 0 and bw == bw and bw != float("inf")
        c["recorded_bytes_per_s"].append(bw * 1e9 if finite else None)
        self._done(t)
        return True

    def memset(self, e, a, start, dur) -> bool:
        t = self.tabs["memset"]
        c = t.cols
        self.gpu_common(c, e, a, start, dur)
        m = MEMSET_NAME.match(e.get("name") or "")
        c["mem_kind"].append(m.group(1) if m else None)
        c["bytes"].append(to_int(a.get(ARG["bytes"])))
        self._done(t)
        return True

    def sync(self, e, a, start, dur) -> bool:
        t = self.tabs["cuda_sync"]
        c = t.cols
        self.gpu_common(c, e, a, start, dur)
        kind = a.get(ARG["sync_type"]) or e.get("name") or ""
        c["sync_type"].append(SYNC_TYPES.get(kind, kind))
        self._done(t)
        return True

    def annotation(self, e, a, start, dur) -> bool:
        st, t = self.st, self.tabs["nvtx_ranges"]
        c = t.cols
        cat = e.get("cat")
        name = e.get("name") or ""
        c["seq"].append(st.nvtx_rows)
        st.nvtx_rows += 1
        c["start_ns"].append(start)
        c["end_ns"].append(start + dur)
        c["duration_ns"].append(dur)
        c["name"].append(name)
        c["domain"].append(ANNOTATION_DOMAINS[cat])
        if cat == "cpu_op" and ARG["input_dims"] in a:
            # operator arguments (record_shapes=True): shapes, types, scalar values
            c["input_dims"].append(input_dims(a.get(ARG["input_dims"])))
            c["input_types"].append(text_list(a.get(ARG["input_types"])))
            c["concrete_inputs"].append(text_list(a.get(ARG["concrete_inputs"])))
        else:
            c["input_dims"].append(None)
            c["input_types"].append(None)
            c["concrete_inputs"].append(None)
        if cat == "cpu_op":
            c["op_id"].append(fit(to_int(a.get(ARG["op_id"])), I64_MAX))
            c["sequence_number"].append(fit(to_int(a.get(ARG["sequence_number"])), I64_MAX))
        else:
            c["op_id"].append(None)
            c["sequence_number"].append(None)
        if cat == "gpu_user_annotation":
            c["pid"].append(None)  # the host pid, filled at the end
            c["tid"].append(None)
            c["style"].append("start/end")
            c["category"].append(f"device {to_int(a.get('device', e.get('pid')))} "
                                 f"stream {to_int(a.get('stream', e.get('tid')))}")
        else:
            pid, tid = to_int(e.get("pid")), to_int(e.get("tid"))
            c["pid"].append(pid)
            c["tid"].append(tid)
            c["style"].append("push/pop")
            c["category"].append(None)
            st.cpu_threads.add((pid, tid))
            if cat == "user_annotation" and not st.has_tracekit_step and self.step_re.match(name):
                st.has_tracekit_step = True
            elif name == COMM_OP:
                self.comm_row(False, a)
        self._done(t)
        return True

    def complete(self, e) -> None:
        """A complete ('X') event: its timestamps, then the method of its category."""
        st = self.st
        cat = e.get("cat")
        try:
            start = R.to_ns(e.get("ts"))
            dur = R.to_ns(e.get("dur")) or 0
        except ValueError:
            st.bad_timestamps += 1
            return
        if start is None:
            st.bad_timestamps += 1
            return
        add = self.by_cat.get(cat) if type(cat) is str else None
        if add is None:
            st.skipped[cat] = st.skipped.get(cat, 0) + 1
            return
        if add(e, e.get("args") or {}, start, dur):
            st.counts[cat] = st.counts.get(cat, 0) + 1

    def flow(self, e, ph) -> None:
        """A flow start/end ('s'/'f') of a launch -> GPU activity link (cat ac2g)."""
        try:
            ts = R.to_ns(e.get("ts"))
        except ValueError:
            ts = None
        t = self.tabs["_flows"]
        c = t.cols
        c["id"].append(to_int(e.get("id")))
        c["is_start"].append(ph == "s")
        c["pid"].append(to_int(e.get("pid")))
        c["tid"].append(to_int(e.get("tid")))
        c["ts_ns"].append(ts)
        self._done(t)

    def memory(self, e) -> None:
        t = self.tabs[MEM.PART]
        MEM.add_event(t, e, self.st)
        if t.n >= CHUNK_ROWS:
            self.parts.flush(t, self.fi)


def read_file(st: FileState, parts: Parts, progress: Progress, range_counter: list[int]) -> None:
    """One streaming pass over one trace: fill parts and ``st``."""
    path = st.path
    parts.current = path
    advance = progress.task(f"kineto {path.name[:40]:<40}", total=path.stat().st_size)
    stream = R.TraceStream(path, on_bytes=advance)
    rd = EventReader(st, parts)
    skipped = st.skipped
    complete, flow, memory = rd.complete, rd.flow, rd.memory
    for e in stream:
        if type(e) is not dict or not _well_shaped(e):
            raw_cat = e.get("cat") if type(e) is dict else None
            e = _reshape(e)
            if raw_cat is not None and not isinstance(raw_cat, str):
                st.nontext_cats.add(e["cat"])
            if e is None:
                skipped["<event not a JSON object>"] = skipped.get("<event not a JSON object>", 0) + 1
                continue
        ph = e.get("ph")
        if ph == "X":
            complete(e)
        elif ph == "M":
            metadata_event(st, e)
        elif ph == "s" or ph == "f":
            if e.get("cat") == "ac2g":
                flow(e, ph)
        elif ph == "i" and e.get("name") in MEM.EVENT_ACTIONS:
            memory(e)
        else:
            key = f"ph={ph}"
            skipped[key] = skipped.get(key, 0) + 1
    for c in rd.tabs.values():
        parts.flush(c, rd.fi)
    st.metadata = stream.metadata
    st.metadata_complete = stream.metadata_complete
    st.strings_truncated = stream.guard.truncated
    st.surrogates_replaced = stream.surrogates.replaced
    st.events_seen = stream.events_seen


def metadata_event(st: FileState, e: dict) -> None:
    name = e.get("name")
    a = e.get("args") or {}
    pid = to_int(e.get("pid"))
    if pid is None:
        return
    if name == "process_name":
        st.process_names[pid] = str(a.get("name", ""))
    elif name == "process_labels":
        st.process_labels[pid] = str(a.get("labels", ""))
    elif name == "thread_name":
        tid = to_int(e.get("tid"))
        if tid is not None:
            st.thread_names[(pid, tid)] = str(a.get("name", ""))
