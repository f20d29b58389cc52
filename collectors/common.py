"""What the collectors share: the description of an input file for the manifest
(:func:`describe_input`) and push/pop NVTX nesting (:func:`nest`).

Push/pop NVTX nesting by sort-and-sweep in NumPy: the in-memory path of the nsys collector's
``nvtx_nesting`` step (exports with more push/pop ranges than :data:`MAX_ROWS` go through the
spilling DuckDB SQL of :mod:`tracekit.collectors.nsys` instead; both give the same result).

Per thread (same pid and tid, nulls grouping together), ranges are ordered by start, longer
first (end descending, a range never closed counting as ending last), then range_id. Then:

- ``depth`` = (ranges of the thread with a positive length that come earlier in that order) -
  (ranges of the thread that ended at or before this one's start): the ranges open at its start.
  A zero-length range opens and closes nothing.
- ``parent`` = the latest range earlier in that order whose depth is one less (what the SQL's
  ASOF join picks), found with one ``searchsorted`` over (depth, position) keys in that order.

Memory at the peak is about 95 bytes per push/pop range, the inputs' 34 included (about 110 when
two groups nest at once); no Python work per range (a loop per thread only). :func:`nest_batches`
nests the threads in two groups on two cores (NumPy's sorts and searches run outside the GIL).
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

import numpy as np

# At most this many push/pop ranges are nested in memory (~0.6 GB at the peak); more go to DuckDB.
MAX_ROWS = 6_000_000
# pid and tid must fit this many bits each for the packed thread key (nsys: 24 bits each)
KEY_BITS = 30
# fewer ranges than this are nested on one thread (:func:`nest_in_parts`)
PARTS_MIN_ROWS = 100_000
# parent of a range without one (range ids are SQLite rowids, never this small)
NO_PARENT = np.iinfo(np.int64).min


def release_free_memory() -> None:
    """Hand memory freed by earlier steps back to the OS before the nesting's peak: Arrow's pool
    and, on glibc, every malloc arena (SQLite and the ADBC driver allocate with malloc on the
    scanning threads; glibc keeps what they free). Measured on the benchmark export: the peak
    RSS of the conversion falls by about 200 MB (docs/performance-history.md)."""
    import ctypes
    import ctypes.util

    import pyarrow as pa

    pa.default_memory_pool().release_unused()
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        trim = getattr(libc, "malloc_trim", None)
    except OSError:
        trim = None
    if trim is not None:  # glibc only (not musl or macOS)
        trim(0)


def thread_key(pid: np.ndarray, pid_valid: np.ndarray, tid: np.ndarray, tid_valid: np.ndarray) -> np.ndarray | None:
    """One int64 per row, equal for rows of the same (pid, tid) with nulls equal to nulls; None
    when a value does not fit :data:`KEY_BITS` bits (the caller falls back to DuckDB)."""
    lim = (1 << KEY_BITS) - 1
    for a, v in ((pid, pid_valid), (tid, tid_valid)):
        if a.size and v.any() and (a[v].min() < 0 or a[v].max() >= lim):
            return None
    p = np.where(pid_valid, pid + 1, 0)
    t = np.where(tid_valid, tid + 1, 0)
    return (p << KEY_BITS) | t


def nest(cols: dict[str, np.ndarray], into: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
         ) -> tuple[np.ndarray, np.ndarray]:
    """Depth and parent range_id of each row (arrays aligned with the inputs).

    ``cols`` holds aligned arrays ``key`` (:func:`thread_key`), ``start``, ``end``, ``end_valid``
    (false: a range never closed), ``range_id`` and ``pushpop``; they are taken out of the dict
    (and freed) as the sort goes, to keep the peak memory low. Rows where ``pushpop`` is false
    get depth -1 and parent :data:`NO_PARENT` (null), as does a range without a parent.
    ``into``: (depth, parent, rows) to write row ``i``'s result at ``rows[i]`` of arrays
    filled with -1 and NO_PARENT already (returned), instead of new arrays.
    """
    pushpop = cols.pop("pushpop")
    n = pushpop.shape[0]
    if into is None:
        depth, parent, rows = np.full(n, -1, np.int32), np.full(n, NO_PARENT, np.int64), None
    else:
        depth, parent, rows = into
    sel = None if pushpop.all() else np.flatnonzero(pushpop)
    del pushpop
    if sel is not None and sel.size == 0:
        return depth, parent

    def take(name: str) -> np.ndarray:
        a = cols.pop(name)
        return a if sel is None else a[sel]

    k, s, r = take("key"), take("start"), take("range_id")
    ev = take("end_valid")
    e = np.where(ev, take("end"), np.iinfo(np.int64).max)  # never closed: ends last
    np.invert(e, out=e)  # ~e orders ends descending without the overflow of -e
    order = np.lexsort((r, e, s, k))
    np.invert(e, out=e)
    k = k[order]
    bounds = np.concatenate(([0], np.flatnonzero(k[1:] != k[:-1]) + 1, [k.size]))
    del k
    # one array at a time: only one unsorted copy is alive beside the sorted ones
    s = s[order]
    r = r[order]
    ev = ev[order]
    e = e[order]
    sel = order if sel is None else sel[order]
    del order
    small = np.int32 if s.size < np.iinfo(np.int32).max else np.int64  # positions: half the memory
    # first the depth of every row, thread by thread; the times are then freed before the
    # parents' arrays are made (the peak: about 60 bytes a range above the inputs' 34)
    d = np.empty(s.size, small)
    for a, b in zip(bounds[:-1], bounds[1:]):
        ss, es = s[a:b], e[a:b]
        opens = es > ss  # a never-closed range opens (it ends "at infinity")
        before = np.cumsum(opens, dtype=small)
        before -= opens
        # end events: closed ranges of positive length; ranges come in start order, so their
        # ends are mostly in order too, which the stable sort (timsort) takes advantage of
        ends = np.sort(es[opens & ev[a:b]], kind="stable")
        np.subtract(before, np.searchsorted(ends, ss, side="right"), out=d[a:b], casting="unsafe")
        del ends, before, opens
    del s, e, ev, ss, es
    out = sel if rows is None else rows[sel]
    sel = None  # out holds the positions now
    depth[out] = d
    for a, b in zip(bounds[:-1], bounds[1:]):
        m, dt = b - a, d[a:b]
        # rows in (depth, position) order: a stable sort by depth (a radix sort for int16)
        o2 = np.argsort(dt.astype(np.int16) if dt.max() < 32767 else dt, kind="stable").astype(small, copy=False)
        ds = dt[o2]
        ck = ds.astype(np.int64)  # (depth, position) as one key, ascending
        ck *= m
        ck += o2
        # the parent: the last row of depth - 1 before each row, i.e. the key before
        # ck - m; the queries are ascending too, which keeps the binary searches short
        j = np.searchsorted(ck, ck - m, side="left")
        del ck
        j -= 1
        j = j.astype(small, copy=False)
        cand = o2[np.maximum(j, 0)]
        ok = (j >= 0) & (ds > 0) & (dt[cand] == ds - 1)
        del j, ds
        pv = r[a:b][cand]
        pv[~ok] = NO_PARENT
        parent[out[a:b][o2]] = pv
    return depth, parent


def nest_in_parts(cols: dict[str, np.ndarray], parts: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """:func:`nest` with the rows split by thread into ``parts`` groups of about equal size, each
    nested on its own thread (:func:`nest_batches` of one batch). ``cols`` is emptied."""
    return nest_batches({k: [cols.pop(k)] for k in list(cols)}, parts)


def nest_batches(batches: dict[str, list[np.ndarray]], parts: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """:func:`nest` of the rows of ``batches`` (for each of nest's input arrays, its batches in
    row order), split by thread into ``parts`` groups of about equal size (a thread's rows stay
    in one group), each gathered from the batches and nested on its own thread: the same result
    as :func:`nest` of the batches concatenated, without making that concatenation (on the
    benchmark export's 5 M ranges, concatenating then splitting took 0.2-0.7 s on one core and
    200 MiB more at the peak: 0.55 s and +370 MiB now, against 0.7-1.2 s and +580 MiB). The
    threads are hashed into 64 buckets, the buckets dealt to the groups largest first: threads
    that share a bucket share a group. ``batches`` is emptied."""
    n = sum(a.shape[0] for a in batches["key"])
    bucket = [((k.view(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(58)).astype(np.uint8)
              for k in batches["key"]]
    counts = sum((np.bincount(b, minlength=64) for b in bucket), np.zeros(64, np.int64))
    group = np.zeros(64, np.uint8)
    load = [0] * max(parts, 1)
    for b in np.argsort(-counts, kind="stable"):
        g = load.index(min(load))
        group[b] = g
        load[g] += int(counts[b])
    if parts < 2 or n < PARTS_MIN_ROWS or max(load) == n:  # one group holds every row
        return nest({k: np.concatenate(batches.pop(k)) for k in list(batches)})
    of_row = [group[b] for b in bucket]
    del bucket
    depth, parent = np.full(n, -1, np.int32), np.full(n, NO_PARENT, np.int64)
    gather = _Gather(batches, of_row, load)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(parts, thread_name_prefix=f"{threading.current_thread().name}-nest") as pool:
        # each group writes its rows of the same two arrays (disjoint rows)
        for f in [pool.submit(lambda g: nest(*gather.part(g, (depth, parent))), g) for g in range(parts)]:
            f.result()
    return depth, parent


class _Gather:
    """The rows of each group taken out of the batches, one input array at a time; the batches
    of an array are freed when every group has taken its rows (the peak stays one copy)."""

    def __init__(self, batches: dict[str, list[np.ndarray]], of_row: list[np.ndarray], load: list[int]):
        self.batches, self.of_row, self.load = batches, of_row, load
        self.names = list(batches)
        self.left = dict.fromkeys(self.names, len(load))
        self.lock = threading.Lock()

    def part(self, g: int, into: tuple[np.ndarray, np.ndarray]):
        """Group ``g``'s arrays and ``into`` with its rows' positions: :func:`nest`'s arguments."""
        small = np.int32 if sum(map(len, self.of_row)) < np.iinfo(np.int32).max else np.int64
        sel = [np.flatnonzero(o == g).astype(small) for o in self.of_row]
        m = self.load[g]
        rows = np.empty(m, small)
        pos = off = 0
        for s, o in zip(sel, self.of_row):
            np.add(s, off, out=rows[pos:pos + s.size])
            pos, off = pos + s.size, off + o.size
        cols = {}
        for name in self.names:
            parts = self.batches[name]
            out = cols[name] = np.empty(m, parts[0].dtype)
            pos = 0
            for a, s in zip(parts, sel):
                np.take(a, s, out=out[pos:pos + s.size])
                pos += s.size
            with self.lock:  # the last group to take its rows frees the batches
                self.left[name] -= 1
                if not self.left[name]:
                    self.batches[name] = []
        return cols, (*into, rows)


# -- input description ---------------------------------------------------------------------

def sha256_file(path: str | os.PathLike, chunk: int = 1 << 22) -> str:
    """Hex SHA-256 of a file, read in 4 MiB chunks (constant memory)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            buf = f.read(chunk)
            if not buf:
                return h.hexdigest()
            h.update(buf)


def describe_input(path: str | os.PathLike, fmt: str) -> dict:
    """Manifest entry for one input file: name, absolute path, size in bytes, sha256, format."""
    p = Path(path)
    return {
        "name": p.name,
        "path": str(p.resolve()),
        "size_bytes": p.stat().st_size,
        "sha256": sha256_file(p),
        "format": fmt,
    }
