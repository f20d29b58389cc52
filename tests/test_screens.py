"""What a user reads in an 80-column terminal (issue 36, item 5): every named query on the shared
fixtures shows its ``@key`` measures -- in the table, in the line of values the same in every
row, or named in the note as empty in every row; never in "no room" -- and no trace timestamp
(19 digits of ns since the epoch) takes the room."""

from __future__ import annotations

import re

import pytest

from tracekit.cli.display import is_timestamp
from tracekit.cli.tableview import table_lines
from tracekit.query import all_queries
from tracekit.query.engine import Engine

pytestmark = pytest.mark.slow
WIDTH = 80


def _screen(res, q) -> str:
    units = {c.name: (c.unit, c.description) for c in q.columns}
    return "\n".join(table_lines(res.slice(0, 100), q.name, units, width=WIDTH, keys=q.keys,
                                 full=res, optional=q.optional))


def _no_room(screen: str) -> set[str]:
    note = " ".join(screen[screen.find("not shown: "):].split()) if "not shown: " in screen else ""
    m = re.search(r"not shown: (?:(.*?) \(no room in \d+ columns\))?", note)
    return set((m.group(1) or "").split(", ")) if m else set()


@pytest.mark.parametrize("fixture", ["nsys:nsys2026_h100_2gpu_pytorch_slice",
                                     "kineto:kineto_h100_timesformer_infer",
                                     "kineto:kineto_cpu_only_rank"])
def test_every_query_shows_its_key_measures_at_80_columns(fixture, nsys_run, kineto_run, named_results):
    kind, stem = fixture.split(":")
    results = named_results((nsys_run if kind == "nsys" else kineto_run)(stem))  # shared with test_output
    hidden = {}
    for name, q in all_queries().items():
        res, params = results[name]
        assert params == {}, name  # every query runs with its defaults
        screen = _screen(res, q)
        assert max(len(x) for x in screen.splitlines()) <= WIDTH
        lost = set(q.keys) & _no_room(screen)
        if lost:
            hidden[name] = sorted(lost)
        table = screen.split("\n─")[-1] if "─" in screen else ""
        if not any(is_timestamp(k) for k in q.keys):  # timeline_events: its times are the point
            assert not re.search(r"\b1[5-9]\d{17}\b", table), (name, "an epoch timestamp in the table")
    assert not hidden, hidden


def test_empty_main_measure_is_named_not_drawn(kineto_run):
    # the CPU-only rank has no kernels: step_summary's gpu_busy_ns (a main measure) is empty in
    # every row; it was a column of dashes, and warmup had no room (issue 36, item 5)
    run = kineto_run("kineto_cpu_only_rank")
    with Engine([run]) as eng:
        screen = _screen(eng.query("step_summary"), all_queries()["step_summary"])
    head = screen.splitlines()[1].split()
    assert "—" not in screen and "warmup" in head and "start_ns" not in head
    assert "gpu_busy_ns, samples_per_s (empty in every row)" in " ".join(screen.split())
    assert "start_ns (trace timestamps)" in " ".join(screen.split())
