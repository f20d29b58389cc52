"""Read every column ``tracekit convert`` reads from an nsys export (the same SQL as its strict
first read, through ADBC into Arrow batches, one table after another on one thread) and nothing
else: no decoding, no nesting, no Parquet. A floor for any converter built on SQLite + ADBC
(benchmarks/run.py). Usage: python adbc_scan.py EXPORT.sqlite
"""

import sys
import time
from pathlib import Path

from tracekit.collectors import nsys as N
from tracekit.collectors import nsys_mapping as M
from tracekit.collectors.sqlite_export import Export

t0 = time.perf_counter()
rows = 0
with Export(Path(sys.argv[1])) as ex:
    ctx = N._Context(ex)
    for tmap in M.TABLE_MAPS.values():
        plan = N._TablePlan(ex, tmap, ctx)
        if plan.source is None:
            continue
        where = f" WHERE {plan.where}" if plan.where else ""
        for b in ex.scan(plan.select, f'"{plan.source}" AS t{where}', strict=True):
            rows += b.num_rows
print(rows, "rows", round(time.perf_counter() - t0, 2), "s")
