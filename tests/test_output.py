"""What a user reads: terminal tables, JSON/CSV, warnings, empty results and mistakes (issue 14).

Real fixture runs are converted once per session (``fixture_runs``); the terminal test runs the
CLI under a pseudo-terminal 80 columns wide.
"""

from __future__ import annotations

import csv
import fcntl
import io
import json
import os
import pty
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest
from conftest import FIXTURES, KINETO_FIXTURES, NSYS_FIXTURES, ROOT, one_error_line
from helpers.compare import compare_once
from rich.cells import cell_len

from tracekit.cli import run as cli
from tracekit.cli.output import Format, render
from tracekit.query.engine import Engine
from tracekit.query.named_queries import all_queries

NCU_RUNNABLE = [p for p in sorted((FIXTURES / "ncu").glob("*")) if p.name != "ncu_raw_no_kernels.csv"]
SLICE = "nsys2026_h100_2gpu_pytorch_slice"


class _LazyRuns(dict):
    """{file name: run folder} of every fixture, each converted on first use (once per test
    process: a pytest-xdist worker converts only the fixtures its tests read)."""

    def __init__(self, base: Path, nsys_run, kineto_run):
        super().__init__()
        self.base, self.nsys_run, self.kineto_run = base, nsys_run, kineto_run
        self.sources = {p.name: p for p in NSYS_FIXTURES + KINETO_FIXTURES + NCU_RUNNABLE}

    def __missing__(self, name: str) -> Path:
        from tracekit.convert import convert

        p = self.sources[name]
        if p in NSYS_FIXTURES:  # conftest's session conversions, shared with the other modules
            run = self.nsys_run(p.stem)
        elif p in KINETO_FIXTURES:
            run = self.kineto_run(p.name.removesuffix(".json.gz"))
        else:
            run = convert([p], self.base / p.name.replace(".", "_"))
        self[name] = run
        return run


@pytest.fixture(scope="session")
def fixture_runs(tmp_path_factory, nsys_run, kineto_run):
    """Every fixture, converted once when first read: {file name: run folder}."""
    return _LazyRuns(tmp_path_factory.mktemp("fixture_runs"), nsys_run, kineto_run)


def _out(capsys):
    c = capsys.readouterr()
    return c.out, c.err


# -- JSON and CSV ---------------------------------------------------------------------------
FIXTURE_NAMES = [p.name for p in NSYS_FIXTURES + KINETO_FIXTURES + NCU_RUNNABLE]


@pytest.mark.slow
@pytest.mark.parametrize("fixture", FIXTURE_NAMES)
def test_json_of_every_named_query_on_every_fixture_run(fixture_runs, capsys, fixture, named_results):
    # the results are shared with test_screens; the roofline of a details CSV that names no GPU
    # ran with ceilings=none
    results = named_results(fixture_runs[fixture])
    checked = 0
    for name in all_queries():
        result, _ = results[name]
        render(result, Format.json, None)
        rows = json.loads(capsys.readouterr().out)
        render(result, Format.csv, None)
        text = capsys.readouterr().out
        assert len(rows) == len(list(csv.DictReader(io.StringIO(text)))) == result.num_rows
        if rows:
            assert list(rows[0]) == result.column_names
        checked += 1
    assert checked == len(all_queries())


def test_json_keeps_integers_exact_and_serializes_every_duckdb_type(fixture_runs, capsys):
    run = fixture_runs[f"{SLICE}.sqlite"]
    sql = ("SELECT sum(duration_ns) AS total, CAST(170141183460469231731687303715884105727 AS HUGEINT) AS huge, "
           "CAST(1.250 AS DECIMAL(10,3)) AS dec, TIMESTAMP_NS '2020-01-01 00:00:01.123456789' AS ts, "
           "DATE '2020-01-02' AS d, INTERVAL 3 DAY AS iv, [1, 2] AS l, {'a': 1, 'b': 'x'} AS st, "
           "MAP {'k': 7} AS m, 'ab'::BLOB AS blob, 'nan'::DOUBLE AS nan, 'inf'::FLOAT AS inf, "
           "'a'::ENUM('a', 'b') AS e, uuid() AS u FROM kernels")
    assert cli(["sql", sql, str(run), "-f", "json"]) == 0
    out, err = _out(capsys)
    assert "NaN" not in out and "Infinity" not in out
    (row,) = json.loads(out)
    with Engine([run]) as eng:
        exact = eng.con.execute("SELECT sum(duration_ns) FROM kernels").fetchall()[0][0]
    assert row["total"] == exact and isinstance(row["total"], int)  # a HUGEINT sum, every digit
    assert row["huge"] == 2**127 - 1
    assert row["dec"] == 1.25
    assert row["ts"] == "2020-01-01T00:00:01.123456789"
    assert row["d"] == "2020-01-02" and row["iv"] == {"months": 0, "days": 3, "nanoseconds": 0}
    assert row["l"] == [1, 2] and row["st"] == {"a": 1, "b": "x"} and row["m"] == {"k": 7}
    assert row["blob"] == "YWI=" and row["nan"] is None and row["inf"] is None and row["e"] == "a"
    assert len(row["u"]) == 36
    assert cli(["sql", sql, str(run), "-f", "csv"]) == 0  # nested columns as JSON text
    (crow,) = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert crow["total"] == str(exact) and json.loads(crow["st"]) == {"a": 1, "b": "x"}


def test_step_summary_json_with_decimal_columns(run_factory, capsys):
    # two steps of 1000 ns and one kernel of 400 ns in step 1; step_summary sums give DECIMALs
    nv = {"range_id": [1, 2], "pid": [100, 100], "tid": [100, 100], "style": ["push/pop"] * 2,
          "domain": ["tracekit"] * 2, "name": ["step 0 (warmup)", "step 1"],
          "start_ns": [0, 1000], "end_ns": [1000, 2000], "duration_ns": [1000, 1000]}
    k = {"pid": [100], "device_id": [0], "stream_id": [7], "name": ["gemm"], "start_ns": [1100],
         "end_ns": [1500], "duration_ns": [400]}
    run = run_factory({"nvtx_ranges": nv, "kernels": k, "processes": {"pid": [100], "name": ["p"]}},
                      {"workload": {"name": "w", "samples_per_step": 10, "world_size": 1}})
    for q in ("step_summary", "cpu_overhead"):  # data_ns ... and launches are DECIMAL(38,0)
        assert cli(["query", q, str(run), "-f", "json"]) == 0
        rows = json.loads(capsys.readouterr().out)
        assert rows, q
    assert cli(["query", "step_summary", str(run), "-f", "json"]) == 0
    rows = {r["step"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows[1]["wall_ns"] == 1000 and rows[1]["gpu_busy_ns"] == 400
    assert rows[1]["data_ns"] == 0 and isinstance(rows[1]["data_ns"], int)


# -- terminal tables -----------------------------------------------------------------------
def _pty_run(args: list[str], cols: int = 80) -> str:
    """Run ``python -m tracekit ARGS`` with stdout and stderr on a pseudo-terminal ``cols`` wide."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, cols, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    p = subprocess.Popen([sys.executable, "-m", "tracekit", *args], stdin=slave, stdout=slave,
                         stderr=slave, env=env, cwd=ROOT, close_fds=True)
    os.close(slave)
    chunks = []
    while True:
        r, _, _ = select.select([master], [], [], 120)
        if not r:
            p.kill()
            break
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    p.wait(timeout=60)
    os.close(master)
    assert p.returncode == 0, b"".join(chunks)
    return b"".join(chunks).decode().replace("\r\n", "\n")


@pytest.mark.parametrize("query", ["kernel_summary", "gpu_utilization", "cuda_api_summary"])
def test_tables_fit_an_80_column_terminal(fixture_runs, query):
    run = fixture_runs[f"{SLICE}.sqlite"]
    text = _pty_run(["query", query, str(run)])
    lines = text.rstrip("\n").split("\n")
    assert max(cell_len(line) for line in lines) <= 80, text
    assert "\x1b" not in text  # no colour or cursor escapes either
    assert lines[0] == f"{query} (run {SLICE})"
    const = lines[1].startswith("same in every row: ")  # constant columns, under the title
    header = lines[1 + const].split()
    if query == "kernel_summary":
        # the columns a reader needs first; stddev and min/max go when there is no room
        assert header[:3] == ["name", "instances", "total"] and header[-2:] == ["time", "%"]
        assert "stddev_ns" in text.split("not shown:")[1]
        assert len(lines) > 40  # one line per kernel name, never folded
    if query == "gpu_utilization":
        assert header[0] == "scope" and {"pid", "device_id"} <= set(header)  # identifiers stay
        runs = [row.split()[:3] for row in lines[3 + const:] if row.startswith("run ")]
        assert runs == [["run", "111", "0"], ["run", "112", "1"]]


def test_wide_terminal_shows_names_unaltered_and_units_match_the_raw_values(fixture_runs, capsys,
                                                                              monkeypatch):
    run = fixture_runs[f"{SLICE}.sqlite"]
    assert cli(["query", "kernel_summary", str(run), "-f", "csv"]) == 0
    raw = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    monkeypatch.setenv("COLUMNS", "4000")
    assert cli(["query", "kernel_summary", str(run)]) == 0
    out = capsys.readouterr().out
    lines = out.split("\n")
    assert "…" not in out and "not shown" not in out
    assert lines[1].split() == ["name", "instances", "total", "ms", "avg", "µs", "med", "µs", "min",
                                "µs", "max", "µs", "stddev", "µs", "time", "%"]
    for r, line in zip(raw, lines[3:]):
        assert line.startswith(r["name"] + " ")  # every name verbatim
        cells = line[len(r["name"]):].split()
        assert cells[0] == r["instances"]
        assert cells[1] == f"{int(r['total_ns']) / 1e6:.3f}"  # ms, from the exact ns
        assert cells[-1] == f"{float(r['time_pct']):.1f}"


def test_trace_text_is_never_markup_nor_a_terminal_escape(run_factory, capsys, monkeypatch):
    names = ["[lambda() (instance 1)]", "void f<T>() [with T = float]", "aten::mm [param|cuda]",
             "bad [/] close", "[link=http://example.com]click[/link]", "\x1b]0;pwned\x07title",
             "\x1b[2Jclear", "$x^2$ mathtext", "rtl \u202eevil"]
    k = {"pid": [1] * len(names), "device_id": [0] * len(names), "stream_id": [7] * len(names),
         "name": names, "start_ns": [i * 100 for i in range(len(names))],
         "end_ns": [i * 100 + 50 for i in range(len(names))], "duration_ns": [50] * len(names)}
    run = run_factory({"kernels": k})
    monkeypatch.setenv("COLUMNS", "200")
    assert cli(["query", "kernel_summary", str(run)]) == 0
    out, err = _out(capsys)
    for n in names[:5] + ["$x^2$ mathtext"]:
        assert n in out
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert "\\x1b]0;pwned\\x07title" in out and "\\x1b[2Jclear" in out and "rtl \\u202eevil" in out
    assert cli(["query", "kernel_summary", str(run), "-f", "json"]) == 0  # data untouched there
    assert {r["name"] for r in json.loads(capsys.readouterr().out)} == set(names)


# -- warnings and empty results --------------------------------------------------------------
def test_convert_says_zero_durations_once_as_what_they_are(tmp_path, capsys):
    # issue 36 item 6: the AlexNet trace's 0 ns rows are calls shorter than Kineto's 1 µs
    # resolution (every duration in it is whole µs): a note at convert, never repeated
    src = FIXTURES / "kineto" / "kineto_a100_alexnet.json.gz"
    assert cli(["convert", str(src), "-o", str(tmp_path / "a")]) == 0
    out, err = _out(capsys)
    lines = err.strip().split("\n")
    end = " last 0 ns (shorter than the trace's 1 µs resolution); kept, they add no time"
    assert lines[:3] == [f"tracekit: 94 row(s) of cuda_api{end}", f"tracekit: 16 row(s) of cuda_sync{end}",
                         f"tracekit: 30 row(s) of nvtx_ranges{end}"]
    assert lines[3].startswith(f"wrote {tmp_path / 'a'} (") and out == ""
    assert cli(["--quiet", "convert", str(src), "-o", str(tmp_path / "b")]) == 0
    assert "0 ns" not in capsys.readouterr().err
    # a query over the run does not repeat them
    assert cli(["query", "cuda_api_summary", str(tmp_path / "a"), "-f", "csv"]) == 0
    assert capsys.readouterr().err == ""
    # nor over a run folder converted before (the old warnings in its manifest)
    man = json.loads((tmp_path / "a" / "manifest.json").read_text())
    man["warnings"] = ["94 row(s) of cuda_api have a zero or negative duration",
                       "1 duplicate row(s) in cuda_api (identical to another row in every column); kept"]
    (tmp_path / "a" / "manifest.json").write_text(json.dumps(man))
    assert cli(["query", "cuda_api_summary", str(tmp_path / "a"), "-f", "csv"]) == 0
    assert capsys.readouterr().err == ""


def test_empty_nccl_says_why(fixture_runs, capsys):
    run = fixture_runs["kineto_a100_alexnet.json.gz"]
    assert cli(["query", "nccl", str(run)]) == 0
    out, err = _out(capsys)
    assert out == ""
    # nccl can split by step (per_step=true), so the run's warnings on the tables steps come from
    # (nvtx_ranges) print first; the last line says why the result is empty
    *warnings, last = err.rstrip("\n").split("\n")
    assert all(w.startswith("tracekit: warning: ") for w in warnings)
    assert last == (f"tracekit: nccl returned no rows: no NCCL kernels (names with ncclKernel_ or "
                    f"ncclDevKernel_: the trace holds no NCCL communication), among the 79 rows of "
                    f"kernels in run {run.name}")


@pytest.mark.parametrize("query", ["stragglers", "step_waits"])
def test_empty_rank_queries_say_the_trace_is_one_rank(fixture_runs, capsys, query):
    """A one-rank trace of an 8-rank job (MI300X rank 0: 17 NCCL calls, each with one
    participant) has no stragglers to name: the last line says why, not only 'no row matched'."""
    run = fixture_runs["kineto_mi300_resnet_actckpt_train.json.gz"]
    assert cli(["query", query, str(run)]) == 0
    out, err = _out(capsys)
    assert out == ""
    assert err.rstrip("\n").split("\n")[-1] == (
        f"tracekit: {query}: run {run.name}: each of its 17 collective calls has one participant "
        f"(one rank's trace): {'stragglers need' if query == 'stragglers' else 'waits across ranks need'} "
        "every rank's trace in one run folder (tracekit convert TRACE... of the job)")


def test_empty_roofline_names_the_missing_ncu_pass(fixture_runs, capsys):
    run = fixture_runs[f"{SLICE}.sqlite"]
    assert cli(["query", "roofline", str(run), "-f", "csv"]) == 0
    out, err = _out(capsys)
    assert out.startswith("run_id,") or out.startswith('"run_id"')  # the header, no rows
    assert len(err.strip().split("\n")) == 1
    assert f"roofline returned no rows: run {SLICE} has no ncu_launches, ncu_metrics (not captured: " in err
    assert "tracekit collect --profiler ncu" in err


def test_empty_osrt_on_a_kineto_run_quotes_the_manifest_reason(fixture_runs, capsys):
    run = fixture_runs["kineto_a100_alexnet.json.gz"]
    assert cli(["query", "osrt_summary", str(run)]) == 0
    err = capsys.readouterr().err
    assert "has no osrt_api (not captured: not recorded by the PyTorch profiler)" in err
    assert "nsys profile --trace=osrt" in err


# -- mistakes ------------------------------------------------------------------------------
def test_mistakes_get_suggestions(fixture_runs, capsys):
    run = str(fixture_runs[f"{SLICE}.sqlite"])
    assert cli(["query", "kernel_sumary", run]) == 2
    assert "unknown query 'kernel_sumary' (did you mean 'kernel_summary'?)" in one_error_line(capsys)
    assert cli(["query", "kernel_summary", run, "-p", "topp=3"]) == 2
    assert "no parameter 'topp' (did you mean 'top'?)" in one_error_line(capsys)
    assert cli(["sql", "SELECT * FROM kernals", run]) == 2
    line = one_error_line(capsys)
    assert "Table kernals does not exist (did you mean 'kernels'?)" in line and "pg_" not in line
    assert cli(["query", "kernel_summary", run, "--columns", "name,totl_ns"]) == 2
    assert "no column 'totl_ns' (did you mean 'total_ns'?)" in one_error_line(capsys)
    src = FIXTURES / "nsys" / f"{SLICE}.sqlite"
    assert cli(["query", "kernel_summary", str(src)]) == 2
    assert "is a file, not a run folder" in (line := one_error_line(capsys)) and "tracekit convert" in line
    assert cli(["query", "kernel_summary", "no_such_trace.nsys-rep"]) == 2
    assert "no such file or directory; a run folder is expected here" in one_error_line(capsys)


def test_columns_option_selects_in_every_format(fixture_runs, capsys):
    run = str(fixture_runs[f"{SLICE}.sqlite"])
    assert cli(["query", "kernel_summary", run, "-c", "name,time_pct", "-f", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert list(rows[0]) == ["name", "time_pct"]


def test_queries_name_describes_one_query(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert cli(["queries", "kernel_summary"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("kernel_summary (summary): ")
    assert "  top  BIGINT, default 0: " in out and "  time_pct [%]" in out
    assert max(cell_len(x) for x in out.split("\n")) <= 80
    assert cli(["queries", "kernel_sumary"]) == 2
    assert "did you mean 'kernel_summary'" in one_error_line(capsys)


def test_help_lists_each_command_on_one_line(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    assert cli(["--help"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.split("\nCommands:\n", 1)[1].split("\n") if line.strip()]
    commands = [r for r in rows if r[2] != " "]
    continuation = [r for r in rows if r[2] == " "]
    assert len(commands) >= 10 and not continuation, out


def test_compare_writes_its_metrics_in_every_format(fixture_runs, capsys, monkeypatch):
    from tracekit.cli.compare_output import metric_label

    a = str(fixture_runs["nsys2020.5_2xv100_p2p_nvlink.sqlite"])
    b = str(fixture_runs["nsys2020.5_2xv100_p2p_via_host.sqlite"])
    runs = compare_once(monkeypatch)  # three formats of one comparison
    assert cli(["compare", a, b, "-f", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    m = {r["metric"]: r for r in doc["metrics"]}
    doc_metrics = list(m)
    assert m["gpu_idle_ns"]["a"] == 559999448 and m["gpu_idle_ns"]["b"] == 671764965
    assert len(doc["kernels"]) == 2 and doc["kernel_counts"]["same"] == 2
    assert cli(["compare", a, b, "-f", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert {r["section"] for r in rows} == {"metric", "kernel", "loss"}
    # the loss parts (issue 26) add up to the step-time delta of the metric rows
    step = [r for r in rows if r["section"] == "metric" and r["name"] == "step_ns"][0]
    parts = [float(r["delta"]) for r in rows if r["section"] == "loss"]
    assert len(parts) == 7 and sum(parts) == pytest.approx(float(step["delta"]), abs=1e-3)
    assert [r for r in rows if r["name"] == "gpu_idle_ns"][0]["delta"] == "111765517"
    monkeypatch.setenv("COLUMNS", "80")
    assert cli(["compare", a, b]) == 0
    out = capsys.readouterr().out
    assert max(cell_len(x) for x in out.split("\n")) <= 80
    # one unit for every duration row (issue 28), the one of the largest (the copies' seconds):
    # 559999448 ns -> 0.560 s; relative (671764965 - 559999448) / 559999448 = +20.0 %
    # (names without their unit suffix beside values in s, issue 36 item 8)
    durations = {metric_label(m) for m in doc_metrics if m.endswith("_ns")}
    lines = [x.split() for x in out.split("\n") if x.split()[:1] and x.split()[0] in durations
             and x.split()[1:2] != ["size"]]
    assert lines[[x[0] for x in lines].index("gpu_idle")] == \
        ["gpu_idle", "0.560", "s", "0.672", "s", "0.112", "s", "+20.0%"]
    assert {x[2] for x in lines if len(x) > 2} == {"s"}
    assert runs["calls"] == 1


def test_every_width_fits_and_keeps_the_row_names(fixture_runs):
    from tracekit.cli.output import table_lines

    run = fixture_runs[f"{SLICE}.sqlite"]
    with Engine([run]) as eng:
        results = {q: eng.query(q) for q in ("kernel_summary", "nvtx_gpu_projection", "gpu_idle",
                                               "launch_latency", "memcpy_summary")}
    units = {q: {c.name: (c.unit, c.description) for c in all_queries()[q].columns} for q in results}
    for width in range(12, 260, 9):
        for q, t in results.items():
            lines = table_lines(t.slice(0, 50), q, units[q], width)
            assert max(cell_len(x) for x in lines) <= width, (q, width)
            if width >= 40 and "name" in t.column_names:  # the row names are the last to go
                header = lines[next(i for i, x in enumerate(lines) if x.startswith("─")) - 1]
                assert "name" in header.split(), (q, width, header)


def test_shorten_and_visible():
    from tracekit.cli.termtable import shorten, visible

    name = "void at::native::vectorized_elementwise_kernel<4, float>(int, T2, T3)"
    assert shorten(name, 30) == "void at::native::vec…, T2, T3)"  # 20 + … + 9 cells
    assert shorten(name, 30, "end") == "void at::native::vectorized_e…"  # 29 + …
    assert shorten(name, 200) == name and shorten("漢字漢字漢字", 7) == "漢字…字"  # wide chars: 2 cells
    assert visible("a\x1b[2Jb\x07\n\t\u202e\x9b") == "a\\x1b[2Jb\\x07\\n\\t\\u202e\\x9b"
    assert visible("ünïcødé [x] $y$") == "ünïcødé [x] $y$"


def test_errors_and_empty_sql_are_plain_one_liners(fixture_runs, capsys, tmp_path):
    assert cli(["query", "kernel_summary", str(tmp_path / "x\x1b]0;t\x07")]) == 2
    line = one_error_line(capsys)
    assert "\x1b" not in line and "x\\x1b]0;t\\x07" in line
    run = fixture_runs[f"{SLICE}.sqlite"]
    assert cli(["sql", "SELECT name FROM kernels WHERE name = 'none'", str(run)]) == 0
    out, err = _out(capsys)
    assert out == ""
    assert err == (f"tracekit: the statement returned no rows: no row matched the query's conditions, "
                   f"among the 3442 rows of kernels in run {SLICE}\n")
    assert cli(["-q", "sql", "SELECT name FROM kernels WHERE name = 'none'", str(run)]) == 0
    assert capsys.readouterr().err == ""


def test_queries_listing_fits(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert cli(["queries", "-v"]) == 0
    out = capsys.readouterr().out
    assert max(cell_len(x) for x in out.split("\n")) <= 80
    assert "  kernel_summary  " in out and "time_pct [%]" in out and "[ns]" in out


def test_requires_lines_name_tables_the_query_reads():
    from tracekit import schema
    from tracekit.query.explain import tables_read

    declared = [q for q in all_queries().values() if q.requires]
    assert {"nccl", "roofline", "step_summary", "nvtx_gpu_projection"} <= {q.name for q in declared}
    for q in declared:
        assert set(q.requires) <= set(schema.TABLES), q.name
        assert set(q.requires) <= tables_read(q.sql), q.name  # a typo would never explain anything


def test_every_argument_and_option_has_a_description():
    import typer

    from tracekit.cli.app import app

    root = typer.main.get_command(app)
    missing = []

    def walk(cmd, path):
        for p in cmd.params:
            if not (getattr(p, "help", None) or "").strip():
                missing.append(f"{path} {p.name}")
        for name, sub in getattr(cmd, "commands", {}).items():
            if not (sub.help or "").strip():
                missing.append(f"{path} {name} (command)")
            walk(sub, f"{path} {name}")

    walk(root, "tracekit")
    assert missing == []


def test_table_shows_the_first_rows_and_says_how_many_more(fixture_runs, capsys):
    # 250 rows: the table shows 100 (the query's first ones, in its order) and says so on stderr;
    # --rows picks another count, --rows 0 all; CSV always holds every row
    run = str(fixture_runs[f"{SLICE}.sqlite"])
    stmt = "SELECT range AS i FROM range(250) ORDER BY i"

    def table(*extra):
        assert cli(["sql", stmt, run, *extra]) == 0
        out, err = capsys.readouterr()
        rows = [ln.split() for ln in out.splitlines() if ln.strip().isdigit()]
        return [int(r[0]) for r in rows], err

    got, err = table()
    assert got == list(range(100))
    assert "showing the first 100 of 250 rows" in err and "--rows 0" in err
    got, err = table("--rows", "7")
    assert got == list(range(7)) and "showing the first 7 of 250 rows" in err
    got, err = table("--rows", "0")
    assert got == list(range(250)) and "showing" not in err
    got, err = table("--rows", "250")
    assert got == list(range(250)) and "showing" not in err
    assert cli(["sql", stmt, run, "-f", "csv"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[1:] == [str(i) for i in range(250)] and "showing" not in err
