"""Build a large Kineto (PyTorch profiler) trace by replicating a real one N times.

    python benchmarks/make_big_kineto.py SRC.json[.gz] N OUT.json

Copy k of every timed event is shifted by k * span in ``ts`` (span = the source's time range plus
1 µs; timestamps are rewritten with 3 decimals, as Kineto writes them), and its ``correlation``,
``External id`` and flow ``id`` are offset by k * (the source's maximum + 1), so kernels still pair
with their launch calls and flows with their ends. Metadata events (``ph`` M) are written once.
The output is written event by event, so memory stays at the size of the source.
"""

from __future__ import annotations

import gzip
import json
import sys
from decimal import Decimal
from pathlib import Path


def _load(path: Path) -> dict:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f, parse_float=Decimal)


def _enc(obj):
    if isinstance(obj, Decimal):
        return float(obj)
    raise TypeError(type(obj))


def build(src: Path, copies: int, out: Path) -> dict:
    doc = _load(Path(src))
    events = doc.pop("traceEvents")
    timed, meta = [], []
    for e in events:
        (timed if e.get("ph") != "M" and "ts" in e else meta).append(e)
    lo = min(Decimal(str(e["ts"])) for e in timed)
    hi = max(Decimal(str(e["ts"])) + Decimal(str(e.get("dur", 0))) for e in timed)
    span = (hi - lo) + 1
    max_corr = max((int(e.get("args", {}).get("correlation", 0) or 0) for e in timed), default=0) + 1
    max_ext = max((int(e.get("args", {}).get("External id", 0) or 0) for e in timed), default=0) + 1
    max_id = max((int(e["id"]) for e in timed if isinstance(e.get("id"), int)), default=0) + 1
    n = 0
    with open(out, "w", encoding="utf-8") as f:
        f.write("{\n")
        for k, v in doc.items():
            f.write(f"{json.dumps(k)}: {json.dumps(v, default=_enc)},\n")
        f.write('"traceEvents": [\n')
        first = True
        for e in meta:
            f.write(("" if first else ",\n") + json.dumps(e, default=_enc))
            first = False
        for k in range(copies):
            for e in timed:
                c = dict(e)
                c["ts"] = Decimal(str(e["ts"])) + k * span
                if "args" in e:
                    a = dict(e["args"])
                    if "correlation" in a and a["correlation"]:
                        a["correlation"] = int(a["correlation"]) + k * max_corr
                    if "External id" in a and a["External id"]:
                        a["External id"] = int(a["External id"]) + k * max_ext
                    c["args"] = a
                if isinstance(e.get("id"), int):
                    c["id"] = e["id"] + k * max_id
                line = json.dumps(c, default=_enc)
                # exact decimal timestamps: Kineto writes microseconds with 3 decimals
                line = line.replace(f'"ts": {float(c["ts"])}', f'"ts": {c["ts"]:.3f}', 1)
                f.write(("" if first else ",\n") + line)
                first = False
                n += 1
        f.write("\n]\n}\n")
    return {"events": n + len(meta), "bytes": out.stat().st_size}


if __name__ == "__main__":
    if len(sys.argv) != 4:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        sys.exit(2)
    print(build(Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])))
