"""Labels from traces are capped and escaped before Arrow, matplotlib, HTML and the terminal
(issue 27, item 7). Each case mutates a real fixture: an NVTX domain name of 3 MiB, a Kineto
process name and a workload name of 1 MB, control characters in kernel and column names."""

from __future__ import annotations

import gzip
import json
import warnings
import xml.dom.minidom

import pyarrow.parquet as pq
import pytest
from conftest import FIXTURES, edited_export

from tracekit.cli import run
from tracekit.labels import LABEL_CHARS, label, take_cuts

ESC = "\x1b"
ALEXNET = FIXTURES / "kineto" / "kineto_a100_alexnet.json.gz"


def _trace(tmp_path, name, edit) -> str:
    d = json.loads(gzip.decompress(ALEXNET.read_bytes()))
    for e in d["traceEvents"]:
        edit(e)
    p = tmp_path / name
    p.write_text(json.dumps(d))
    return str(p)


def test_label_cuts_escapes_and_counts():
    take_cuts()
    assert label("ab\x1b[31m") == "ab\\x1b[31m"
    long = label("x" * 10_000)
    assert len(long) == LABEL_CHARS and long.endswith("…")
    assert label("\x07" * 500, 10) == "\\x07\\x07\\…"
    assert take_cuts() == 2 and take_cuts() == 0


def test_nvtx_domain_name_cut_at_1_kib_with_a_warning(tmp_path, capsys):
    """The fixture's TensorRT domain (59 ranges) renamed to 3 MiB of text: every range carried
    it (a 64 MB one overflowed Arrow's take); now 1 KiB and a warning."""
    src = edited_export(tmp_path, "nsys2023.1_rtx3090_conv_fp16",
                        "UPDATE NVTX_EVENTS SET text = replace(hex(zeroblob(1572864)), '00', 'Dd') "
                        "|| char(27) WHERE eventType = 75;")
    out = tmp_path / "run"
    assert run(["convert", str(src), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "1 NVTX domain or category name(s) longer than 1 KiB were cut there" in err
    domains = pq.read_table(out / "nvtx_ranges.parquet", columns=["domain"]).column("domain")
    cut = [d for d in domains.to_pylist() if d and d.startswith("Dd")]
    assert len(cut) == 59 and set(cut) == {"Dd" * 512 + "…"}
    m = json.loads((out / "manifest.json").read_text())
    assert m["sources"]["nsys"]["labels_cut"] == 1


@pytest.mark.parametrize("how", ["process_name", "override"])
def test_study_with_a_1_mb_process_or_workload_name(tmp_path, capsys, how):
    """A 1 MB Kineto process name (the workload label comes from it) ran `study` out of memory;
    a 1 MB workload name asked matplotlib for a 9,000,772-pixel-wide image."""
    huge = "P" * 1_000_000 + ESC + "[31m"

    def edit(e):
        if how == "process_name" and e.get("ph") == "M" and e.get("name") == "process_name":
            e["args"]["name"] = huge
    trace = _trace(tmp_path, "t.json", edit)
    rdir, sdir = tmp_path / "run", tmp_path / "study"
    assert run(["convert", trace, "-o", str(rdir), "-q"]) == 0
    args = ["study", str(rdir), "-o", str(sdir)]
    if how == "override":
        (tmp_path / "o.toml").write_text(f'[defaults]\nworkload = "{huge[:1_000_000]}\\u001b[31m"\n')
        args += ["--override", str(tmp_path / "o.toml")]
    capsys.readouterr()
    assert run(args) == 0
    err = capsys.readouterr().err
    assert "label(s) from the trace were too long to show and were cut" in err
    assert ESC not in err
    html = (sdir / "report.html").read_text(encoding="utf-8")
    assert ESC not in html and huge[:1000] not in html
    assert "P" * 119 + "…" in html  # the workload label, cut at 120 characters
    assert len(html) < 2_000_000


def test_control_characters_in_kernel_names_svg_is_xml(tmp_path, capsys):
    def edit(e):
        if e.get("cat") == "kernel":
            e["name"] = "evil\x1b[2J\x07\x0b\x00 <k> " + e["name"][:30]
    rdir = tmp_path / "run"
    assert run(["convert", _trace(tmp_path, "t.json", edit), "-o", str(rdir), "-q"]) == 0
    svg = tmp_path / "k.svg"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert run(["plot", "kernels", str(rdir), "-o", str(svg)]) == 0
    text = svg.read_text(encoding="utf-8")
    xml.dom.minidom.parseString(text)  # raised ExpatError: not well-formed (invalid token)
    assert ESC not in text and "\x07" not in text and "evil\\x1b[2J" in text
    assert not any(ESC in str(w.message) or "\x07" in str(w.message) for w in caught)
    assert ESC not in capsys.readouterr().err


def test_sql_column_names_escaped_in_the_terminal_table(tmp_path, capsys):
    rdir = tmp_path / "run"
    assert run(["convert", str(ALEXNET), "-o", str(rdir), "-q"]) == 0
    capsys.readouterr()
    assert run(["sql", 'SELECT 1 AS "a\x1b[31mb", \'x\x1b]0;t\x07\' AS c', str(rdir)]) == 0
    out = capsys.readouterr().out
    assert ESC not in out and "\x07" not in out
    assert "a\\x1b[31mb" in out
