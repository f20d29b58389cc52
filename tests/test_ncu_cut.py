"""A ``.ncu-rep`` cut short (issue 27, item 9): ncu_report loads a report cut in its first blocks
as zero ranges without a word, which read as "holds no profiled kernel launch". The report's
framing (collectors/ncu/rep_framing.py) tells the cut apart: one line naming the file, exit 2."""

from __future__ import annotations

import pytest
from conftest import FIXTURES

from tracekit.cli import run
from tracekit.collectors.ncu.rep_framing import cut_at

REPORTS = sorted((FIXTURES / "ncu").glob("*.ncu-rep"))


def test_intact_reports_end_where_their_framing_says():
    assert len(REPORTS) == 5  # ncu 2020.1 (V100) to 2024.2 (T4)
    for p in REPORTS:
        assert cut_at(p) is None, p.name


@pytest.mark.parametrize("fraction", [0.001, 0.003, 0.005, 0.01, 0.3])
@pytest.mark.parametrize("report", REPORTS, ids=lambda p: p.name.split("_")[0] + "_" + p.name.split("_")[1])
def test_cut_report_is_truncated_one_line_exit_2(tmp_path, capsys, report, fraction):
    pytest.importorskip("ncu_report")
    data = report.read_bytes()
    p = tmp_path / "cut.ncu-rep"
    p.write_bytes(data[:int(len(data) * fraction)])
    assert run(["convert", str(p), "-o", str(tmp_path / "run")]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1, err
    assert err[0].startswith(f"tracekit: error: {p}: ") and "truncated or corrupt" in err[0], err
    assert "holds no profiled kernel launch" not in err[0]
    assert [q.name for q in tmp_path.iterdir()] == ["cut.ncu-rep"]


def test_framing_names_where_it_breaks(tmp_path):
    data = (FIXTURES / "ncu" / "ncu_v100_gene_dram_time.ncu-rep").read_bytes()
    p = tmp_path / "c.ncu-rep"
    # blocks of this report: header at 10 (222 bytes, no data), 236 (150 bytes, 122,319 of data)
    p.write_bytes(data[:100])
    assert cut_at(p) == "the block header at byte 10 declares 222 bytes, but the file ends 86 bytes into it"
    p.write_bytes(data[:1000])
    assert cut_at(p) == ("block 1 at byte 236 declares 122,319 bytes of data, but the file ends "
                         f"{1000 - 236 - 4 - 150:,} bytes into them")
    p.write_bytes(data[:7])
    assert cut_at(p) == "the file ends inside the size of block 0 (byte 4)"
    p.write_bytes(data[:240] + b"\xff" * 200)  # a header that is no protocol-buffer message
    assert cut_at(p).startswith("block 1 at byte 236 ")
    p.write_bytes(b"NOPE" + data[4:])
    assert cut_at(p).startswith("it does not start with the report magic")
    p.write_bytes(data + b"\0")  # one byte past the last block
    assert cut_at(p) == f"the file ends inside the size of block 15 (byte {len(data):,})"
