"""A physically consistent multi-rank job of Kineto traces, with its ground truth.

    from jobgen import make_job
    job = make_job(tmp_path, ranks=8, straggler=3, straggler_delay_ns=400_000, seed=1)
    convert(job.paths, tmp_path / "run")
    job.truth.offset_ns[r], job.truth.collectives[k]["skew_ns"], ...

Built from the shared NCCL Kineto trace (``kineto/kineto_a100_nccl_2ranks_rank0.json.gz``: rank 0
of a 2-rank A100 run, 21 NCCL collectives on stream 40, 15 AllReduce and 6 Broadcast, in
ProfilerStep#4-6). Every rank of the job is a copy of that trace whose *true* time line is
changed the way a real job's would be, then written on the rank's own *clock*:

1. **Arrivals.** Before collective k, rank r's work since the end of collective k-1 takes
   ``d[r][k]`` longer: a random jitter (uniform in ``jitter_ns``, every rank, rank 0 too), plus
   ``straggler_delay_ns`` on the straggler rank. The segment (end of k-1, start of k] of the
   rank's trace -- host and GPU work alike -- is stretched linearly by that amount, so the rank's
   NCCL kernel for k starts (arrives) ``d[r][k]`` late relative to the previous collective's
   end. Whole traces are never shifted.
2. **Collectives end together.** As NCCL does, the collective's kernel ends on every rank at the
   same true time: the last arrival plus the transfer time (the source kernel's duration). So an
   early rank's kernel is longer by its wait ``max_r d[r][k] - d[r][k]``. Other GPU activities
   that start during the collective keep their durations (moved, not stretched); host events
   are stretched with the time line (a host waiting in a sync waits longer).
   After collective k every rank is ``D[k] = sum_{j<=k} max_r d[r][j]`` behind the source trace.
   With ``end_jitter_ns`` each rank's kernel ends a random 0..end_jitter_ns after the
   collective's end instead (ring hops), and that rank's later work follows from its own end.
3. **Clocks.** Ranks are placed on hosts (``ranks_per_host`` consecutive ranks per host, host
   names ``node00``, ``node01``, ...; written as the trace's top-level ``hostname`` field, the
   way ``prof.add_metadata_json`` records it); ranks on one host share one clock. Host h's clock
   reads ``local = true + offset_ns[h] + drift_ppm[h] * 1e-6 * (true - t0_ns)``, with ``t0_ns`` the
   job's first true timestamp; rank 0's host is exact (offset 0, drift 0). Offsets and drifts
   are given, or drawn uniformly in +-``max_offset_ns`` / +-``max_drift_ppm``.

Every rank gets ``distributedInfo`` rank r of N (one process group "0" of all ranks, the
kernels' 'Group size' and 'Process Group Ranks' arguments to match), its own host pid
(source pid + r, unless ``same_pid``: then every rank keeps the source pid, as containers with
their own pid namespaces do), and on a host with several ranks, GPU ``local rank`` (device id
and GPU track pid) as its device. Times are integers of ns (the collector's ``start_ns``: the
trace's ``baseTimeNanoseconds`` + ts in ns); ts and dur are written as exact decimal numbers
of us with 3 decimals, as Kineto writes them.

The ground truth (:class:`Truth`) is in true time, i.e. on rank 0's clock. The interface is
shared with other tests (replay/what-if): changes to it are additive only.
"""

from __future__ import annotations

import gzip
import itertools
import json
import re
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

import numpy as np

FIXTURES = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures"
NCCL_TRACE = FIXTURES / "kineto" / "kineto_a100_nccl_2ranks_rank0.json.gz"
NCCL_NAME = re.compile(r"nccl(Dev)?Kernel_")
_GPU_ACTIVITY = ("kernel", "gpu_memcpy", "gpu_memset")
_NUM = "\u0001"  # marks a number written as text (exact decimals), unquoted after dumping
_NUM_RE = re.compile(r'"\\u0001(-?\d+(?:\.\d+)?)"')

_SOURCES: dict[Path, dict] = {}


@dataclass
class Truth:
    """What the generated job really did (ns integers on rank 0's clock unless said otherwise).

    ranks: N; hosts[r]: host name of rank r; host_of[r]: host index.
    offset_ns[r], drift_ppm[r]: rank r's clock minus true time at ``t0_ns``, and its drift:
      ``local = true + offset_ns[r] + drift_ppm[r] * 1e-6 * (true - t0_ns)`` (rank 0: 0, 0.0);
      ``to_local(r, t)`` / ``to_true(r, t)`` apply it.
    t0_ns: the job's first true timestamp (the earliest event of any rank).
    jitter_ns[r][k]: the random part of rank r's lateness before collective k (0-based, in
      source start order); delay_ns[r][k] = jitter plus the straggler's delay.
    collectives[k]: dict with collective ('AllReduce'/'Broadcast'), process_group ('0'), seq
      (1-based position among that type in the group), arrival_ns (list per rank: the rank's
      NCCL kernel start), first_arrival_ns, last_arrival_ns, skew_ns (last - first),
      last_rank, end_ns (the collective's end: last arrival + transfer_ns, where every rank's
      kernel ends without end_jitter_ns), transfer_ns (source duration), wait_ns (list per
      rank: last arrival - its arrival), end_ns_by_rank (list per rank: its kernel's end).
    steps[r]: list of (name, start_ns, end_ns) of the rank's ProfilerStep ranges.
    step_ns[r]: their durations; straggler (rank or None), straggler_delay_ns;
    straggler_added_ns[s]: the straggler's own added work in step s (its delay times the
      collectives that arrive inside that step on its time line).
    """

    ranks: int
    hosts: list[str]
    host_of: list[int]
    offset_ns: list[int]
    drift_ppm: list[float]
    t0_ns: int
    jitter_ns: list[list[int]]
    delay_ns: list[list[int]]
    collectives: list[dict]
    steps: list[list[tuple[str, int, int]]]
    step_ns: list[list[int]]
    straggler: int | None
    straggler_delay_ns: int
    straggler_added_ns: list[int]
    extra: dict = field(default_factory=dict)

    def to_local(self, rank: int, true_ns):
        """True time -> rank ``rank``'s clock (ns; ints give ints, rounded; arrays work too)."""
        d = true_ns - self.t0_ns
        return self.t0_ns + d + self.offset_ns[rank] + np.rint(self.drift_ppm[rank] * 1e-6 * d).astype(np.int64)

    def to_true(self, rank: int, local_ns):
        """Rank ``rank``'s clock -> true time (ns, rounded to integers)."""
        d = local_ns - self.t0_ns - self.offset_ns[rank]
        return self.t0_ns + np.rint(d / (1 + self.drift_ppm[rank] * 1e-6)).astype(np.int64)

    def offset_at(self, rank: int, true_ns: float) -> float:
        """Rank ``rank``'s clock minus true time at ``true_ns``."""
        return self.offset_ns[rank] + self.drift_ppm[rank] * 1e-6 * (true_ns - self.t0_ns)


@dataclass
class Job:
    paths: list[Path]
    truth: Truth


def _load(src: Path) -> dict:
    if src not in _SOURCES:
        with gzip.open(src, "rt", encoding="utf-8") as f:
            _SOURCES[src] = json.load(f, parse_float=Decimal)
    return _SOURCES[src]


def _ns(v) -> int:
    return int((Decimal(v) * 1000).to_integral_value())


def _host_pid(events: list[dict]) -> int:
    pids = {e.get("pid") for e in events if e.get("cat") in ("cpu_op", "cuda_runtime")}
    if len(pids) != 1:
        raise ValueError(f"the source trace has {len(pids)} host processes; jobgen needs one")
    return pids.pop()


def _collectives(events: list[dict]) -> list[tuple[int, int, str]]:
    """The source's NCCL kernels: (start ns, end ns, type), in start order; they must not overlap."""
    out = []
    for e in events:
        if e.get("cat") == "kernel" and NCCL_NAME.search(e.get("name", "")):
            s = _ns(e["ts"])
            name = (e.get("args") or {}).get("Collective name") or \
                re.search(r"nccl(?:Dev)?Kernel_([A-Za-z]+)", e["name"]).group(1)
            out.append((s, s + _ns(e["dur"]), {"allreduce": "AllReduce", "broadcast": "Broadcast"}.get(
                name.lower(), name)))
    out.sort()
    for a, b in itertools.pairwise(out):
        if b[0] < a[1]:
            raise ValueError("the source trace's NCCL kernels overlap; jobgen needs them in sequence")
    return out


def make_job(out_dir: str | Path, ranks: int = 8, *, seed: int = 0,
             offsets_ns: list[int] | None = None, drifts_ppm: list[float] | None = None,
             max_offset_ns: int = 3_000_000, max_drift_ppm: float = 20.0,
             jitter_ns: tuple[int, int] = (0, 20_000), straggler: int | None = None,
             straggler_delay_ns: int = 0, ranks_per_host: int = 1, same_pid: bool = False,
             source: str | Path = NCCL_TRACE, gzip_output: bool = False,
             end_jitter_ns: int = 0, write: bool = True, late_fraction: float = 1.0,
             jitter_from_first: bool = False) -> Job:
    """Write an N-rank job (``out_dir/trace_rank{r:05d}.json``) and return its paths and truth.

    offsets_ns / drifts_ppm: one per host (``ranks // ranks_per_host`` hosts; host 0 must be
    0 / 0.0), else drawn with ``seed``: uniform in +-max_offset_ns (integers) and
    +-max_drift_ppm. jitter_ns: (low, high) of each rank's random lateness before each
    collective, ns. straggler: the rank late by ``straggler_delay_ns`` more before every
    collective (None: no straggler). end_jitter_ns: each rank's kernel of a collective ends a
    random 0..end_jitter_ns after the collective's end (the last chunk's hops in a ring; 0: all
    end at the same time); the rank's work after it starts that much later. write=False: only
    the truth (no files; steps, step_ns and straggler_added_ns stay empty). late_fraction: the
    chance that a rank is late at all before a collective (its jitter is 0 otherwise: OS noise
    hits some ranks, not all; 1.0, the default, draws a jitter for every rank).
    jitter_from_first: each rank's jitter before a collective is its lateness behind the
    earliest rank there (the drawn jitter minus the smallest of the collective's draws), so
    the earliest rank is never late and every ns the jitter adds to a step is waiting at a
    collective (by default every rank is late by its own draw: the earliest rank's draw is
    work every rank did, not waiting). Raises ValueError on inconsistent arguments."""
    if ranks < 1 or ranks_per_host < 1 or ranks % ranks_per_host:
        raise ValueError("ranks must be a positive multiple of ranks_per_host")
    if straggler is not None and not 0 <= straggler < ranks:
        raise ValueError(f"straggler {straggler} is not a rank of {ranks}")
    rng = np.random.default_rng(seed)
    hosts = ranks // ranks_per_host
    if offsets_ns is None:
        offsets_ns = [0] + [int(x) for x in rng.integers(-max_offset_ns, max_offset_ns + 1, hosts - 1)]
    if drifts_ppm is None:
        drifts_ppm = [0.0] + [float(x) for x in rng.uniform(-max_drift_ppm, max_drift_ppm, hosts - 1)]
    if len(offsets_ns) != hosts or len(drifts_ppm) != hosts or offsets_ns[0] or drifts_ppm[0]:
        raise ValueError(f"give one offset and drift per host ({hosts}), host 0's zero")
    src = _load(Path(source))
    events = src["traceEvents"]
    hp = _host_pid(events)
    colls = _collectives(events)
    base = int(src.get("baseTimeNanoseconds", 0))
    times = [_ns(e["ts"]) for e in events if "ts" in e]
    first = min(times)
    lo, hi = jitter_ns
    jit = rng.integers(lo, hi + 1, size=(ranks, len(colls))) if hi > lo else \
        np.full((ranks, len(colls)), lo, dtype=np.int64)
    if late_fraction < 1.0:
        jit = np.where(rng.random(size=jit.shape) < late_fraction, jit, 0)
    if jitter_from_first:
        jit = jit - jit.min(axis=0, keepdims=True)
    delays = jit.copy()
    if straggler is not None:
        delays[straggler] += straggler_delay_ns

    host_of = [r // ranks_per_host for r in range(ranks)]
    truth = Truth(
        ranks=ranks, hosts=[f"node{h:02d}" for h in host_of], host_of=host_of,
        offset_ns=[int(offsets_ns[h]) for h in host_of], drift_ppm=[float(drifts_ppm[h]) for h in host_of],
        t0_ns=base + first, jitter_ns=jit.tolist(), delay_ns=delays.tolist(), collectives=[],
        steps=[], step_ns=[], straggler=straggler, straggler_delay_ns=straggler_delay_ns if straggler is not None
        else 0, straggler_added_ns=[])
    endj = rng.integers(0, end_jitter_ns + 1, size=(ranks, len(colls))) if end_jitter_ns > 0 else \
        np.zeros((ranks, len(colls)), dtype=np.int64)
    arrive = np.zeros((ranks, len(colls)), dtype=np.int64)  # source-relative, ns
    finish = np.zeros((ranks, len(colls)), dtype=np.int64)
    shift = np.zeros(ranks, dtype=np.int64)  # each rank's lag behind the source trace
    seqs: dict[str, int] = {}
    for k, (s, e, kind) in enumerate(colls):
        seqs[kind] = seqs.get(kind, 0) + 1
        arrive[:, k] = s + shift + delays[:, k]
        end = int(arrive[:, k].max()) + (e - s)
        finish[:, k] = end + endj[:, k]
        shift = finish[:, k] - e
        arr = [base + int(a) for a in arrive[:, k]]
        last = max(range(ranks), key=lambda r: (arr[r], -r))
        truth.collectives.append({
            "collective": kind, "process_group": "0", "seq": seqs[kind], "arrival_ns": arr,
            "first_arrival_ns": min(arr), "last_arrival_ns": max(arr), "skew_ns": max(arr) - min(arr),
            "last_rank": last, "end_ns": base + end, "transfer_ns": e - s,
            "wait_ns": [max(arr) - a for a in arr],
            "end_ns_by_rank": [base + int(z) for z in finish[:, k]]})

    out = Path(out_dir)
    paths = []
    if write:
        out.mkdir(parents=True, exist_ok=True)
    for r in range(ranks if write else 0):
        path = out / (f"trace_rank{r:05d}.json" + (".gz" if gzip_output else ""))
        steps = _write_rank(src, r, ranks, path, colls, arrive[r], finish[r], first, base, hp, truth,
                            ranks_per_host, same_pid, gzip_output)
        truth.steps.append(steps)
        truth.step_ns.append([b - a for _, a, b in steps])
        paths.append(path)
    if straggler is not None and write:
        for _, a, b in truth.steps[straggler]:
            n = sum(1 for c in truth.collectives if a <= c["arrival_ns"][straggler] < b)
            truth.straggler_added_ns.append(n * straggler_delay_ns)
    return Job(paths, truth)


def _warp(colls, arrive, finish, first: int):
    """One rank's time line: source time -> true time, piecewise linear through (start of
    collective k -> its arrival) and (end of k -> its end on this rank)."""
    xs, ys = [first], [first]
    for k, (s, e, _) in enumerate(colls):
        xs += [s, e]
        ys += [int(arrive[k]), int(finish[k])]
    xs.append(xs[-1] + 10**15)
    ys.append(ys[-1] + 10**15)
    x, y = np.array(xs, dtype=np.float64) - first, np.array(ys, dtype=np.float64) - first
    return lambda t: first + np.rint(np.interp(np.asarray(t, dtype=np.float64) - first, x, y)).astype(np.int64)


@dataclass
class _Template:
    """A source trace serialized once with a marker for every value a rank changes (times,
    pids, group sizes, devices, host name, distributedInfo): ``pieces`` alternates literal JSON
    text and marker kinds; the source arrays are computed once too."""

    pieces: list
    ts: np.ndarray  # ns, per timed event (events with "ts"), in event order
    dur: np.ndarray
    has_dur: np.ndarray  # per timed event: whether it has "dur"
    keep: np.ndarray  # per timed event: a GPU activity (not NCCL) that keeps its duration
    step_ix: list  # positions (in timed order) of the ProfilerStep ranges
    step_names: list  # their names


_MARK = "\u0002"
_MARK_RE = re.compile(r'"\\u0002([a-z]+)\\u0002"')
_TEMPLATES: dict[int, _Template] = {}


def _template(src: dict, hp: int) -> _Template:
    """The template of ``src`` (a loaded source, host pid ``hp``), made once per source."""
    if id(src) in _TEMPLATES:
        return _TEMPLATES[id(src)]

    def mark(kind):
        return f"{_MARK}{kind}{_MARK}"

    events = src["traceEvents"]
    timed = [e for e in events if "ts" in e]
    out_events = []
    for e in events:
        e = dict(e)
        if "ts" in e:
            e["ts"] = mark("ts")
            if "dur" in e:
                e["dur"] = mark("dur")
        if e.get("pid") == hp:
            e["pid"] = mark("pid")
            if e.get("tid") == hp:
                e["tid"] = mark("pid")
        elif type(e.get("pid")) is int and e["pid"] == 0:
            e["pid"] = mark("local")
        args = e.get("args")
        if isinstance(args, dict):
            args = dict(args)
            if "Group size" in args and args.get("Collective name") != "wait":
                args.update({"Group size": mark("gsize"), "Process Group Ranks": mark("granks")})
            if type(args.get("device")) is int and args["device"] == 0:
                args["device"] = mark("local")
            e["args"] = args
        out_events.append(e)
    doc = {**src, "hostname": mark("host"), "traceEvents": out_events, "distributedInfo": mark("dist")}
    steps = [n for n, e in enumerate(timed) if e.get("name", "").startswith("ProfilerStep#") and e.get("ph") == "X"]
    t = _Template(
        pieces=_MARK_RE.split(_dumps(doc)), ts=np.array([_ns(e["ts"]) for e in timed], dtype=np.int64),
        dur=np.array([_ns(e.get("dur", 0)) for e in timed], dtype=np.int64),
        has_dur=np.array(["dur" in e for e in timed], dtype=bool),
        keep=np.array([e.get("cat") in _GPU_ACTIVITY and not NCCL_NAME.search(e.get("name", ""))
                       for e in timed], dtype=bool),
        step_ix=steps, step_names=[timed[n]["name"] for n in steps])
    _TEMPLATES[id(src)] = t
    return t


def _dumps(obj) -> str:
    """JSON text of ``obj`` with its Decimals written as the exact numbers they hold."""
    return _NUM_RE.sub(r"\1", json.dumps(obj, default=_plain))


def _us_list(ns: np.ndarray) -> list[str]:
    """Every value of ``ns`` (integer ns) as exact decimal us with 3 decimals, as Kineto writes."""
    return [f"{'-' if v < 0 else ''}{abs(v) // 1000}.{abs(v) % 1000:03d}" for v in ns.tolist()]


def _write_rank(src, r, ranks, path, colls, arrive, finish, first, base, hp, truth: Truth,
                ranks_per_host, same_pid, gz) -> list[tuple[str, int, int]]:
    tpl = _template(src, hp)
    warp = _warp(colls, arrive, finish, first)
    windows = np.array([(s, e) for s, e, _ in colls], dtype=np.int64).reshape(-1, 2)
    local = r % ranks_per_host
    pid = hp if same_pid else hp + r
    group = list(range(ranks))
    ts, dur = tpl.ts, tpl.dur
    new_ts = warp(ts)
    new_end = warp(ts + dur)
    # GPU activities (not NCCL) that start inside a collective keep their duration
    inside = np.zeros(len(ts), dtype=bool)
    if len(windows):
        j = np.searchsorted(windows[:, 0], ts, side="right") - 1
        ok = j >= 0
        inside[ok] = ts[ok] < windows[j[ok], 1]
    new_end = np.where(tpl.keep & inside, new_ts + dur, new_end)
    # the clock of the rank's host
    off, drift = truth.offset_ns[r], truth.drift_ppm[r] * 1e-6
    t0 = truth.t0_ns - base

    def clock(t):
        return t + off + np.rint(drift * (t - t0).astype(np.float64)).astype(np.int64)

    loc_ts, loc_end = clock(new_ts), clock(new_end)
    steps = [(name, base + int(new_ts[n]), base + int(new_end[n])) for name, n in zip(tpl.step_names, tpl.step_ix)]
    pg = (src.get("distributedInfo") or {}).get("pg_config") or [{"pg_name": "0", "pg_desc": "default_pg"}]
    dist = {**(src.get("distributedInfo") or {}), "rank": r, "world_size": ranks,
            "pg_config": [{**pg[0], "pg_size": ranks, "ranks": group}]}
    values = {
        "ts": iter(_us_list(loc_ts)), "dur": iter(_us_list((loc_end - loc_ts)[tpl.has_dur])),
        "pid": itertools.repeat(str(pid)), "local": itertools.repeat(str(local if ranks_per_host > 1 else 0)),
        "gsize": itertools.repeat(str(ranks)), "granks": itertools.repeat(json.dumps(str(group))),
        "host": itertools.repeat(json.dumps(truth.hosts[r])),
        "dist": itertools.repeat(_dumps(dist))}
    pieces = tpl.pieces
    text = "".join(p if i % 2 == 0 else next(values[p]) for i, p in enumerate(pieces))
    if gz:
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return sorted(steps, key=lambda s: s[1])


def _plain(v):
    if isinstance(v, Decimal):
        return _NUM + format(v, "f")
    raise TypeError(type(v))


__all__ = ["NCCL_TRACE", "Job", "Truth", "make_job"]
