"""The filter options of ``tracekit query``, ``tracekit sql`` and ``tracekit plot``: ``--step``,
``--window``, ``--rank``, ``--device``, ``--nvtx`` (one definition; :mod:`tracekit.query.filters`)."""

from __future__ import annotations

import functools
import inspect
from typing import Optional

import typer

STEP = typer.Option(None, "--step", metavar="N|A-B", help="Only events that start in step N (or "
                    "steps A to B) of each process; a kernel belongs to the step its start falls in.")
WINDOW = typer.Option(None, "--window", metavar="START:END", help="Only events that start in this "
                      "window after the run's first event: ns or with a unit (1.5s:2s, 200ms:, :3s).")
RANK = typer.Option(None, "--rank", metavar="R[,R]", help="Only the processes of these ranks.")
DEVICE = typer.Option(None, "--device", metavar="D[,D]", help="Only GPU work on these CUDA devices.")
NVTX = typer.Option(None, "--nvtx", metavar="REGEX", help="Only work launched inside NVTX ranges "
                    "whose name matches (as nsys stats --filter-nvtx).")

_PARAMS = [
    inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=opt, annotation=Optional[str])  # noqa: UP045
    for name, opt in (("step", STEP), ("window", WINDOW), ("rank", RANK), ("device", DEVICE),
                      ("nvtx", NVTX))
]


def filtered(fn):
    """``fn`` (a typer command) with the five filter options added; the command runs with them in
    effect for every engine it creates (:func:`tracekit.query.filters.use`)."""
    sig = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(*args, step=None, window=None, rank=None, device=None, nvtx=None, **kwargs):
        from tracekit.query.filters import Filters, use  # at run time: --help needs none of it

        with use(Filters.parse(step, window, rank, device, nvtx)):
            return fn(*args, **kwargs)

    wrapper.__signature__ = sig.replace(parameters=list(sig.parameters.values()) + _PARAMS)
    return wrapper
