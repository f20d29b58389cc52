"""Build a large Nsight Systems SQLite export by replicating a real one N times.

    python benchmarks/make_big_export.py SRC.sqlite N OUT.sqlite

Copy k (k = 1..N-1) of every event row is shifted so the result stays a consistent trace:

- time: every ``start``, ``end`` and ``timestamp`` column + k * span, where span is the source's
  whole time range (min start to max end over the event tables) plus 1 µs, so copies never overlap;
- ``correlationId`` + k * (max correlation ID + 1): kernels still pair with their launch calls;
- NVTX ``rangeId`` + k * (max rangeId + 1): start/end pairs stay pairs.

Everything else (StringIds, threads, devices, ENUM tables) is shared by the copies, as in one long
capture of the same program. All copying happens inside SQLite (one INSERT ... SELECT per table
over a recursive CTE of copy numbers), so building a multi-GB export needs little memory.
"""

from __future__ import annotations

import shutil
import sqlite3
import sys
import time
from pathlib import Path

EVENT_TABLES = (
    "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "NVTX_EVENTS", "OSRT_API",
    "SCHED_EVENTS", "CUPTI_ACTIVITY_KIND_CUDA_EVENT", "CUPTI_ACTIVITY_KIND_OVERHEAD",
)
TIME_COLUMNS = ("start", "end", "timestamp")


def columns(con, table):
    return [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')]


def build(src: Path, copies: int, out: Path) -> dict:
    if copies < 1:
        raise SystemExit("N must be >= 1")
    tmp = out.with_suffix(".partial")
    shutil.copyfile(src, tmp)
    con = sqlite3.connect(tmp)
    con.execute("PRAGMA journal_mode = OFF")
    con.execute("PRAGMA synchronous = OFF")
    tables = [t for t in EVENT_TABLES if columns(con, t)]
    lo, hi, corr, rng = None, None, 0, 0
    for t in tables:
        cols = columns(con, t)
        for c in TIME_COLUMNS:
            if c in cols:
                a, b = con.execute(f'SELECT min("{c}"), max("{c}") FROM "{t}"').fetchone()
                if a is not None:
                    lo = a if lo is None else min(lo, a)
                    hi = b if hi is None else max(hi, b)
        if "correlationId" in cols:
            corr = max(corr, con.execute(f'SELECT coalesce(max(correlationId), 0) FROM "{t}"').fetchone()[0])
        if "rangeId" in cols:
            rng = max(rng, con.execute(f'SELECT coalesce(max(rangeId), 0) FROM "{t}"').fetchone()[0])
    span = (hi - lo) + 1000 if lo is not None else 0
    counts = {}
    for t in tables:
        cols = columns(con, t)
        exprs = []
        for c in cols:
            if c in TIME_COLUMNS:
                exprs.append(f'o."{c}" + k.i * {span}')
            elif c == "correlationId":
                exprs.append(f'o."{c}" + k.i * {corr + 1}')
            elif c == "rangeId":
                exprs.append(f'o."{c}" + k.i * {rng + 1}')
            else:
                exprs.append(f'o."{c}"')
        col_list = ", ".join(f'"{c}"' for c in cols)
        con.execute(f'CREATE TEMP TABLE orig AS SELECT * FROM "{t}"')
        if copies > 1:
            con.execute(
                f"WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < {copies - 1}) "
                f'INSERT INTO "{t}" ({col_list}) SELECT {", ".join(exprs)} FROM k, temp.orig AS o'
            )
        con.execute("DROP TABLE temp.orig")
        con.commit()
        counts[t] = con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]
    con.close()
    tmp.replace(out)
    return {"copies": copies, "span_ns": span, "rows": counts, "bytes": out.stat().st_size}


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    info = build(Path(argv[0]), int(argv[1]), Path(argv[2]))
    info["seconds"] = round(time.perf_counter() - t0, 1)
    print(info)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
