#!/usr/bin/env bash
# Installs tracekit and everything `tracekit collect`, the plots, Dask and the tests use into the
# current Python (a virtual environment of yours, or the one .ci/run makes), at the versions locked
# in requirements/lock.txt (docs/development.md says how to refresh it).
# torch is not in the lock: torch==2.13.0 is installed --no-deps (its dependencies are locked). On
# this project's machines that pin is a CPU build served from local disk, where an unpinned `torch`
# would pull a multi-GB CUDA build. On a GPU box, install the torch build you want first; this
# script then leaves it alone.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
$PY -m pip install -q -r requirements/lock.txt
if ! $PY -c "import torch" >/dev/null 2>&1; then
  $PY -m pip install -q --no-deps "torch==2.13.0"
fi
$PY -m pip install -q --no-deps --no-build-isolation -e .
