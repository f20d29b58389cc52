"""Finding the profilers and what the installed versions support.

Capabilities are read from the tools' own ``--help`` text, not from a table of version numbers:
an option or trace API that ``nsys profile --help`` lists is one this nsys accepts. So a newer
nsys that adds ``nccl`` to ``--trace`` gets it traced, and nsys 2022.4 (which has none) does not.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from tracekit.errors import ToolNotFoundError

NSYS_INSTALL = ("install Nsight Systems (Debian/Ubuntu non-free: apt-get install nsight-systems "
                "nsight-systems-target; or NVIDIA's installer from developer.nvidia.com/nsight-systems) "
                "or use --profiler torch")
NCU_INSTALL = ("install Nsight Compute (Debian/Ubuntu non-free: apt-get install nsight-compute "
               "nsight-compute-target; or the CUDA toolkit)")
TORCH_INSTALL = "pip install 'tracekit[collect]' (or the torch build for your CUDA version)"


def which(tool: str, how: str) -> str:
    """Absolute path of ``tool`` on PATH; :class:`ToolNotFoundError` saying ``how`` to install it."""
    path = shutil.which(tool)
    if path is None:
        raise ToolNotFoundError(f"{tool} not found on PATH: {how}")
    return path


def _run(cmd: list[str], timeout: float = 60) -> str:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=timeout)
    except (OSError, subprocess.SubprocessError) as exc:
        raise ToolNotFoundError(f"cannot run {cmd[0]}: {exc}") from None
    return (p.stdout or "") + (p.stderr or "")


def _help_option(help_text: str, option: str) -> str:
    """The paragraph of ``--help`` output that documents ``option`` ('' when absent)."""
    m = re.search(rf"^\s*(?:-\w, )?{re.escape(option)}[=\s].*?(?=^\s*(?:-\w, )?--[\w-]+[=\s]|\Z)",
                  help_text, re.M | re.S)
    return m.group(0) if m else ""


def _quoted_values(paragraph: str) -> list[str]:
    """The values a help paragraph lists as 'possible values' ('a', 'b' or 'c')."""
    m = re.search(r"Possible values are(.*?)(?:\.\s|\n\s*\n)", paragraph, re.S)
    text = m.group(1) if m else paragraph
    return re.findall(r"['`]([\w:-]+)'", text)


@dataclass(frozen=True)
class NsysInfo:
    """The installed ``nsys``: path, version and what ``nsys profile`` accepts."""

    path: str
    version: str  # e.g. "2022.4.2.1"
    traces: tuple[str, ...]  # values --trace accepts
    sample_values: tuple[str, ...]  # values --sample accepts
    options: frozenset[str] = field(default_factory=frozenset)  # long options nsys profile lists

    def supports(self, option: str) -> bool:
        return option in self.options


@functools.lru_cache(maxsize=4)
def _nsys_info(path: str) -> NsysInfo:
    version_text = _run([path, "--version"])
    m = re.search(r"(\d{4}\.\d+(?:\.\d+)*)", version_text)
    version = m.group(1) if m else version_text.strip()
    help_text = _run([path, "profile", "--help"])
    traces = _quoted_values(_help_option(help_text, "--trace"))
    samples = _quoted_values(_help_option(help_text, "--sample"))
    options = frozenset(re.findall(r"^\s*(?:-\w, )?(--[\w-]+)", help_text, re.M))
    return NsysInfo(path=path, version=version, traces=tuple(traces), sample_values=tuple(samples),
                    options=options)


def nsys_info() -> NsysInfo:
    """Describe the ``nsys`` on PATH; :class:`ToolNotFoundError` with install advice if absent."""
    return _nsys_info(which("nsys", NSYS_INSTALL))


@functools.lru_cache(maxsize=4)
def _ncu_version(path: str) -> str:
    m = re.search(r"Version (\S+)", _run([path, "--version"]))
    return m.group(1) if m else "unknown"


@functools.lru_cache(maxsize=4)
def ncu_sets(path: str) -> tuple[str, ...]:
    """Identifiers of the section sets ``ncu --list-sets`` prints."""
    return tuple(re.findall(r"^(\w+)\s+\S", _run([path, "--list-sets"]), re.M))


def ncu_version() -> tuple[str, str]:
    """(path, version) of the ``ncu`` on PATH; :class:`ToolNotFoundError` if absent."""
    path = which("ncu", NCU_INSTALL)
    return path, _ncu_version(path)


def cuda_present() -> bool:
    """Whether this machine has an NVIDIA GPU with a loaded driver (without importing torch):
    the driver's /proc entry or a GPU listed by ``nvidia-smi -L``."""
    if Path("/proc/driver/nvidia/version").exists() and any(Path("/dev").glob("nvidia[0-9]*")):
        return True
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return False
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return "GPU " in out


def torch_importable() -> bool:
    """Whether torch is installed for this Python (found without importing it: torch is slow to
    import, and the workload runs in a child process of the same interpreter)."""
    import importlib.util

    return importlib.util.find_spec("torch") is not None


def cuda_device_count() -> int | None:
    """NVIDIA GPUs on this machine (the ``/dev/nvidiaN`` device files), None when unknown."""
    n = len([p for p in Path("/dev").glob("nvidia[0-9]*") if p.name[6:].isdigit()])
    return n or None
