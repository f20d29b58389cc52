"""What a what-if scenario is: one :class:`Scenario` entry (name, parse, apply, describe, help).

The scenarios themselves are listed in :data:`tracekit.whatif.scenarios.SCENARIOS`; the CLI's
``--scenario`` help and the scenario list of docs/whatif.md are generated from that list. This
module holds only the types and the factor parser, so a module that defines scenarios imports it
without importing the list (no cycle).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from tracekit.errors import InputError


@dataclass(frozen=True)
class Change:
    """One parsed part of a scenario text (the parts are joined with ``+``): ``kind`` is the
    :attr:`Scenario.name` of its registry entry; ``factor`` and ``pattern`` its values (1.0 and
    "" where the scenario has none)."""

    kind: str
    factor: float = 1.0
    pattern: str = ""


@dataclass
class State:
    """The per-node lags and durations a scenario changes (copies of the graph's, in its store):
    ``lead``, ``d1``, ``d2``, ``anchor`` as :class:`tracekit.whatif.graph.Graph` defines them."""

    lead: np.ndarray
    d1: np.ndarray
    d2: np.ndarray
    anchor: np.ndarray


@dataclass(frozen=True)
class Scenario:
    """One what-if scenario.

    - ``name``: its kind (:attr:`Change.kind`), unique in the registry;
    - ``syntax``: how it is written, e.g. ``comm=F``;
    - ``help``: a few words for ``tracekit whatif --help`` (after the syntax);
    - ``doc``: one paragraph for the scenario list of docs/whatif.md (markdown);
    - ``parse(part, spec)``: the :class:`Change` of one ``+``-separated ``part`` of the scenario
      text ``spec``, or None when ``part`` is not this scenario; :class:`InputError` naming
      ``spec`` when it is, with a bad value;
    - ``apply(graph, change, state)``: change ``state`` (:class:`State`) in place; None for a
      scenario that changes nothing (baseline);
    - ``describe(graph, change)``: lines for stderr saying what the change acts on in this graph
      (e.g. how many kernels a regular expression matches); none by default;
    - ``unable(graph, change)``: why the change cannot act on this graph (its rows are then
      ``n/a`` with that reason), or None;
    - ``removes(change)``: True when the change only removes time (its prediction is then never
      slower than the baseline); by default a factor <= 1.
    """

    name: str
    syntax: str
    help: str
    doc: str
    parse: Callable[[str, str], Change | None]
    apply: Callable | None = None
    describe: Callable = field(default=lambda g, c: [])
    unable: Callable = field(default=lambda g, c: None)
    removes: Callable = field(default=lambda c: c.factor <= 1)


def factor(text: str, spec: str) -> float:
    """The factor ``text`` of the scenario ``spec``: a finite number >= 0, else
    :class:`InputError` naming ``spec``."""
    try:
        f = float(text)
    except ValueError:
        raise InputError(f"scenario {spec!r}: {text!r} is not a number (e.g. comm=0.5)") from None
    if not np.isfinite(f) or f < 0:
        raise InputError(f"scenario {spec!r}: the factor must be a finite number >= 0")
    return f
