"""What-if scenarios: changes to a graph's durations and lags before it is replayed.

A scenario is text (``tracekit whatif -s``); several joined with ``+`` combine (applied in
order). Every scenario is one entry of :data:`SCENARIOS` (a :class:`Scenario`: name, syntax,
help, doc, parse, apply, describe); ``tracekit whatif --help`` (:func:`help_epilog`) and the
scenario list of docs/whatif.md (:func:`markdown`, checked by a test) are generated from it.
A new scenario is one more entry (docs/development.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from tracekit.errors import InputError
from tracekit.whatif import cpu as _cpu
from tracekit.whatif import limits
from tracekit.whatif.graph import CAT, Graph
from tracekit.whatif.registry import Change, Scenario, State, factor
from tracekit.whatif.store import chunks
from tracekit.whatif.straggler import no_straggler, straggler_warp

__all__ = ["SCENARIOS", "Change", "Parsed", "Scenario", "apply", "describe", "entry", "help_epilog", "markdown",
           "parse", "parse_all", "removes", "straggler_warp", "unable"]


def _exact(word: str):
    return lambda part, spec: Change(word) if part == word else None


def _factor_of(word: str, only_zero: bool = False):
    rx = re.compile(rf"^{word}=(.+)$")

    def parse_part(part: str, spec: str) -> Change | None:
        m = rx.match(part)
        if not m:
            return None
        f = factor(m.group(1), spec)
        if only_zero and f != 0:
            raise InputError(f"scenario {spec!r}: only {word}=0 is defined")
        return Change(word, f)
    return parse_part


def _pattern_factor(word: str):
    """A ``parse`` for ``WORD:REGEX=F`` (``kernels:gemm=0.5``, ``ops:aten::mm=0.5``): the
    pattern checked (:func:`tracekit.whatif.limits.check_pattern`), the factor parsed."""
    rx = re.compile(rf"^{word}:(.+)=([^=]+)$")

    def parse_part(part: str, spec: str) -> Change | None:
        m = rx.match(part)
        if not m:
            return None
        limits.check_pattern(spec, m.group(1))
        return Change(word, factor(m.group(2), spec), m.group(1))
    return parse_part


def _per_chunk(change_chunk):
    """An ``apply`` that runs ``change_chunk(c, g, at, lead, d1)`` on every chunk of nodes."""
    def apply_all(g: Graph, c: Change, st: State) -> None:
        for a, b in chunks(g.n):
            at = slice(a, b)
            ld, dd = np.asarray(st.lead[at]), np.asarray(st.d1[at])
            change_chunk(c, g, at, ld, dd)
            st.lead[at], st.d1[at] = ld, dd
    return apply_all


def _comm(c: Change, g: Graph, at: slice, ld, dd) -> None:
    x = np.asarray(g.cat[at]) == CAT["transfer"]
    dd[x] = limits.scaled(dd[x], c.factor, c)


def _host(c: Change, g: Graph, at: slice, ld, dd) -> None:
    cat = np.asarray(g.cat[at])
    x = ((cat <= CAT["sync"]) | (cat == CAT["op"])) & ~np.asarray(g.first[at]) & (ld > 0)
    ld[x] = limits.scaled(ld[x], c.factor, c)


def _launch(c: Change, g: Graph, at: slice, ld, dd) -> None:
    cat = np.asarray(g.cat[at])
    dd[cat == CAT["launch"]] = 0
    ld[(cat >= CAT["kernel"]) & (cat <= CAT["collective"]) & (ld > 0)] = 0


def kernel_hits(g: Graph, pattern: str) -> np.ndarray:
    """Per node of ``g``: True for a kernel (not an NCCL kernel) whose name matches
    ``pattern`` (RE2, searched: :func:`tracekit.whatif.limits.name_hits`)."""
    hit = limits.name_hits(g.names, pattern)
    return (g.cat == CAT["kernel"]) & hit[g.name_idx]


def _apply_kernels(g: Graph, c: Change, st: State) -> None:
    hit = limits.name_hits(g.names, c.pattern)
    for a, b in chunks(g.n):
        at = slice(a, b)
        dd = np.asarray(st.d1[at])
        x = (np.asarray(g.cat[at]) == CAT["kernel"]) & hit[g.name_idx[at]]
        dd[x] = limits.scaled(dd[x], c.factor, c)
        st.d1[at] = dd


def _describe_kernels(g: Graph, c: Change) -> list[str]:
    x = kernel_hits(g, c.pattern)
    if not x.any():
        return []  # n/a: _unable_kernels says why
    ms = float(g.d1[x].sum()) / 1e6
    return [f"kernels:{c.pattern}={c.factor:g} scales {int(x.sum()):,} kernels of "
            f"{len(np.unique(g.name_idx[x]))} names ({ms:,.3f} ms of GPU time)"]


def _unable_kernels(g: Graph, c: Change) -> str | None:
    if kernel_hits(g, c.pattern).any():
        return None
    total = int((g.cat == CAT["kernel"]).sum())
    if not total and g.ops is not None:
        return "the run has no kernels (its CPU ranks' operators are ops:REGEX=F)"
    return (f"kernels:{c.pattern}={c.factor:g} matches none of the {total:,} kernels "
            "(NCCL kernels are comm=F)")


def _unable_collectives(g: Graph, c: Change) -> str | None:
    """Why ``comm=F`` or ``no-straggler`` cannot act: no collective instance in the graph."""
    if g.counts.get("instances", 0):
        return None
    nccl = int((g.cat == CAT["collective"]).sum())
    if nccl:
        return (f"its {nccl:,} NCCL kernels match no collective instance across ranks (one rank "
                "of a bigger job? convert every rank's trace together)")
    if g.ops is not None and g.ops.num_rows:
        return "the run has no Gloo collective matched across ranks (one rank?)"
    return "the run has no NCCL collectives"


def _unable_launch(g: Graph, c: Change) -> str | None:
    gpu = (g.cat >= CAT["kernel"]) & (g.cat <= CAT["memset"])
    gpu |= (g.cat == CAT["collective"]) & (g.chain_device[g.chain] >= 0)
    return None if gpu.any() else "the run has no GPU work (no launch to remove)"


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("baseline", "baseline", "the measured durations", "no change: the replay of the measured durations.",
             _exact("baseline")),
    Scenario("no-straggler", "no-straggler", "every rank as fast as the fastest between collectives",
             "each rank's work between two consecutive collectives (host time, API calls, launch "
             "lags and GPU work that start after the rank's previous collective ended and before "
             "it arrived at the next one, and the work after its last collective up to its last "
             "step's end) scaled so that the interval is as long as the shortest interval any "
             "rank had between the same two collective instances: no rank waits for another "
             "(collectives that overlap on a rank, e.g. DDP's buckets on two Gloo threads, are one).",
             _exact("no-straggler"), lambda g, c, st: no_straggler(g, st.lead, st.d1, st.d2, st.anchor),
             unable=_unable_collectives, removes=lambda c: True),
    Scenario("comm", "comm=F", "collective transfers x F",
             "every collective's transfer time x F (the wait for the last rank is not transfer).",
             _factor_of("comm"), _per_chunk(_comm), unable=_unable_collectives),
    Scenario("launch", "launch=0", "no launch overhead",
             "launch API calls take no host time and GPU work starts as soon as its stream and its "
             "dependencies allow (no launch latency, no gap on the stream).",
             _factor_of("launch", only_zero=True), _per_chunk(_launch), unable=_unable_launch),
    Scenario("kernels", "kernels:REGEX=F", "matching kernels x F",
             "kernels whose name matches REGEX (RE2, searched; a `+` in it is written `\\+`) x F; "
             "NCCL kernels are "
             "communication (`comm=F`), not matched.",
             _pattern_factor("kernels"), _apply_kernels, _describe_kernels, _unable_kernels),
    Scenario("ops", "ops:REGEX=F", "matching CPU operators x F",
             "the time of CPU ranks' PyTorch operators whose name matches REGEX (RE2, searched, as "
             "kernels:; a `+` in it is written `\\+`), with the operators they call, x F: the host "
             "counterpart of kernels:REGEX=F (a rank without CUDA; GPU ranks' operators launch "
             "kernels, which kernels:REGEX=F scales).",
             _pattern_factor("ops"), _cpu.apply_ops, _cpu.describe_ops, _cpu.unable_ops),
    Scenario("host", "host=F", "host time between calls x F",
             "host time between the calls of every host thread x F (on a CPU rank: between its "
             "top operators).",
             _factor_of("host"), _per_chunk(_host)),
)
"""Every scenario, in the order ``--help`` and docs/whatif.md list them."""



def entry(kind: str) -> Scenario:
    """The registry entry of a :attr:`Change.kind`."""
    return next(s for s in SCENARIOS if s.name == kind)


@dataclass(frozen=True)
class Parsed:
    """A scenario text (``spec``, as given to ``-s``) and its changes, parsed once."""

    spec: str
    changes: tuple[Change, ...]


def parse(spec: str) -> list[Change]:
    """The changes of one scenario text; :class:`InputError` naming what is wrong."""
    out = []
    for part in limits.split(spec):
        p = part.strip()
        for s in SCENARIOS:
            c = s.parse(p, spec)
            if c is not None:
                out.append(c)
                break
        else:
            names = [s.syntax for s in SCENARIOS]
            raise InputError(f"unknown scenario {p!r}: use {', '.join(names[:-1])} or {names[-1]} "
                             "(combine with +)")
    return out


def parse_all(specs) -> list[Parsed]:
    """Each scenario text of ``specs`` (or an already :class:`Parsed` one) parsed once."""
    return [s if isinstance(s, Parsed) else Parsed(s, tuple(parse(s))) for s in specs]


def apply(g: Graph, changes) -> tuple:
    """(lead, d1, d2, anchor) of ``g`` after ``changes`` (copies in ``g.store``; ``g`` is not
    modified), each change over the whole graph a chunk of nodes at a time, in order."""
    st = g.store
    state = State(*(st.copy(x) for x in (g.lead, g.d1, g.d2, g.anchor)))
    for c in changes:
        e = entry(c.kind)
        if e.apply is not None:
            e.apply(g, c, state)
    limits.check_times(changes, state.lead, state.d1, state.d2, state.anchor)
    return state.lead, state.d1, state.d2, state.anchor


def describe(g: Graph, changes) -> list[str]:
    """What each change of a scenario acts on in ``g``, one line each where its entry says
    (``kernels:REGEX=F``: the kernels, names and GPU time it scales, or that it matches none:
    its prediction is then the baseline's; NCCL kernels are ``comm=F``)."""
    return [line for c in changes for line in entry(c.kind).describe(g, c)]


def unable(g: Graph, changes) -> str | None:
    """Why a scenario cannot act on ``g`` (the first of its changes that cannot), or None."""
    return next((r for c in changes if (r := entry(c.kind).unable(g, c))), None)


def removes(changes) -> bool:
    """True when every change of a scenario only removes time."""
    return all(entry(c.kind).removes(c) for c in changes)


def help_epilog() -> str:
    """The scenario list at the foot of ``tracekit whatif --help``: one paragraph each, at the
    terminal's full width."""
    items = [f"{s.syntax}: {s.help}" if s.help else s.syntax for s in SCENARIOS]
    return "Scenarios (-s; combine with +, e.g. no-straggler+comm=0.5):\n\n" + "\n\n".join(
        f"  {i}" for i in items) + "\n\ndocs/whatif.md says what each changes."


def markdown() -> str:
    """The scenario list of docs/whatif.md (between its ``scenarios`` markers)."""
    return "".join(f"- `{s.syntax}`: {s.doc}\n" for s in SCENARIOS)

