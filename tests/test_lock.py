"""The lock (requirements/lock.txt) against pyproject.toml and against what is installed.

A green suite on a machine that kept older packages proves nothing about a fresh install: these
tests fail when the environment running them is not the lock's (run `bash scripts/install.sh`),
or when pyproject.toml's bounds and the lock disagree (run `bash scripts/lock.sh`).
"""

from __future__ import annotations

import os
import re
from importlib import metadata
from pathlib import Path

from conftest import ROOT
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10 (tomli comes with pytest there)
    import tomli as tomllib

# .ci/upgrade-check points this at the refreshed lock it installed
LOCK = Path(os.environ.get("TRACEKIT_LOCK") or ROOT / "requirements" / "lock.txt")
EXTRAS = ("collect", "ncu", "plot", "test", "dask")  # what scripts/install.sh installs
NOT_LOCKED = {"torch"}  # installed --no-deps by scripts/install.sh (requirements/overrides.txt)


def _lock() -> list[tuple[str, str, Marker | None]]:
    """(name, version, marker) of every pin in the lock."""
    out = []
    for line in LOCK.read_text().splitlines():
        m = re.match(r"([A-Za-z0-9_.\-\[\]]+)==([^\s;]+)\s*(?:;\s*(.+))?$", line.strip())
        if m:
            name = canonicalize_name(m.group(1).split("[")[0])
            out.append((name, m.group(2), Marker(m.group(3)) if m.group(3) else None))
    return out


def _here() -> dict[str, str]:
    """{name: version} of the pins that apply to this Python."""
    return {n: v for n, v, mk in _lock() if mk is None or mk.evaluate()}


def _direct() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = [Requirement(r) for r in project["dependencies"]]
    for extra in EXTRAS:
        reqs += [Requirement(r) for r in project["optional-dependencies"][extra]]
    return [r for r in reqs if canonicalize_name(r.name) not in NOT_LOCKED]


def test_every_direct_dependency_is_locked_within_its_bounds():
    pins = _here()
    for req in _direct():
        name = canonicalize_name(req.name)
        assert name in pins, f"{req} is not in requirements/lock.txt: run bash scripts/lock.sh"
        assert req.specifier.contains(pins[name], prereleases=True), \
            f"the lock pins {name}=={pins[name]}, outside pyproject's {req}: run bash scripts/lock.sh"


def test_the_installed_packages_are_the_locks():
    off = []
    for name, version in sorted(_here().items()):
        try:
            have = metadata.version(name)
        except metadata.PackageNotFoundError:
            off.append(f"{name} not installed (lock: {version})")
            continue
        if have != version:
            off.append(f"{name} {have} (lock: {version})")
    assert off == [], ("this environment is not the lock's; run `bash scripts/install.sh` in a fresh "
                       "virtual environment: " + "; ".join(off))


def test_lock_is_made_by_the_lock_script():
    head = LOCK.read_text().splitlines()[:2]
    assert head[1].strip() == "#    bash scripts/lock.sh", head
