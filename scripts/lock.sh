#!/usr/bin/env bash
# Refreshes requirements/lock.txt: the newest versions pyproject.toml's bounds allow, for every
# supported Python (3.10 and up, one universal file with markers), of every direct and transitive
# dependency that scripts/install.sh installs. torch is left out (requirements/overrides.txt); the
# CPU build's own dependencies are locked through requirements/torch-cpu.in.
# Needs uv (`pip install uv`). Extra arguments go to uv, e.g. --upgrade-package duckdb.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${LOCK_OUT:-requirements/lock.txt}
uv pip compile pyproject.toml requirements/torch-cpu.in \
  --extra collect --extra ncu --extra plot --extra test --extra dask \
  --universal --python-version 3.10 --no-python-downloads \
  --override requirements/overrides.txt --custom-compile-command "bash scripts/lock.sh" \
  -o "$OUT" "$@"
