#!/usr/bin/env bash
# Virtual environments for the tools tracekit is measured against (not needed for tracekit):
#   benchmarks/.venv-nsys-ai : nsys-ai 0.3.0 with DuckDB 1.4.4 and its sqlite extension from PyPI
#                              (nsys-ai downloads the extension at run time, which fails offline)
#   benchmarks/.venv-tools   : py-spy, for the conversion's sampling profile (convert_profile.py)
#   benchmarks/.venv-hta     : traceinsight (HTA) with pandas 2.2 and psutil (HTA imports it) for
#                              the Kineto comparison
set -euo pipefail
cd "$(dirname "$0")"
if [ ! -x .venv-nsys-ai/bin/python ]; then
  python3 -m venv .venv-nsys-ai
  .venv-nsys-ai/bin/pip install -q "nsys-ai==0.3.0" "duckdb==1.4.4" duckdb-ext-sqlite
fi
ext=$(find .venv-nsys-ai -name sqlite_scanner.duckdb_extension | head -n 1)
mkdir -p ~/.duckdb/extensions/v1.4.4/linux_amd64
cp "$ext" ~/.duckdb/extensions/v1.4.4/linux_amd64/
if [ ! -x .venv-hta/bin/python ]; then
  python3 -m venv --system-site-packages .venv-hta
  .venv-hta/bin/pip install -q traceinsight "pandas==2.2.*" psutil || echo "traceinsight did not install; the Kineto baseline will be skipped"
fi
if [ ! -x .venv-tools/bin/py-spy ]; then
  python3 -m venv .venv-tools
  .venv-tools/bin/pip install -q py-spy || echo "py-spy did not install; the conversion profile will be skipped"
fi
