"""NVTX ranges for the workloads (domain ``tracekit``), with a no-op fallback.

The convention (documented in docs/workloads.md) is fixed here, in one place:

- ``step N`` / ``step N (warmup)``: one push/pop range per training step on the main thread;
  ``N`` counts from 0 over warm-up and measured steps together. The step and phase names are
  :mod:`tracekit.schema.step_ranges` (the Kineto collector reads them too).
- ``data``, ``forward``, ``backward``, ``optimizer``: push/pop ranges nested in the step range.
- ``measure``: one push/pop range around all measured (non-warm-up) steps, for profilers'
  capture ranges (nsys ``--capture-range=nvtx --nvtx-capture=measure@tracekit``). On CUDA the
  loop also calls ``cudaProfilerStart``/``Stop`` at its ends (``--capture-range=cudaProfilerApi``).
- ``comm allreduce``: one start/end range per DDP gradient bucket, from the moment the comm hook
  launches the all-reduce to the moment its future completes. It may open and close on different
  threads (autograd and communication threads), may overlap other buckets, and lies inside the
  step's time span: attribute it to a step by time, not by thread nesting.

No range carries a payload: nsys 2022.4 drops a process's whole NVTX capture when one does.

Backends, chosen once per process (``TRACEKIT_NVTX`` = ``auto`` (default) | ``nvtx`` | ``torch``
| ``off`` overrides): the ``nvtx`` package when importable (ranges in domain ``tracekit``), else
``torch.cuda.nvtx`` when CUDA is available (default domain: torch has no domain argument), else
no-op. ``torch.cuda.nvtx`` raises on CPU builds of torch, so it is never chosen there.
"""

from __future__ import annotations

import contextlib
import os

from tracekit.schema.step_ranges import DOMAIN

MEASURE = "measure"
COMM = "comm allreduce"


class _Off:
    name = "none"

    def push(self, message: str) -> None:
        pass

    def pop(self) -> None:
        pass

    def start(self, message: str):
        return None

    def end(self, handle) -> None:
        pass


class _NvtxPackage:
    """The ``nvtx`` package (0.2.10 is the release nsys 2022.4 records)."""

    name = "nvtx"

    def __init__(self):
        import nvtx

        self._nvtx = nvtx

    def push(self, message: str) -> None:
        self._nvtx.push_range(message, domain=DOMAIN)

    def pop(self) -> None:
        self._nvtx.pop_range(domain=DOMAIN)

    def start(self, message: str):
        return self._nvtx.start_range(message, domain=DOMAIN)

    def end(self, handle) -> None:
        self._nvtx.end_range(handle)


class _TorchCudaNvtx:
    """``torch.cuda.nvtx`` (default NVTX domain; only when CUDA is present)."""

    name = "torch.cuda.nvtx"

    def __init__(self):
        import torch.cuda.nvtx as tnvtx

        self._nvtx = tnvtx

    def push(self, message: str) -> None:
        self._nvtx.range_push(message)

    def pop(self) -> None:
        self._nvtx.range_pop()

    def start(self, message: str):
        return self._nvtx.range_start(message)

    def end(self, handle) -> None:
        self._nvtx.range_end(handle)


def _choose(kind: str):
    if kind == "off":
        return _Off()
    if kind in ("auto", "nvtx"):
        try:
            return _NvtxPackage()
        except ImportError:
            if kind == "nvtx":
                from tracekit.errors import ToolNotFoundError

                raise ToolNotFoundError("TRACEKIT_NVTX=nvtx but the nvtx package is not "
                                        "installed: pip install nvtx==0.2.10") from None
    if kind in ("auto", "torch"):
        try:
            import torch

            if torch.cuda.is_available():
                return _TorchCudaNvtx()
        except ImportError:
            pass
        if kind == "torch":
            from tracekit.errors import ToolNotFoundError

            raise ToolNotFoundError("TRACEKIT_NVTX=torch needs a CUDA build of torch and a GPU")
        return _Off()
    from tracekit.errors import InputError

    raise InputError(f"TRACEKIT_NVTX={kind!r}: expected one of auto, nvtx, torch, off")


_backend = None


def backend():
    """The process's NVTX backend (chosen on first use)."""
    global _backend
    if _backend is None:
        _backend = _choose(os.environ.get("TRACEKIT_NVTX", "auto").strip().lower() or "auto")
    return _backend


def reset_backend() -> None:
    """Forget the chosen backend (tests; after changing ``TRACEKIT_NVTX``)."""
    global _backend
    _backend = None


@contextlib.contextmanager
def nvtx_range(message: str):
    """A push/pop range around the ``with`` block (popped on exceptions too)."""
    b = backend()
    b.push(message)
    try:
        yield
    finally:
        b.pop()


def start_range(message: str):
    """Open a start/end range (may be ended on another thread); returns its handle."""
    return backend().start(message)


def end_range(handle) -> None:
    backend().end(handle)
