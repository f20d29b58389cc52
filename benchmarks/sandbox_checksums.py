"""What the sql sandbox and the table checksums cost (issue 27), as ratios in the same run.

- checksums: the time to digest a converted run folder's table files (what RunWriter adds at
  commit, and what opening every table adds on read) against the conversion's own time;
- sandbox: ``Engine.sql`` over the read-only file system (``tracekit sql`` without
  --allow-external) against the same statement with DuckDB's local file system, on a run folder
  whose kernels table is the fixture's repeated ``--copies`` times (one file).

    python benchmarks/sandbox_checksums.py [--copies 200]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT.parent / "shared" / "fixtures" / "nsys" / "nsys2020.5_2xv100_p2p_nvlink.sqlite"
QUERY = ("SELECT name, count(*) AS n, sum(duration_ns) AS total_ns FROM kernels "
         "GROUP BY name ORDER BY total_ns DESC")


def _best(fn, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--copies", type=int, default=200)
    args = ap.parse_args()
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tracekit.convert import convert
    from tracekit.query.engine import Engine
    from tracekit.runfolder import checksums

    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        t0 = time.perf_counter()
        convert([FIXTURE], run)
        convert_s = time.perf_counter() - t0
        m = json.loads((run / "manifest.json").read_text())
        size = sum((run / i["file"]).stat().st_size for i in m["tables"].values())
        digest_s = _best(lambda: checksums.record(run, json.loads(json.dumps(m["tables"]))))
        k = pq.read_table(run / "kernels.parquet")
        big = pa.concat_tables([k] * args.copies)
        pq.write_table(big, run / "kernels.parquet")
        checksums.reseal(run)
        m = json.loads((run / "manifest.json").read_text())
        m["tables"]["kernels"]["rows"] = big.num_rows
        (run / "manifest.json").write_text(json.dumps(m))
        times = {}
        for external in (True, False):
            with Engine([run], external_access=external) as eng:
                eng.sql(QUERY)  # views, lock
                times[external] = _best(lambda e=eng: e.sql(QUERY))
        kbytes = (run / "kernels.parquet").stat().st_size
    print(f"checksums: {size / 1e6:.2f} MB of table files digested in {digest_s * 1e3:.1f} ms; "
          f"convert {convert_s:.2f} s; ratio {digest_s / convert_s:.4f}")
    print(f"sandbox: {big.num_rows:,} kernels ({kbytes / 1e6:.1f} MB): local file system "
          f"{times[True] * 1e3:.1f} ms, read-only file system {times[False] * 1e3:.1f} ms; "
          f"ratio {times[False] / times[True]:.2f}")
    print(f"(python {sys.version.split()[0]}; best of 5)")


if __name__ == "__main__":
    main()
