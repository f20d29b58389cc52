"""A run folder as a Chrome trace-event JSON file: the format Perfetto UI (ui.perfetto.dev) and
chrome://tracing open (``tracekit timeline RUN -o FILE.json[.gz]``; docs/timeline.md).

Layout of the file: one trace process per host process of the run (named with ``process_name``
and ordered with ``process_sort_index`` metadata: rank, process name, pid, GPUs), holding one
track per GPU stream (kernels ``cat`` ``kernel``, ``memcpy``, ``memset``), one per host thread
(CUDA API calls ``cuda_api``, push/pop NVTX ranges ``nvtx`` or the framework's annotation kind,
OS runtime calls ``osrt``, marks ``nvtx_mark``), one for start/end NVTX ranges and one per stream
for CUDA synchronizations; flow arrows (``s``/``f``, cat ``launch``) from each API call to the
GPU work it launched; and one process per GPU with its ``gpu_metrics`` samples as counters.

Exactness: ``ts`` and ``dur`` are microseconds written with three decimals from integer
nanoseconds (no float arithmetic), relative to the window's first event (``otherData.
time_origin_ns`` gives that time on the trace clock), so every value stays far inside a double's
exact range and Perfetto reads back the same nanoseconds.

Nesting: Perfetto drops complete events that partially overlap another one on the same track.
Each logical track's events arrive sorted by start (longest first); each goes onto the lane
whose open event encloses it (the innermost one), else onto the first lane with nothing open,
else onto a new lane, written as a track of its own (``... (overlap N)``). So every lane nests
and no event is lost.

Streaming: events come from the named query ``timeline_events`` as Arrow batches (DuckDB sorts
out of core) and go straight to the file; memory holds the open events of the current track
only. A temporary file is renamed over the output when complete.
"""

from __future__ import annotations

import gzip
import io
import json
import os
from collections.abc import Iterator

from tracekit.errors import InputError
from tracekit.labels import label
from tracekit.limits import DEFAULT_MAX_EVENTS
from tracekit.outfile import STDOUT, check_output, write_output

_INF = float("inf")
_TRACK_GROUP = {"stream": 0, "thread": 1, "ranges": 2, "sync": 3}
# a name from the trace longer than this is cut in the file (counted: tracekit.labels): a 1 MiB
# kernel name on each of its launches made 11.7 MB of JSON for 79 kernels; real (templated C++)
# kernel names stay under it
NAME_CHARS = 4096


def _shown(name: str | None) -> str | None:
    """A name from the trace as the timeline shows it: control and format characters (ESC, bidi
    overrides, line separators) as escapes, cut at NAME_CHARS (tracekit.labels.label)."""
    if name is None or (len(name) <= NAME_CHARS and name.isprintable()):
        return name
    return label(name, NAME_CHARS)


def _shown_fields(fields: str, name: str) -> str:
    """``fields`` (timeline_events' JSON members, ``"cat":..,"name":..,"ts":..``) with the name
    made :func:`_shown`, when it must be; the first ``,"ts":`` ends the name (a quote inside a
    JSON string is escaped)."""
    if len(name) <= NAME_CHARS and name.isprintable():
        return fields
    head = fields[:fields.index(',"name":')]
    return head + ',"name":' + json.dumps(_shown(name)) + fields[fields.index(',"ts":'):]


def us(ns: int) -> str:
    """Integer nanoseconds as microseconds with exactly three decimals: 1234567 -> '1234.567'."""
    sign = "-" if ns < 0 else ""
    q, r = divmod(abs(ns), 1000)
    return f"{sign}{q}.{r:03d}"


class Lanes:
    """Nesting lanes of one logical track.

    :meth:`place` takes events in (start ascending, end descending) order and returns the lane
    (0, 1, ...) where the event nests: every lane's events form a proper tree (each event either
    ends before the next one starts or encloses it). ``end=None`` is an event that never ended.
    """

    def __init__(self):
        self.stacks: list[list[tuple[float, int]]] = []  # per lane: open (end, start), innermost last

    def place(self, start: int, end: int | None) -> int:
        end_v = _INF if end is None else end
        enclosing, enclosing_start, empty = None, None, None
        for i, st in enumerate(self.stacks):
            while st and st[-1][0] <= start:
                st.pop()
            if not st:
                if empty is None:
                    empty = i
            elif st[-1][0] >= end_v and (enclosing is None or st[-1][1] > enclosing_start):
                enclosing, enclosing_start = i, st[-1][1]
        lane = enclosing if enclosing is not None else empty
        if lane is None:
            lane = len(self.stacks)
            self.stacks.append([])
        self.stacks[lane].append((end_v, start))
        return lane


class _Tracks:
    """Trace pids and tids: one trace process per (run) process key, one tid per track lane."""

    def __init__(self, names: dict):
        self.names = names
        self.pids: dict = {}  # process key -> trace pid
        self.proc_info: dict = {}  # trace pid -> {"pid", "rank", "devices"}
        self.tids: dict = {}  # (process key, track, device, stream, tid, lane) -> trace tid

    def pid(self, key, rank) -> int:
        p = self.pids.get(key)
        if p is None:
            p = self.pids[key] = len(self.pids) + 1
            self.proc_info[p] = {"pid": key, "rank": rank, "devices": set()}
        return p

    def tid(self, key) -> int:
        t = self.tids.get(key)
        if t is None:
            t = self.tids[key] = len(self.tids) + 1
        return t

    def metadata(self) -> Iterator[dict]:
        """process_name / process_sort_index / thread_name / thread_sort_index events."""
        procs, threads, devices = self.names["process"], self.names["thread"], self.names["device"]
        for p, info in self.proc_info.items():
            pid, rank = info["pid"], info["rank"]
            if rank is None and pid in procs:
                rank = procs[pid][1]
            parts = [] if rank is None else [f"rank {rank}"]
            if pid is None:
                parts.append("GPU activity (launching process unknown)")
            else:
                pname = _shown(procs.get(pid, (None, None))[0])
                parts.append(f"{pname} pid {pid}" if pname else f"pid {pid}")
            for d in sorted(info["devices"]):
                parts.append(f"GPU {d}" + (f" {_shown(devices[d])}" if devices.get(d) else ""))
            sort = (rank if rank is not None else 1_000_000) * 1000 + p
            yield {"ph": "M", "name": "process_name", "pid": p, "args": {"name": " · ".join(parts)}}
            yield {"ph": "M", "name": "process_sort_index", "pid": p, "args": {"sort_index": sort}}
            if rank is not None:
                yield {"ph": "M", "name": "process_labels", "pid": p, "args": {"labels": f"rank {rank}"}}
        for (key, track, device, stream, tid, lane), t in self.tids.items():
            if track == "stream":
                label = f"GPU {device} stream {stream}"
            elif track == "sync" and stream is None:  # event syncs and context-wide syncs
                label = f"GPU {device} context synchronization"
            elif track == "sync":
                label = f"GPU {device} stream {stream} synchronization"
            elif track == "ranges":
                label = "NVTX start/end ranges"
            elif track == "thread":
                tname = _shown(threads.get((key, tid)))
                label = f"{tname} (tid {tid})" if tname else f"thread {tid}"
            else:  # counter processes have no threads
                continue
            if lane:
                label += f" (overlap {lane})"
            yield {"ph": "M", "name": "thread_name", "pid": self.pids[key], "tid": t, "args": {"name": label}}
            yield {"ph": "M", "name": "thread_sort_index", "pid": self.pids[key], "tid": t,
                   "args": {"sort_index": _TRACK_GROUP[track] * 1_000_000 + t}}


def _names(eng) -> dict:
    out = {"process": {}, "thread": {}, "device": {}}
    for r in eng.query("timeline_names").to_pylist():
        if r["kind"] == "process":
            out["process"][r["pid"]] = (r["name"], r["rank"])
        elif r["kind"] == "thread":
            out["thread"][(r["pid"], r["tid"])] = r["name"]
        elif r["device_id"] is not None:
            out["device"][r["device_id"]] = r["name"]
    return out


def _params(**kw) -> dict[str, str]:
    return {k: str(v) for k, v in kw.items() if v is not None}


def _ranges(numbers: str) -> str:
    """'0,1,2,3,7,9,10' -> '0-3, 7, 9-10'."""
    from tracekit.query.filters import number_ranges

    return number_ranges(x for x in numbers.split(",") if x.strip().lstrip("-").isdigit())


def resolve_window(eng, *, start_ns=None, end_ns=None, step=None, ranks=None,
                   max_events=DEFAULT_MAX_EVENTS) -> dict:
    """The ``timeline_window`` row for these options: window, event count, cut. ``start_ns`` /
    ``end_ns`` given as text starting with '+' are relative to the run's first event.
    Raises :class:`InputError` for a step the run does not have or an empty window."""
    rel = [v for v in (start_ns, end_ns) if isinstance(v, str) and v.startswith("+")]
    if rel:
        first = eng.query("timeline_window", _params(ranks=ranks)).to_pylist()[0]["first_ns"] or 0
        start_ns, end_ns = ((first + int(v[1:])) if isinstance(v, str) and v.startswith("+") else v
                            for v in (start_ns, end_ns))
    if start_ns is not None and end_ns is not None and int(end_ns) <= int(start_ns):
        raise InputError(f"--end ({end_ns}) must be after --start ({start_ns})")
    w = eng.query("timeline_window", _params(start_ns=start_ns, end_ns=end_ns, step=step, ranks=ranks,
                                              max_events=max_events or 0)).to_pylist()[0]
    if step is not None and w["start_ns"] is None:
        have = f"steps {_ranges(w['steps'])}" if w["steps"] else "no training steps (docs/metrics.md, Steps)"
        raise InputError(f"no step {step} in the run (it has {have})", path=eng.runs[0].path)
    if not w["events"]:
        where = "" if start_ns is None and end_ns is None and step is None else " in the window"
        who = f" of ranks {ranks}" if ranks else ""
        raise InputError(f"no timeline events{who}{where}: the run has no kernels, copies, CUDA API "
                         "calls, NVTX ranges or OS runtime calls there", path=eng.runs[0].path)
    return w


def write_timeline(run_dir: str | os.PathLike, output: str | os.PathLike, *, start_ns=None, end_ns=None,
                   step: int | None = None, ranks: str | None = None,
                   max_events: int | None = DEFAULT_MAX_EVENTS, force: bool = False,
                   memory_limit: str | None = None, critical_path: bool = False) -> dict:
    """Write the timeline of ``run_dir`` to ``output`` (``.json``, or gzip for ``.json.gz``).

    ``start_ns``/``end_ns``: window on the trace clock (ns; text '+N' = N ns after the first
    event); ``step``: the span of training step N instead; ``ranks``: '0,3' keeps those ranks'
    processes; ``max_events``: end the window early so that at most this many events are
    written (None or 0: no cut); ``memory_limit``: DuckDB's (e.g. '1GB'; its sort spills past
    it); ``critical_path``: add a process "critical path" with the segments of the replay's
    critical path in the window (query critical_path, docs/whatif.md). Returns a summary dict:
    ``events``, ``kernels``, ``kernel_ns`` (summed kernel durations written), ``flows``,
    ``processes``, ``tracks``, ``overlap_tracks`` (extra lanes), ``window`` (start, end on the
    trace clock), ``time_origin_ns``, ``cut`` (None, or {"at_ns", "events_total",
    "events_kept"}), ``by_cat`` {cat: events}.
    Raises :class:`InputError` for a bad option, an existing output without ``force``, or a
    window with no events; :class:`~tracekit.errors.RunFolderError` for a bad run folder.
    """
    from tracekit.query import Session
    from tracekit.runfolder import open_run

    open_run(run_dir)  # a bad run folder is the first thing to report
    text = os.fspath(output)
    if text != STDOUT and not (text.endswith(".json") or text.endswith(".json.gz")):
        raise InputError("the timeline file must end in .json or .json.gz (or - for standard output)", path=text)
    check_output(text, [run_dir], create_parent=True)  # never inside the run folder it reads
    if text != STDOUT and os.path.isfile(text) and not force:
        raise InputError("already exists (use --force to replace it)", path=text)
    if ranks is not None:
        try:
            ranks = ",".join(str(int(r)) for r in str(ranks).split(",") if r.strip())
        except ValueError:
            raise InputError(f"--ranks {ranks!r}: expected comma-separated integers, e.g. 0,3") from None
    with Session([run_dir], memory_limit=memory_limit) as eng:
        w = resolve_window(eng, start_ns=start_ns, end_ns=end_ns, step=step, ranks=ranks,
                           max_events=max_events)
        w0, w1 = w["start_ns"], (w["cut_ns"] if w["cut_ns"] is not None else w["end_ns"])
        origin = w["first_ns"]
        names = _names(eng)
        meta = {"run_id": eng.runs[0].run_id, "time_origin_ns": origin,
                "window_start_ns": w0, "window_end_ns": w1, "tracekit": "tracekit timeline"}
        if w["cut_ns"] is not None:
            meta["cut"] = (f"cut at {w['kept_events']} of {w['events']} events (--max-events "
                           f"{max_events}): events starting at or after {w['cut_ns']} ns are not written")
        done: dict = {}

        def write(fb) -> None:
            raw = gzip.GzipFile(fileobj=fb, mode="wb", mtime=0) if text.endswith(".gz") else fb
            f = io.TextIOWrapper(raw, encoding="utf-8", newline="\n", write_through=False)
            done.update(_write(eng, f, names, origin, _params(start_ns=w0, end_ns=w1, ranks=ranks),
                               critical=critical_path))
            f.write('],\n"otherData": ' + json.dumps(meta) + "}\n")
            f.flush()
            f.detach()
            if raw is not fb:
                raw.close()  # the gzip trailer; fb stays open for write_output

        # atomically (temporary file + rename), through devices and pipes, parent folder made
        write_output(text, write, [run_dir], create_parent=True)
        summary = done
    summary.update(window=(w0, w1), time_origin_ns=origin,
                   cut=None if w["cut_ns"] is None else {"at_ns": w["cut_ns"], "events_total": w["events"],
                                                         "events_kept": w["kept_events"]})
    return summary


def _critical_track(eng, f, first: bool, origin: int, params: dict, pid: int) -> int:
    """Write the segments of the replay's critical path (query critical_path) that overlap the
    window as one track of process ``pid``: name = category, args = rank, event name, step."""
    lo = int(params["start_ns"]) if params.get("start_ns") not in (None, "NULL") else None
    hi = int(params["end_ns"]) if params.get("end_ns") not in (None, "NULL") else None
    buf = []
    tids: dict = {}  # one track per step: the windows of consecutive job steps overlap
    for r in eng.query("critical_path").to_pylist():
        a, b = r["start_ns"], r["start_ns"] + r["dur_ns"]
        if r["dur_ns"] <= 0 or (lo is not None and b <= lo) or (hi is not None and a >= hi):
            continue
        key = (r["run_id"], r["step"])
        if key not in tids:
            tids[key] = len(tids) + 1
            buf.append(json.dumps({"ph": "M", "name": "thread_name", "pid": pid, "tid": tids[key],
                                   "args": {"name": f"critical path, step {r['step']}"}}))
        args = json.dumps({"rank": r["rank"], "event": r["name"], "step": r["step"]})
        buf.append(f'{{"ph":"X","cat":"critical_path","name":{json.dumps(r["category"])},"pid":{pid},'
                   f'"tid":{tids[key]},"ts":{us(a - origin)},"dur":{us(b - a)},"args":{args}}}')
    if buf:
        f.write(("" if first else ",\n") + ",\n".join(buf))
    return len(buf) - len(tids)


def _write(eng, f, names: dict, origin: int, params: dict, critical: bool = False) -> dict:
    tracks = _Tracks(names)
    by_cat: dict[str, int] = {}
    kernels = kernel_ns = flows = 0
    f.write('{"traceEvents": [\n')
    first = True
    track_key, lanes = None, None
    for batch in eng.query_batches("timeline_events", dict(params, origin_ns=str(origin))):
        col = batch.column
        names = batch.schema.names
        cols = [col(names.index(n)).to_pylist() for n in
                ("pid", "rank", "track", "device_id", "stream_id", "tid", "cat", "start_ns", "end_ns",
                 "flow_id", "flow_out", "ts", "fields", "name")]
        buf = []
        for (pid, rank, track, device, stream, tid, cat, start, end, flow_id, flow_out, ts, fields,
             name) in zip(*cols):
            fields = _shown_fields(fields, name)
            key = (pid, track, device, stream, tid)
            if key != track_key:
                track_key, lanes = key, Lanes()
                p = tracks.pid(pid, rank)
                if track == "stream":
                    tracks.proc_info[p]["devices"].add(device)
            if cat == "nvtx_mark":
                t = tracks.tid(key + (0,))
                buf.append(f'{{"ph":"i","s":"t","pid":{p},"tid":{t},{fields}}}')
            else:
                t = tracks.tid(key + (lanes.place(start, end),))
                buf.append(f'{{"ph":"{"B" if end is None else "X"}","pid":{p},"tid":{t},{fields}}}')
                if cat == "kernel" and end is not None:
                    kernels += 1
                    kernel_ns += end - start
            by_cat[cat] = by_cat.get(cat, 0) + 1
            if flow_id is not None:
                buf.append(f'{{"ph":"f","bp":"e","cat":"launch","name":"launch","id":{flow_id},'
                           f'"pid":{p},"tid":{t},"ts":{ts}}}')
            if flow_out:
                flows += len(flow_out)
                for fid in flow_out:
                    buf.append(f'{{"ph":"s","cat":"launch","name":"launch","id":{fid},'
                               f'"pid":{p},"tid":{t},"ts":{ts}}}')
        if buf:
            f.write(("" if first else ",\n") + ",\n".join(buf))
            first = False
    counters = 0
    gpu_pid: dict = {}
    for batch in eng.query_batches("timeline_counters", {k: v for k, v in params.items() if k != "ranks"}):
        cols = {n: batch.column(i).to_pylist() for i, n in enumerate(batch.schema.names)}
        buf = []
        for gpu, dev, metric, ts_ns, value in zip(cols["gpu_id"], cols["device_id"], cols["metric_name"],
                                                  cols["timestamp_ns"], cols["value"]):
            if gpu not in gpu_pid:
                gpu_pid[gpu] = (len(tracks.pids) + len(gpu_pid) + 1, dev)
            if value is None or value != value:
                continue
            buf.append(f'{{"ph":"C","cat":"gpu_metrics","name":{json.dumps(metric)},"pid":{gpu_pid[gpu][0]},'
                       f'"ts":{us(ts_ns - origin)},"args":{{"value":{json.dumps(value)}}}}}')
            counters += 1
        if buf:
            f.write(("" if first else ",\n") + ",\n".join(buf))
            first = False
    if counters:
        by_cat["gpu_metrics"] = counters
    from tracekit.timeline.memory import write_memory_counters

    mem, first, mem_meta = write_memory_counters(eng, f, tracks, params, us, origin, first)
    if mem:
        by_cat["memory"] = mem
    if critical:
        cp_pid = len(tracks.pids) + len(gpu_pid) + 1
        n_cp = _critical_track(eng, f, first, origin, params, cp_pid)
        if n_cp:
            by_cat["critical_path"] = n_cp
            first = False
            gpu_pid["critical path"] = (cp_pid, None)
    meta = list(tracks.metadata()) + mem_meta
    for gpu, (p, dev) in gpu_pid.items():
        label = "critical path (tracekit whatif)" if gpu == "critical path" else \
            f"GPU {gpu} metrics" + (f" (device {dev})" if dev is not None else "")
        meta.append({"ph": "M", "name": "process_name", "pid": p, "args": {"name": label}})
        meta.append({"ph": "M", "name": "process_sort_index", "pid": p, "args": {"sort_index": 2_000_000_000 + p}})
    if meta:
        f.write(("" if first else ",\n") + ",\n".join(json.dumps(m) for m in meta))
    lanes_total = len(tracks.tids)
    base_tracks = len({k[:5] for k in tracks.tids})
    return {"events": sum(by_cat.values()), "kernels": kernels, "kernel_ns": kernel_ns, "flows": flows,
            "processes": len(tracks.pids) + len(gpu_pid), "tracks": lanes_total,
            "overlap_tracks": lanes_total - base_tracks, "by_cat": by_cat}
