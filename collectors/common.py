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

Memory is about 100 bytes per push/pop range at the peak; no Python work per range (a loop
per thread only). :func:`nest_in_parts` nests the threads in two groups on two cores (NumPy's
sorts and searches run outside the GIL).
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
    for a, b in zip(bounds[:-1], bounds[1:]):
        ss, es, rs = s[a:b], e[a:b], r[a:b]
        opens = es > ss  # a never-closed range opens (it ends "at infinity")
        before = np.cumsum(opens, dtype=np.int64) - opens
        # end events: closed ranges of positive length; ranges come in start order, so their
        # ends are mostly in order too, which the stable sort (timsort) takes advantage of
        ends = np.sort(es[opens & ev[a:b]], kind="stable")
        d = before - np.searchsorted(ends, ss, side="right")
        del ends, before, opens
        m = b - a
        # rows in (depth, position) order: a stable sort by depth (a radix sort for int16)
        small = np.int32 if m < np.iinfo(np.int32).max else np.int64  # positions: halve the memory
        o2 = np.argsort(d.astype(np.int16) if d.max() < 32767 else d, kind="stable").astype(small, copy=False)
        ck = d[o2] * m + o2  # (depth, position) as one key, ascending
        # the parent: the last row of depth - 1 before each row, i.e. the key before
        # ck - m; the queries are ascending too, which keeps the binary searches short
        j = (np.searchsorted(ck, ck - m, side="left") - 1).astype(small, copy=False)
        del ck
        cand = o2[np.maximum(j, 0)]
        ds = d[o2]
        ok = (j >= 0) & (ds > 0) & (d[cand] == ds - 1)
        out = sel[a:b] if rows is None else rows[sel[a:b]]
        depth[out] = d
        parent[out[o2]] = np.where(ok, rs[cand], NO_PARENT)
    return depth, parent


def nest_in_parts(cols: dict[str, np.ndarray], parts: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """:func:`nest` with the rows split by thread into ``parts`` groups of about equal size (a
    thread's rows stay in one group), each nested on its own thread; the same result as
    :func:`nest` of all rows. The threads are hashed into 64 buckets, the buckets dealt to the
    groups largest first: threads that share a bucket share a group. ``cols`` is emptied."""
    n = cols["key"].shape[0]
    if parts < 2 or n < PARTS_MIN_ROWS:
        return nest(cols)
    bucket = ((cols["key"].view(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(58)).astype(np.intp)
    counts = np.bincount(bucket, minlength=64)
    group = np.zeros(64, np.intp)
    load = [0] * parts
    for b in np.argsort(-counts, kind="stable"):
        g = load.index(min(load))
        group[b] = g
        load[g] += int(counts[b])
    if max(load) == n:  # one group holds every row
        return nest(cols)
    of_row = group[bucket]
    del bucket
    small = np.int32 if n < np.iinfo(np.int32).max else np.int64
    rows = [np.flatnonzero(of_row == g).astype(small) for g in range(parts)]
    del of_row
    split: list[dict[str, np.ndarray]] = [{} for _ in rows]
    for name in list(cols):  # one array at a time: one copy beside the groups' parts
        a = cols.pop(name)
        for part, r in zip(split, rows):
            part[name] = a[r]
        del a
    from concurrent.futures import ThreadPoolExecutor

    depth, parent = np.full(n, -1, np.int32), np.full(n, NO_PARENT, np.int64)
    with ThreadPoolExecutor(parts, thread_name_prefix=f"{threading.current_thread().name}-nest") as pool:
        # each group writes its rows of the same two arrays (disjoint rows)
        list(pool.map(lambda part, r: nest(part, (depth, parent, r)), split, rows))
    return depth, parent


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
