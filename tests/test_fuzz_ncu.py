"""Property-based fuzzing of the Nsight Compute CSV parser (``--csv --page raw`` and ``details``).

Generated exports: optional BOM and ``==PROF==`` log lines, the raw page's header and units row,
launch rows whose metric cells are numbers (with or without thousands separators) or garbage
('n/a', '', 'abc', '1e309', 'inf', '-'), optionally a ragged row or a cut-off file. Every example
must end in an :class:`InputError` (exit 2) or in a run whose ``ncu_metrics`` hold each numeric
cell's exact value and NULL -- never a number -- for every garbage cell.
"""

from __future__ import annotations

import collections
import csv
import io
import json
import math
import shutil

import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracekit.convert import convert
from tracekit.errors import InputError

FUZZ = settings(max_examples=40, derandomize=True, database=None, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

FIXED = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream"]
METRICS = {"gpu__time_duration.sum": "nsecond", "dram__bytes_read.sum": "byte",
           "sm__cycles_elapsed.avg": "cycle", "launch__registers_per_thread": "register/thread"}
GARBAGE = ["n/a", "", "abc", "1e309", "inf", "-inf", "-", "1.2.3", "0x10", "nan"]


@st.composite
def number(draw):
    """(cell text, value): plain, decimal or with thousands separators, as ncu writes them."""
    if draw(st.booleans()):
        v = draw(st.integers(0, 10**12))
        return (f"{v:,}" if draw(st.booleans()) else str(v)), float(v)
    v = draw(st.decimals(min_value=0, max_value=10**9, places=3, allow_nan=False))
    return str(v), float(v)


@st.composite
def export(draw):
    metrics = draw(st.lists(st.sampled_from(list(METRICS)), min_size=1, max_size=4, unique=True))
    header = FIXED + metrics
    units = [""] * len(FIXED) + [METRICS[m] for m in metrics]
    rows, expected = [], {}
    for i in range(draw(st.integers(1, 5))):
        kernel = draw(st.text(alphabet=st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=10))
        row = [str(i), "4242", "app", "host", kernel, "1", "7"]
        for m in metrics:
            if draw(st.integers(0, 3)) == 0:
                cell, value = draw(st.sampled_from(GARBAGE)), None
            else:
                cell, value = draw(number())
            row.append(cell)
            expected[(i, m)] = value
        rows.append(row)
    buf = io.StringIO()
    w = csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n")
    for r in [header, units, *rows]:
        w.writerow(r)
    text = buf.getvalue()
    logs = draw(st.lists(st.sampled_from(["==PROF== Connected to process 4242 (/bin/app)",
                                          "==PROF== Profiling \"k\" - 0: 0%....50%....100% - 9 passes",
                                          "==WARNING== something"]), max_size=3))
    text = "".join(ln + "\n" for ln in logs) + text
    ragged = draw(st.integers(0, 9)) == 0
    if ragged:
        text += '"99"' + ',"x"' * (len(header) + 1) + "\n"
    cut = None
    if draw(st.integers(0, 5)) == 0:
        cut = draw(st.integers(1, len(text) - 1))
        text = text[:cut]
    bom = draw(st.booleans())
    return {"text": text, "bom": bom, "expected": expected, "rows": len(rows), "ragged": ragged,
            "cut": cut}


def test_fuzz_ncu_raw_csv(tmp_path):
    n = collections.Counter()

    @FUZZ
    @given(case=export())
    def one(case):
        n["examples"] += 1
        d = tmp_path / f"ex{n['examples']}"
        d.mkdir()
        p = d / "profile.csv"
        p.write_bytes((b"\xef\xbb\xbf" if case["bom"] else b"") + case["text"].encode())
        try:
            out = convert([p], d / "run")
        except InputError as exc:
            n["input_error"] += 1
            assert str(p) in str(exc) and "\n" not in str(exc)
            assert not (d / "run").exists()
            return
        n["ok"] += 1
        assert not case["ragged"], "a row wider than the header was accepted"
        m = json.loads((out / "manifest.json").read_text())
        launches = pq.read_table(out / m["tables"]["ncu_launches"]["file"]).to_pylist()
        metrics = pq.read_table(out / m["tables"]["ncu_metrics"]["file"]).to_pylist()
        by_launch = {r["launch_id"]: r["ncu_id"] for r in launches}
        got = {(by_launch[r["launch_id"]], r["metric_name"]): r["value"] for r in metrics
               if r["metric_name"] in METRICS}
        if case["cut"] is None:
            assert len(launches) == case["rows"]
        for key, value in got.items():
            want = case["expected"][key]
            if want is None or (case["cut"] is not None and key[0] == len(launches) - 1):
                # garbage must not become a number; the last row of a cut file may be cut short
                assert value is None or (case["cut"] is not None and key[0] == len(launches) - 1
                                         and math.isfinite(value)), (key, value)
            else:
                assert value is not None and math.isclose(value, want, rel_tol=1e-12), (key, value, want)
        shutil.rmtree(d, ignore_errors=True)

    one()
    assert n["ok"] and n["input_error"], n


DETAILS_HEADER = FIXED + ["Section Name", "Metric Name", "Metric Unit", "Metric Value",
                          "Rule Name", "Rule Type", "Rule Description"]
DETAILS_METRICS = {"Duration": "nsecond", "DRAM Throughput": "%", "Registers Per Thread": "register/thread"}


@st.composite
def details_export(draw):
    rows, expected = [], {}
    launches = draw(st.integers(1, 4))
    for i in range(launches):
        for name, unit in DETAILS_METRICS.items():
            if draw(st.integers(0, 3)) == 0:
                cell, value = draw(st.sampled_from(GARBAGE)), None
            else:
                cell, value = draw(number())
            row = [str(i), "4242", "app", "host", f"kernel_{i}", "1", "7", "Section", name, unit, cell]
            if draw(st.booleans()):
                row += ["", "", ""]  # ncu omits the rule cells on metric rows, or leaves them empty
            rows.append(row)
            expected[(i, name)] = value
        if draw(st.booleans()):  # a rule row: no metric name
            rows.append([str(i), "4242", "app", "host", f"kernel_{i}", "", "", "Section", "", "", "",
                         "SOLBottleneck", "WRN", "text, with a comma"])
    buf = io.StringIO()
    w = csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n")
    for r in [DETAILS_HEADER, *rows]:
        w.writerow(r)
    return {"text": buf.getvalue(), "expected": expected, "launches": launches}


def test_fuzz_ncu_details_csv(tmp_path):
    n = collections.Counter()

    @settings(FUZZ, max_examples=25)
    @given(case=details_export())
    def one(case):
        n["examples"] += 1
        d = tmp_path / f"ex{n['examples']}"
        d.mkdir()
        p = d / "details.csv"
        p.write_text(case["text"])
        try:
            out = convert([p], d / "run")
        except InputError as exc:
            raise AssertionError(f"a well-formed details export was refused: {exc}") from None
        m = json.loads((out / "manifest.json").read_text())
        launches = pq.read_table(out / m["tables"]["ncu_launches"]["file"]).to_pylist()
        metrics = pq.read_table(out / m["tables"]["ncu_metrics"]["file"]).to_pylist()
        assert len(launches) == case["launches"]
        by_launch = {r["launch_id"]: r["ncu_id"] for r in launches}
        got = {(by_launch[r["launch_id"]], r["metric_name"]): r["value"] for r in metrics}
        assert set(got) == set(case["expected"])
        for key, want in case["expected"].items():
            value = got[key]
            if want is None:
                assert value is None, (key, value)
            else:
                assert value is not None and math.isclose(value, want, rel_tol=1e-12), (key, value, want)
        shutil.rmtree(d, ignore_errors=True)

    one()
    assert n["examples"]
