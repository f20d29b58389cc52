"""The package versions a benchmark figure was measured with, and whether they are the lock's.

Every benchmark writes `versions_line()` beside its figures in docs/performance.md or
docs/benchmarks.md: a conversion time depends as much on duckdb, pyarrow and the ADBC SQLite
driver as on tracekit's own code (one commit measured 11 s on one set of versions and 19-22 s on others).
"""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

LOCK = Path(__file__).resolve().parents[1] / "requirements" / "lock.txt"

# the packages whose code runs in the measured commands
MEASURED = ("duckdb", "pyarrow", "adbc-driver-sqlite", "adbc-driver-manager", "pandas", "numpy",
            "ijson", "typer", "click", "rich", "torch")


def installed() -> dict[str, str | None]:
    """{package: installed version, or None when it is not installed} for MEASURED."""
    out: dict[str, str | None] = {}
    for name in MEASURED:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def locked(lock: Path = LOCK) -> dict[str, set[str]]:
    """{package: versions the lock pins (one per Python-version marker)} from requirements/lock.txt."""
    pins: dict[str, set[str]] = {}
    for line in lock.read_text().splitlines():
        m = re.match(r"([A-Za-z0-9_.-]+)==([^\s;]+)", line)
        if m:
            pins.setdefault(m.group(1).lower().replace("_", "-"), set()).add(m.group(2))
    return pins


def versions_line() -> str:
    """One Markdown sentence: the measured packages' versions, and which differ from the lock."""
    have = installed()
    pins = locked()
    parts = [f"{k} {v}" for k, v in have.items() if v is not None]
    off = [f"{k} {v} (lock: {', '.join(sorted(pins[k]))})" for k, v in have.items()
           if v is not None and k in pins and v not in pins[k]]
    tail = ("all as locked in requirements/lock.txt" if not off
            else "not the lock's: " + "; ".join(off))
    return f"Packages: {', '.join(parts)} ({tail})."
