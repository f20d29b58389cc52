"""Hostile or damaged profiler output: an error or a counted warning, never silently wrong, and
bounded time and memory (issue 17, docs/robustness.md).

Every case mutates a real fixture (Kineto JSON, ncu CSV/report, nsys SQLite) in the test and
converts it through the CLI. Warnings are checked in the manifest (``warnings``), where the CLI
also prints them from.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import shutil
import sqlite3
import subprocess
import sys

import pyarrow.parquet as pq
import pytest
from conftest import FIXTURES, ROOT, edited_export
from hypothesis import given, settings
from hypothesis import strategies as st

from tracekit.cli import run
from tracekit.collectors.kineto.guard import ELLIPSIS, MAX_STRING_BYTES, StreamGuard

ALEXNET = FIXTURES / "kineto" / "kineto_a100_alexnet.json.gz"  # 79 kernels, 1408 events
NCCL = FIXTURES / "kineto" / "kineto_a100_nccl_2ranks_rank0.json.gz"
SMALL_NSYS = FIXTURES / "nsys" / "nsys2025.5_cuda_graph.sqlite"  # 3 kernels
NCU_RAW = FIXTURES / "ncu" / "ncu2022.3_rtx2080ti_two_kernels.raw.csv"
NCU_DETAILS = FIXTURES / "ncu" / "ncu_v100_gene_roofline_region.details.csv"
NCU_REP = FIXTURES / "ncu" / "ncu2024.1_gtx1660_naive_gemm_full.ncu-rep"


def _err(capsys) -> str:
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("tracekit: error")]
    assert len(lines) == 1, lines
    return lines[0]


def _manifest(run_dir) -> dict:
    return json.loads((run_dir / "manifest.json").read_text())


def _rows(run_dir, table) -> int:
    return pq.read_metadata(run_dir / f"{table}.parquet").num_rows


def _alexnet() -> dict:
    return json.loads(gzip.open(ALEXNET).read())


def _kernels(doc) -> list[dict]:
    return [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]


def _write(tmp_path, doc, name="t.json") -> str:
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return str(p)


def _no_leftovers(folder):
    assert not [p.name for p in folder.iterdir() if ".tmp-" in p.name]


# -- Kineto: dropped events are counted -----------------------------------------------------------
def test_kineto_events_without_ph_or_timestamp_are_warned_with_counts(tmp_path, capsys):
    doc = _alexnet()
    k = _kernels(doc)
    assert len(k) == 79 and len(doc["traceEvents"]) == 1408
    for e in k[:10]:
        e.pop("ph")
    for e, bad in zip(k[10:30], ["abc"] * 10 + [True] * 5 + [None] * 5):
        e["ts"] = bad
    k[30]["ts"] = str(k[30]["ts"])  # a numeric string is still a timestamp
    out = tmp_path / "run"
    assert run(["convert", _write(tmp_path, doc), "-o", str(out)]) == 0
    assert _rows(out, "kernels") == 79 - 30
    w = _manifest(out)["warnings"]
    assert "t.json: 10 of 1408 event(s) have no ph (event type) and were dropped" in w
    assert ("t.json: 20 of 1408 complete event(s) have a missing or non-numeric ts or dur "
            "(text, true/false, null) and were dropped") in w


def test_kineto_same_trace_twice_is_refused(tmp_path, capsys):
    copy = tmp_path / "rank1.json.gz"
    shutil.copyfile(ALEXNET, copy)
    assert run(["convert", str(ALEXNET), str(ALEXNET), "-o", str(tmp_path / "a")]) == 2
    assert "is given twice" in _err(capsys)
    assert run(["convert", str(ALEXNET), str(copy), "-o", str(tmp_path / "b")]) == 2
    assert "is the same trace as" in _err(capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rank1.json.gz"]


def test_kineto_utf8_bom_is_accepted(tmp_path):
    p = tmp_path / "bom.json"
    p.write_bytes(b"\xef\xbb\xbf" + gzip.open(ALEXNET).read())
    assert run(["convert", str(p), "-o", str(tmp_path / "run")]) == 0
    assert _rows(tmp_path / "run", "kernels") == 79


@pytest.mark.parametrize("cut, needle", [
    (100, "a gzip file that is truncated or corrupt"),
    (5000, "the gzip file is truncated"),
    (400_000, "the gzip file is truncated"),
])
def test_kineto_truncated_gzip_says_truncated(tmp_path, capsys, cut, needle):
    p = tmp_path / "cut.json.gz"
    p.write_bytes(NCCL.read_bytes()[:cut])  # the file is 759,339 bytes
    assert run(["convert", str(p), "-o", str(tmp_path / "run")]) == 2
    line = _err(capsys)
    assert needle in line and "cut.json.gz" in line
    _no_leftovers(tmp_path)


def test_kineto_base_time_out_of_int64_is_exit_2(tmp_path, capsys):
    doc = _alexnet()
    doc["baseTimeNanoseconds"] = 2 ** 70
    assert run(["convert", _write(tmp_path, doc), "-o", str(tmp_path / "run")]) == 2
    assert "baseTimeNanoseconds 1180591620717411303424 is out of range" in _err(capsys)
    _no_leftovers(tmp_path)


# -- Kineto: denial of service ----------------------------------------------------------------------
def test_kineto_huge_kernel_name_is_cut_and_counted(tmp_path):
    doc = _alexnet()
    k = _kernels(doc)
    k[0]["name"] = "é" * (3 << 20)  # 6 MiB of UTF-8, 2-byte characters
    out = tmp_path / "run"
    p = tmp_path / "t.json"
    p.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    assert run(["convert", str(p), "-o", str(out)]) == 0
    names = pq.read_table(out / "kernels.parquet", columns=["name"]).column("name").to_pylist()
    long = [n for n in names if len(n) > 1000]
    # cut at 1 MiB of UTF-8 (524,288 two-byte characters), then the ellipsis
    assert long == ["é" * (MAX_STRING_BYTES // 2) + "…"]
    assert len(names) == 79
    m = _manifest(out)
    assert "t.json: 1 text value(s) longer than 1 MiB were cut there (they end in …)" in m["warnings"]
    assert m["sources"]["kineto"]["files"][0]["strings_truncated"] == 1


def test_kineto_deep_args_are_refused_at_once(tmp_path, capsys):
    doc = _alexnet()
    text = json.dumps(doc).replace('"args": {', '"args": {"deep": ' + "[" * 20000 + "]" * 20000 + ", ", 1)
    p = tmp_path / "deep.json"
    p.write_text(text)
    assert run(["convert", str(p), "-o", str(tmp_path / "run")]) == 2
    assert "JSON nested deeper than 1000 levels" in _err(capsys)
    _no_leftovers(tmp_path)


@pytest.mark.parametrize("trace", sorted((FIXTURES / "kineto").glob("*.json.gz")), ids=lambda p: p.name)
def test_stream_guard_passes_real_traces_unchanged(trace):
    data = gzip.open(trace).read()
    for size in (1 << 16, 4093, 777):
        g = StreamGuard(trace)
        out = b"".join(g.feed(data[i:i + size]) for i in range(0, len(data), size))
        assert out == data and g.truncated == 0 and g.depth == 0 and not g.in_string


_text = st.text(alphabet='ab"\\\n/é€[]{}u\x01', max_size=60)
_json = st.recursive(st.none() | st.booleans() | st.integers() | _text,
                     lambda c: st.lists(c, max_size=4) | st.dictionaries(_text, c, max_size=4),
                     max_leaves=30)


@settings(max_examples=300, deadline=None)
@given(doc=_json, ascii_only=st.booleans(), limit=st.sampled_from([16, 25, 40]),
       size=st.sampled_from([16, 17, 23]))
def test_stream_guard_cuts_strings_the_same_whatever_the_chunks(doc, ascii_only, limit, size):
    """Valid JSON in, valid JSON out; a string of at most ``limit`` bytes of JSON text unchanged,
    one longer than ``limit`` + 5 cut (at the first escape and character boundary from
    ``limit`` on, then the ellipsis); chunking does not matter."""
    text = json.dumps(doc, ensure_ascii=ascii_only).encode()
    size = min(size, limit)

    def guarded(n):
        g = StreamGuard("x", max_string=limit)
        return b"".join(g.feed(text[i:i + n]) for i in range(0, len(text), n))

    out = guarded(limit)
    assert guarded(size) == out
    back = json.loads(out)

    def strings(o, like):
        if isinstance(o, str):
            yield o, like
        elif isinstance(o, list):
            for x, y in zip(o, like):
                yield from strings(x, y)
        elif isinstance(o, dict):
            for (k, v), (k0, v0) in zip(o.items(), like.items()):
                yield from strings(k, k0)
                yield from strings(v, v0)

    for s, s0 in strings(back, doc):
        enc0 = json.dumps(s0, ensure_ascii=ascii_only).encode()
        if len(enc0) - 2 <= limit:
            assert s == s0
        elif s == s0:
            assert len(enc0) - 2 <= limit + 5  # the boundary at or after the limit ends the string
        else:
            assert s.endswith("…") and s0.startswith(s[:-1])
            assert len(json.dumps(s[:-1], ensure_ascii=ascii_only).encode()) - 2 <= limit + 5


def test_stream_guard_depth_limit():
    g = StreamGuard("x.json", max_depth=7)
    # 7 levels deep at most; the brackets inside strings (escaped quote included) do not count
    assert g.feed(b'[[[["[[[[\\"[[[[",{"a\\\\":[["]]]]]"]]}]]]]') and g.depth == 0
    with pytest.raises(Exception, match="nested deeper than 7 levels"):
        g.feed(b"[[[[[[[[")


def test_fifo_input_is_refused_without_hanging(tmp_path):
    fifo = tmp_path / "trace.json"
    os.mkfifo(fifo)
    r = subprocess.run([sys.executable, "-m", "tracekit", "convert", str(fifo), "-o", str(tmp_path / "run")],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 2
    assert "is not a regular file (a pipe, device or socket)" in r.stderr


# -- ncu ---------------------------------------------------------------------------------------------
def test_ncu_raw_csv_without_its_units_row_is_refused(tmp_path, capsys):
    lines = NCU_RAW.read_text().splitlines(keepends=True)
    assert lines[1].startswith('"","","",')  # the units row (seconds, bytes...) of the fixture
    p = tmp_path / "nounits.csv"
    p.write_text(lines[0] + "".join(lines[2:]))
    assert run(["convert", str(p), "-o", str(tmp_path / "run")]) == 2
    line = _err(capsys)
    assert "nounits.csv: the raw page has no units row" in line


def _details_rows():
    lines = NCU_DETAILS.read_text().splitlines(keepends=True)
    hi = next(i for i, ln in enumerate(lines) if ln.startswith('"ID"'))
    return lines[:hi], list(csv.reader(lines[hi:]))


def _write_details(path, pre, rows):
    buf = io.StringIO()
    csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    path.write_text("".join(pre) + buf.getvalue())


def test_ncu_localized_decimal_comma_is_null_and_counted(tmp_path):
    pre, rows = _details_rows()
    h = rows[0]
    vi, ni = h.index("Metric Value"), h.index("Metric Name")
    target = [r for r in rows[1:] if r[ni] == "dram__bytes.sum"]
    assert len(target) == 8  # one per launch that reports DRAM bytes
    for r in target[:3]:
        r[vi] = "1,5"
    p = tmp_path / "comma.csv"
    _write_details(p, pre, rows)
    out = tmp_path / "run"
    assert run(["convert", str(p), "-o", str(out)]) == 0
    m = pq.read_table(out / "ncu_metrics.parquet").to_pylist()
    dram = [x for x in m if x["metric_name"] == "dram__bytes.sum"]
    assert [x["value"] for x in dram if x["raw_value"] == "1,5"] == [None, None, None]
    # thousands separators still read: every other value is a number
    assert all(x["value"] is not None for x in dram if x["raw_value"] != "1,5")
    assert any("3 metric value(s) like '1,5'" in w for w in _manifest(out)["warnings"])


def test_ncu_repeated_details_rows_are_dropped_and_counted(tmp_path):
    pre, rows = _details_rows()
    out0 = tmp_path / "orig"
    assert run(["convert", str(NCU_DETAILS), "-o", str(out0)]) == 0
    p = tmp_path / "dup.csv"
    _write_details(p, pre, rows[:1] + rows[1:6] + rows[1:])  # 5 rows twice
    out = tmp_path / "run"
    assert run(["convert", str(p), "-o", str(out)]) == 0
    assert _rows(out, "ncu_metrics") == _rows(out0, "ncu_metrics") == 48
    assert any("dup.csv: 5 repeated metric row(s)" in w for w in _manifest(out)["warnings"])
    assert _manifest(out)["sources"]["ncu"]["inputs"][0]["repeated_metric_rows"] == 5


@pytest.mark.parametrize("cut, needle", [(5000, "the report is truncated or corrupt: block 1 at byte 218 declares 6,121 bytes of data, but the file ends 4,715 bytes into them"),
                                         (200_000, "have no kernel name (the first: launch 0): the report is truncated")])
def test_ncu_truncated_report_says_truncated(tmp_path, capsys, cut, needle):
    pytest.importorskip("ncu_report")
    p = tmp_path / "cut.ncu-rep"
    p.write_bytes(NCU_REP.read_bytes()[:cut])
    assert run(["convert", str(p), "-o", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cut.ncu-rep" in err[0] and needle in err[0]


# -- nsys --------------------------------------------------------------------------------------------
def _edited(tmp_path, sql):
    return edited_export(tmp_path, SMALL_NSYS.stem, sql)


def test_nsys_missing_device_and_stream_columns_are_warned(tmp_path):
    p = _edited(tmp_path, "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN deviceId;"
                          "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN streamId;")
    out = tmp_path / "run"
    assert run(["convert", str(p), "-o", str(out)]) == 0
    assert ("kernels: the export has no column for device_id, stream_id (CUPTI_ACTIVITY_KIND_KERNEL); "
            "all 3 row(s) have it NULL, so results per device / stream group them as NULL"
            ) in _manifest(out)["warnings"]


def test_nsys_huge_text_is_cut_and_counted(tmp_path):
    p = _edited(tmp_path, "UPDATE StringIds SET value = printf('%.*c', 3145728, 'x') || 'END' "
                          "WHERE id = (SELECT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1);")
    out = tmp_path / "run"
    assert run(["convert", str(p), "-o", str(out)]) == 0
    names = set(pq.read_table(out / "kernels.parquet", columns=["name"]).column("name").to_pylist())
    assert names == {"x" * MAX_STRING_BYTES + ELLIPSIS.decode()}
    m = _manifest(out)
    assert "1 text value(s) longer than 1 MiB were cut there (they end in …)" in m["warnings"]
    assert m["sources"]["nsys"]["strings_cut"] == 1


def test_nsys_read_error_does_not_print_the_internal_select(tmp_path, capsys):
    src = FIXTURES / "nsys" / "nsys2023.1_rtx3090_conv_fp16.sqlite"
    p = tmp_path / "corrupt.sqlite"
    shutil.copyfile(src, p)
    p.chmod(0o644)
    con = sqlite3.connect(src)
    page = con.execute("PRAGMA page_size").fetchone()[0]
    root = con.execute("SELECT rootpage FROM sqlite_master WHERE name = 'CUPTI_ACTIVITY_KIND_RUNTIME'").fetchone()[0]
    con.close()
    with open(p, "r+b") as f:  # damage the root page of the CUDA API table
        f.seek((root - 1) * page + 100)
        f.write(b"\xff" * 200)
    assert run(["convert", str(p), "-o", str(tmp_path / "run")]) == 2
    line = _err(capsys)
    assert "corrupt.sqlite: cannot read CUPTI_ACTIVITY_KIND_RUNTIME" in line
    assert "SELECT" not in line and len(line) < 300
    _no_leftovers(tmp_path)


@pytest.mark.parametrize("name", ["run[12]", "what?", "a*b"])
def test_run_folder_names_with_glob_characters_convert(tmp_path, name):
    for src in (SMALL_NSYS, ALEXNET):
        out = tmp_path / f"{src.suffix}{name}"
        assert run(["convert", str(src), "-o", str(out)]) == 0
        assert (out / "manifest.json").is_file()


@pytest.mark.parametrize("field, value, needle", [
    ("correlation", 2 ** 70, "kernels.correlation_id does not fit its type int64 (1180591620717411303424)"),
    ("grid", [2 ** 40, 1, 1], "kernels.grid_x does not fit its type int32 (1099511627776)"),
])
def test_kineto_int64_overflow_names_its_column(tmp_path, capsys, field, value, needle):
    doc = _alexnet()
    _kernels(doc)[0]["args"][field] = value
    assert run(["convert", _write(tmp_path, doc), "-o", str(tmp_path / "run")]) == 2
    assert needle in _err(capsys)
    _no_leftovers(tmp_path)
