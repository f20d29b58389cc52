"""Read every column ``tracekit convert`` reads from an nsys export (the same SQL as its strict
first read, through ADBC into Arrow batches, one table after another on one thread) and nothing
else: no decoding, no nesting, no Parquet. A floor for any converter built on SQLite + ADBC
(benchmarks/run.py). Usage: python adbc_scan.py EXPORT.sqlite
"""

import sys
import time
from pathlib import Path

from tracekit.collectors.nsys import decode as N
from tracekit.collectors.nsys import mapping as M
from tracekit.collectors.nsys.export import Export


def table_plans(ex: Export):
    """(plan, ' WHERE ...' or '') of every table ``tracekit convert`` reads from ``ex`` (also
    used by run.py's SQLite floor)."""
    ctx = N.Context(ex)
    for tmap in M.TABLE_MAPS.values():
        plan = N.TablePlan(ex, tmap, ctx)
        if plan.source is not None:
            yield plan, (f" WHERE {plan.where}" if plan.where else "")


def main() -> None:
    t0 = time.perf_counter()
    rows = 0
    with Export(Path(sys.argv[1])) as ex:
        for plan, where in table_plans(ex):
            for b in ex.scan(plan.read_select(strict=True), f'"{plan.source}" AS t{where}', strict=True):
                rows += b.num_rows
    print(rows, "rows", round(time.perf_counter() - t0, 2), "s")


if __name__ == "__main__":
    main()
