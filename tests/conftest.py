"""Shared test helpers.

- ``SHARED`` / ``FIXTURES``: the project's real profiler outputs (``../shared/fixtures``).
- ``nsys_run(name)``: fixture export converted once per test session (cached run folder).
- ``kineto_run(name)``: the same for a Kineto fixture trace (file stem without ``.json.gz``).
- ``make_run(tmp_path, tables, manifest=None)``: a run folder built from small in-test tables,
  for golden tests of queries (hand-written rows, expected values computed by hand).
- ``edited_export(tmp_path, stem, sql)``: a writable copy of a fixture export with ``sql`` applied.
- ``requires_nsys``: skip marker when the nsys CLI is not on PATH (CI installs it).
- ``one_error_line(capsys, *needles)``: a failed command's stderr is one ``tracekit: error:`` line.
- ``nsys_stats(stem, report)`` / ``nsys_rows(stem, query, **params)``: `nsys stats` reports of a
  fixture export (tests/nsys_oracle.py) and tracekit's named-query rows on it, once per session.
- ``small_run`` / ``small_run_copy``: ``SMALL_EXPORT``'s run folder (session) / a writable copy of it.
- ``named_results(run)``: every named query's result on a run folder, once per session.
"""

from __future__ import annotations

import faulthandler
import os
import shutil
import signal
import sqlite3
from pathlib import Path

import pyarrow as pa
import pytest

from tracekit.runfolder import RunWriter

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
FIXTURES = SHARED / "fixtures"
NSYS_FIXTURES = sorted((FIXTURES / "nsys").glob("*.sqlite"))
KINETO_FIXTURES = sorted((FIXTURES / "kineto").glob("*.json.gz"))
NCU_FIXTURES = sorted((FIXTURES / "ncu").glob("*"))
SMALL_EXPORT = FIXTURES / "nsys" / "nsys2025.5_cuda_graph.sqlite"  # 3 add_one kernels: 1440, 1056, 1344 ns

# A suite started in the background of a non-interactive shell (`pytest ... &`, some CI
# runners) inherits SIGINT ignored, and so would every process it starts: the tests that
# interrupt a query with SIGINT would then wait forever. Ctrl-C's usual meaning is restored
# here (a handler resets to the default in the subprocesses, so Python installs its own there).
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# A test stuck inside C code that holds the GIL (a regular expression backtracking, a hash of a
# huge shared-reference tuple, a GIL deadlock between DuckDB and a Python callback) stops
# pytest-timeout's thread too: the worker would hang silently until CI's own limit. faulthandler's
# watchdog is a C thread that needs no GIL: past WATCHDOG_S it writes every thread's stack to the
# real stderr and ends the worker, which xdist reports as a crashed test and replaces.
# pytest-timeout (pyproject.toml, 600 s) fires first whenever Python code can run;
# $TRACEKIT_TEST_WATCHDOG_S sets another limit (to see the watchdog work)
WATCHDOG_S = float(os.environ.get("TRACEKIT_TEST_WATCHDOG_S", "720"))
_WATCHDOG_FD: int | None = None


# The xdist controller runs no test; if it outlives SESSION_WATCHDOG_S (a whole suite takes 15-20
# minutes on 2 cores), it prints every thread's stack and exits, so a stall it cannot see (a worker
# gone without closing its channel) fails the run with a trace instead of running into CI's limit.
SESSION_WATCHDOG_S = float(os.environ.get("TRACEKIT_TEST_SESSION_WATCHDOG_S", "3600"))


def pytest_configure(config):
    global _WATCHDOG_FD
    _WATCHDOG_FD = os.dup(2)
    if not hasattr(config, "workerinput") and (config.getoption("numprocesses", None) or 0):
        faulthandler.dump_traceback_later(SESSION_WATCHDOG_S, exit=True, file=_WATCHDOG_FD)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    faulthandler.dump_traceback_later(WATCHDOG_S, exit=True, file=_WATCHDOG_FD)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


def edited_export(tmp_path: Path, base: str, sql: str, name: str = "edited.sqlite") -> Path:
    """A writable copy of fixture export ``base`` (file stem) with ``sql`` applied."""
    dst = tmp_path / name
    shutil.copyfile(FIXTURES / "nsys" / f"{base}.sqlite", dst)
    dst.chmod(0o644)
    con = sqlite3.connect(dst)
    con.executescript(sql)
    con.commit()
    con.close()
    return dst


requires_nsys = pytest.mark.skipif(shutil.which("nsys") is None, reason="nsys CLI not on PATH")


def one_error_line(capsys, *needles: str, ignore: str | None = None) -> str:
    """The stderr captured since the last read, which must be exactly one ``tracekit: error: ...``
    line (blank lines, and lines starting with ``ignore`` such as progress lines, aside) holding
    every one of ``needles`` and no traceback; returns that line."""
    lines = [ln for ln in capsys.readouterr().err.splitlines()
             if ln.strip() and not (ignore and ln.startswith(ignore))]
    assert len(lines) == 1 and lines[0].startswith("tracekit: error: "), lines
    assert "Traceback" not in lines[0]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


@pytest.fixture(scope="session")
def nsys_run(tmp_path_factory):
    """Convert a fixture export (by file stem) once per session; returns the run folder path."""
    from tracekit.convert import convert

    cache: dict[str, Path] = {}
    base = tmp_path_factory.mktemp("nsys_runs")

    def get(stem: str) -> Path:
        if stem not in cache:
            src = FIXTURES / "nsys" / f"{stem}.sqlite"
            cache[stem] = convert([src], base / stem)
        return cache[stem]

    return get


@pytest.fixture(scope="session")
def kineto_run(tmp_path_factory):
    """Convert a Kineto fixture trace (file stem without .json.gz) once per session."""
    from tracekit.convert import convert

    cache: dict[str, Path] = {}
    base = tmp_path_factory.mktemp("kineto_runs")

    def get(stem: str) -> Path:
        if stem not in cache:
            cache[stem] = convert([FIXTURES / "kineto" / f"{stem}.json.gz"], base / stem)
        return cache[stem]

    return get


@pytest.fixture(scope="session")
def small_run(tmp_path_factory) -> Path:
    """The run folder (run_id 'run') of ``SMALL_EXPORT``, converted once per session; read-only."""
    from tracekit.convert import convert

    return convert([SMALL_EXPORT], tmp_path_factory.mktemp("small") / "run")


@pytest.fixture
def small_run_copy(small_run, tmp_path) -> Path:
    """``tmp_path / "run"``: a writable copy of :func:`small_run`, for a test that damages it."""
    out = tmp_path / "run"
    shutil.copytree(small_run, out)
    return out


@pytest.fixture(scope="session")
def nsys_stats(tmp_path_factory):
    """``get(stem, report)``: the :class:`nsys_oracle.StatsReport` of `nsys stats` on fixture
    export ``stem``; every report of ``nsys_oracle.STATS_REPORTS`` in one call per export."""
    from nsys_oracle import STATS_REPORTS, run_reports

    base = tmp_path_factory.mktemp("nsys_stats")
    cache = {}

    def get(stem: str, report: str):
        if stem not in cache:
            cache[stem] = run_reports(FIXTURES / "nsys" / f"{stem}.sqlite", STATS_REPORTS, base / stem)
        return cache[stem][report]

    return get


@pytest.fixture(scope="session")
def nsys_rows(nsys_run):
    """``get(stem, query, **params)``: a named query's rows (list of dicts) on the converted
    fixture export ``stem``, cached; one engine per export."""
    from tracekit.query.engine import Engine

    engines, results = {}, {}

    def get(stem: str, query: str, **params):
        key = (stem, query, tuple(sorted(params.items())))
        if key not in results:
            if stem not in engines:
                engines[stem] = Engine([nsys_run(stem)])
            results[key] = engines[stem].query(query, {k: str(v) for k, v in params.items()}).to_pylist()
        return results[key]

    yield get
    for e in engines.values():
        e.close()


# the fixture runs (nsys_run / kineto_run stems) whose every-query results named_results keeps
SHARED_RESULTS = {"nsys2026_h100_2gpu_pytorch_slice", "kineto_h100_timesformer_infer", "kineto_cpu_only_rank"}


@pytest.fixture(scope="session")
def named_results():
    """``get(run)``: {query name: (Arrow table, params)} of every named query on run folder
    ``run``, with its default parameters, in one engine. Kept for the session only for the
    fixture runs of ``SHARED_RESULTS`` (20-35 MB each; the every-query tests of test_screens,
    test_output and test_output_identity share them); any other run's are computed each call.
    A query the run refuses (QueryError: the roofline of an ncu details CSV naming no GPU) is
    run with ``ceilings=none``, and its params say so (tests/helpers/outputs.py, every_query)."""
    from helpers.outputs import every_query

    cache: dict[Path, dict] = {}

    def get(run: Path) -> dict:
        if run not in cache:
            out = every_query(run)
            if run.name not in SHARED_RESULTS:
                return out
            cache[run] = out
        return cache[run]

    return get


def make_run(path: Path, tables: dict[str, pa.Table | dict], manifest: dict | None = None) -> Path:
    """Write a run folder at ``path`` holding ``tables`` ({name: Arrow table or column dict}).
    Tables not given are recorded as not captured. Columns not given are NULL."""
    with RunWriter(path, force=True) as w:
        for name, data in tables.items():
            t = data if isinstance(data, pa.Table) else pa.table(data)
            w.write_table(name, [t])
        for k, v in (manifest or {}).items():
            w.manifest[k] = v
        w.manifest.setdefault("sources", {})
    return path


@pytest.fixture
def run_factory(tmp_path):
    counter = {"n": 0}

    def factory(tables: dict, manifest: dict | None = None, name: str | None = None) -> Path:
        counter["n"] += 1
        return make_run(tmp_path / (name or f"run{counter['n']}"), tables, manifest)

    return factory
