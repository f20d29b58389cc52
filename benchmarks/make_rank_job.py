"""Build an N-rank job by replicating one real rank's Kineto trace with shifted clocks.

    python benchmarks/make_rank_job.py SRC.json[.gz] N OUTDIR

Rank r (0..N-1) is the source trace with ``distributedInfo`` rank r of N, its host pid (and
the host thread with the same id) moved to pid + r so every rank is its own process, and every
``ts`` shifted by r * 1.3 us (r * 1300 ns), as if each rank's clock or launch were a little
later; written as OUTDIR/trace_rank{r:05d}.json. Each file is written from the parsed source,
so memory stays at the size of one trace.
"""

from __future__ import annotations

import gzip
import json
import sys
from decimal import Decimal
from pathlib import Path

SHIFT_NS = 1300


def _enc(obj):
    if isinstance(obj, Decimal):
        return float(obj) if obj != obj.to_integral_value() else int(obj)
    raise TypeError(type(obj))


def host_pid(doc: dict) -> int | None:
    """The pid of the CPU events (the one process with cpu_op / user_annotation events)."""
    pids = {e.get("pid") for e in doc["traceEvents"] if e.get("cat") in ("cpu_op", "user_annotation", "cuda_runtime")}
    return pids.pop() if len(pids) == 1 else None


def build(src: Path, ranks: int, out: Path) -> list[Path]:
    opener = gzip.open if src.suffix == ".gz" else open
    with opener(src, "rt", encoding="utf-8") as f:
        doc = json.load(f, parse_float=Decimal)
    hp = host_pid(doc)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for r in range(ranks):
        shift = Decimal(r * SHIFT_NS) / 1000
        events = []
        for e in doc["traceEvents"]:
            if "ts" in e or e.get("pid") == hp:
                e = dict(e)
                if "ts" in e:
                    e["ts"] = e["ts"] + shift
                if hp is not None and e.get("pid") == hp:
                    e["pid"] = hp + r
                    if e.get("tid") == hp:
                        e["tid"] = hp + r
            events.append(e)
        info = dict(doc.get("distributedInfo") or {})
        info.update({"rank": r, "world_size": ranks})
        p = out / f"trace_rank{r:05d}.json"
        p.write_text(json.dumps({**doc, "distributedInfo": info, "traceEvents": events}, default=_enc))
        paths.append(p)
    return paths


if __name__ == "__main__":
    if len(sys.argv) != 4:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        sys.exit(2)
    print(len(build(Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]))), "ranks")
