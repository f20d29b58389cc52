"""Export an Nsight Systems report (``.nsys-rep``, ``.qdrep``) to SQLite with the local ``nsys``.

The export is written into the temporary run folder (so an error or interrupt removes it with
the folder) and deleted by the collector once read. A report written by a newer nsys than the
local one cannot be read by it: that is one :class:`UnsupportedFormatError` naming both versions.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from tracekit.errors import InputError, ToolNotFoundError, UnsupportedFormatError

INSTALL_HINT = ("install Nsight Systems (Debian/Ubuntu: apt-get install nsight-systems from the "
                "non-free component, or NVIDIA's installer from developer.nvidia.com/nsight-systems) "
                "and put nsys on PATH, or export the report yourself with "
                "`nsys export --type sqlite REPORT`")
EXPORT_TIMEOUT_S = 3600

_VERSION = re.compile(r"(\d{4}\.\d+(?:\.\d+)*)")
_BUILD = re.compile(rb"(20\d\d\.\d{1,2}\.\d{1,3}(?:\.\d{1,4})?)-[0-9a-f]{7,8}(?![0-9a-f])")


def nsys_executable() -> str:
    exe = shutil.which("nsys")
    if exe is None:
        raise ToolNotFoundError(f"nsys is not on PATH, needed to read .nsys-rep/.qdrep reports: {INSTALL_HINT}")
    return exe


def local_version(exe: str | None = None) -> str | None:
    """'2022.4.2.1' from ``nsys --version``, or None when it prints no version."""
    try:
        out = subprocess.run([exe or nsys_executable(), "--version"], capture_output=True, text=True,
                             timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = _VERSION.search(out)
    return m.group(1) if m else None


def _version_tuple(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


def report_version(path: Path, window: int = 1 << 20) -> str | None:
    """The nsys version that wrote a report, e.g. '2022.4.2.1', when found in clear text: reports
    carry a build string 'YYYY.N.N.N-<commit>' (seen in the file's last part); the first and last
    ``window`` bytes are searched. None when not found."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            chunks = [f.read(window)]
            if size > window:
                f.seek(max(window, size - window))
                chunks.append(f.read(window))
    except OSError:
        return None
    for chunk in chunks:
        m = _BUILD.search(chunk)
        if m:
            return m.group(1).decode()
    return None


def _newer_report_error(path: Path, output: str, local: str | None) -> InputError | None:
    text = " ".join(output.split())
    hints = ("newer version", "is newer", "unsupported version", "not supported by this version",
             "please update", "upgrade", "incompatible")
    if not any(h in text.lower() for h in hints):
        return None
    found = _VERSION.findall(text)
    rep = report_version(path) or next((v for v in found if v != local), None)
    return UnsupportedFormatError(
        f"report written by nsys {rep or 'a newer version'}, newer than the local nsys {local or '?'}; "
        "export it to SQLite with that nsys version (`nsys export --type sqlite`) and convert the .sqlite",
        path=path)


def export_report(path: Path, workdir: Path) -> Path:
    """Run ``nsys export --type sqlite`` on ``path``; return the SQLite file (inside ``workdir``)."""
    path = Path(path)
    exe = nsys_executable()
    local = local_version(exe)
    rep = report_version(path)
    if rep and local and _version_tuple(rep)[:2] > _version_tuple(local)[:2]:
        raise UnsupportedFormatError(
            f"report written by nsys {rep}, newer than the local nsys {local}; export it to SQLite "
            "with that nsys version (`nsys export --type sqlite`) and convert the .sqlite", path=path)
    out = Path(workdir) / ".export" / (path.stem + ".sqlite")
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = [exe, "export", "--type", "sqlite", "--force-overwrite", "true", "--output", str(out), str(path)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=EXPORT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise InputError(f"nsys export did not finish within {EXPORT_TIMEOUT_S} s", path=path) from None
    output = (proc.stdout or "") + " " + (proc.stderr or "")
    if proc.returncode != 0 or not out.is_file() or out.stat().st_size == 0:
        err = _newer_report_error(path, output, local)
        if err is not None:
            raise err
        last = next((ln.strip() for ln in reversed(output.splitlines()) if ln.strip()), "no message")
        raise InputError(f"nsys {local or ''} export failed (exit {proc.returncode}): {last[:300]}".replace("  ", " "),
                         path=path)
    return out
