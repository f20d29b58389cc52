"""The engine creates views, macros and roofline tables on demand: a statement gets what it names
(directly or through the macros it calls), results equal those of a fully prepared engine, and
``Engine.con`` hands out a connection with everything created."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracekit.query.engine import Engine
from tracekit.query.named_queries import all_queries
from tracekit.schema import TABLES

_ROOFLINE = "<roofline>"  # the roofline extension's marker (tracekit.query.hooks)

STEM = "nsys2026_h100_2gpu_pytorch_slice"


def test_statement_gets_what_it_names(nsys_run):
    with Engine([nsys_run(STEM)]) as eng:
        assert eng._created == set()
        n = eng.sql("SELECT count(*) AS n FROM kernels").column("n")[0].as_py()
        assert n == 3442
        assert eng._created == {"kernels"}
        # a macro pulls in the macros and views it uses (tk_steps reads nvtx_ranges)
        steps = eng.sql("SELECT count(*) AS n FROM tk_steps()").column("n")[0].as_py()
        assert {"tk_steps", "nvtx_ranges", "kernels"} <= eng._created
        assert _ROOFLINE not in eng._created and "cuda_api" not in eng._created
        assert eng.sql("SELECT count(*) AS n FROM gpu_peaks").column("n")[0].as_py() > 10
        assert _ROOFLINE in eng._created
    with Engine([nsys_run(STEM)]) as eng:
        con = eng.con  # everything, for direct DuckDB use
        assert set(TABLES) | {"runs", "run_tables", _ROOFLINE} <= eng._created
        assert con.execute("SELECT count(*) FROM tk_steps()").fetchall()[0][0] == steps


@pytest.mark.parametrize("name", sorted(all_queries()))
def test_named_query_equals_fully_prepared_engine(nsys_run, name):
    q = all_queries()[name]
    with Engine([nsys_run(STEM)]) as lazy, Engine([nsys_run(STEM)]) as full:
        full.con  # noqa: B018 - create everything first
        assert lazy.query(q).equals(full.query(q))
        assert lazy._created <= full._created


def test_memory_limit_and_private_spill_folder(nsys_run, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # DuckDB's own default spill folder would be ./.tmp
    q = all_queries()["nvtx_gpu_projection"]
    with Engine([nsys_run(STEM)]) as free:
        want = free.query(q)
    with Engine([nsys_run(STEM)], memory_limit="64MB", threads=1) as tight:
        spill = tight._spill
        assert tight.sql("SELECT current_setting('memory_limit') AS m").column("m")[0].as_py() == "61.0 MiB"
        assert tight.query(q).equals(want)
    assert not Path(spill).exists() and not (tmp_path / ".tmp").exists()
    # an engine no one closes removes its spill folder when it is collected (228 empty
    # tracekit-spill-* folders were left in /tmp by one run of the test suite)
    import gc

    dropped = Engine([nsys_run(STEM)])
    spill = dropped._spill
    assert Path(spill).is_dir()
    del dropped
    gc.collect()
    assert not Path(spill).exists()


def test_every_macro_statement_is_found():
    from tracekit.query.catalog import macro_statements as _macro_statements
    from tracekit.query.named_queries import macro_topics, macros_sql

    assert macro_topics() == ["", "cpu", "memory", "mlperf", "nvtx", "ops", "ranks", "study", "whatif"]  # every _macros.sql but the roofline's
    text = "\n".join(macros_sql(t) for t in macro_topics())
    macros = _macro_statements()
    creates = [ln for ln in text.splitlines() if ln.upper().startswith("CREATE")]
    assert len(macros) == len(creates) >= 10
    assert all(body.lstrip().upper().startswith("CREATE") and name in body.lower() for name, body in macros.items())
