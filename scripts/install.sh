#!/usr/bin/env bash
# Installs tracekit and everything `tracekit collect` and the tests use, into the current Python.
# torch==2.13.0 is pinned: on this project's machines it is a CPU build served from local disk,
# where an unpinned `torch` would pull a multi-GB CUDA build. On a GPU box, install the torch build
# you want first; this script then leaves it alone.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if ! $PY -c "import torch" >/dev/null 2>&1; then
  $PY -m pip install -q "torch==2.13.0"
fi
$PY -m pip install -q -e ".[collect,ncu,plot,test,dask]"
