"""Run nsys-ai's Parquet cache build + NVTX kernel map on one export (benchmark baseline).

Run with the Python of a separate virtual environment holding nsys-ai, duckdb==1.4.4 and
duckdb-ext-sqlite (see benchmarks/setup_baselines.sh). Usage: PY nsys_ai_build.py EXPORT.sqlite
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
