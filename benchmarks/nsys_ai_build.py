"""Run nsys-ai's Parquet cache build + NVTX kernel map on one export (benchmark baseline).

Run with the Python of a separate virtual environment holding nsys-ai, duckdb==1.4.4 and
duckdb-ext-sqlite (see benchmarks/setup_baselines.sh). Usage: PY nsys_ai_build.py EXPORT.sqlite

Exit status 3 when the build published an incomplete cache: nsys-ai 0.3.0 sometimes writes a
cache without ``kernels``, ``string_ids`` and the NVTX maps and says nothing (here about one
build in three, in half the time of a complete one); benchmarks/run.py builds again and counts
only complete builds.
"""

import shutil
import sys
from pathlib import Path

from nsys_ai import parquet_cache as pc

path = sys.argv[1]
cache = Path(path).with_suffix(".nsys-cache")
shutil.rmtree(cache, ignore_errors=True)
pc.build_cache(path, progress=lambda *a: None)
conn = pc.open_cached_db(path)
ok = pc.materialize_cached_nvtx_kernel_map(conn)
print("nvtx_kernel_map", ok)
# the tables of a complete build of an export with kernels, runtime calls and NVTX ranges
NEEDED = ("kernels", "runtime", "string_ids", "nvtx", "nvtx_kernel_map", "memcpy")
missing = [t for t in NEEDED if not (cache / f"{t}.parquet").exists()]
if missing or not ok:
    print(f"incomplete cache: no {', '.join(missing) or 'NVTX kernel map'}", file=sys.stderr)
    sys.exit(3)
