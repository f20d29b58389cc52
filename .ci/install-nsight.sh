#!/usr/bin/env bash
# Installs NVIDIA Nsight Systems 2022.4 and Nsight Compute 2022.3 from Debian's non-free
# component on a fresh Debian 12 machine (see docs/nsight-on-cpu.md in shared notes).
# Idempotent: does nothing when nsys and ncu are already on PATH and nsys can import.
set -euo pipefail
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
if ! command -v nsys >/dev/null 2>&1 || ! command -v ncu >/dev/null 2>&1; then
  if [ ! -f /etc/apt/sources.list.d/tracekit-nonfree.sources ]; then
    $SUDO tee /etc/apt/sources.list.d/tracekit-nonfree.sources >/dev/null <<'SRC'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: contrib non-free
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    nsight-systems nsight-systems-target nsight-compute nsight-compute-target >/dev/null
fi
# nsys looks for its importer at target-linux-x64/../host-linux-x64; Debian's layout breaks that link.
lib=/usr/lib/x86_64-linux-gnu/nsight-systems
if [ -d "$lib" ] && [ ! -e "$lib/host-linux-x64" ] && [ -d /usr/lib/nsight-systems/host-linux-x64 ]; then
  $SUDO ln -s /usr/lib/nsight-systems/host-linux-x64 "$lib/host-linux-x64"
fi
nsys --version
