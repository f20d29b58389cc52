"""Hostile text from a trace in `tracekit timeline` (issue 27, item 7): ESC, NUL, BEL, tab, a
line separator, a bidi override, markup and a 1 MiB name in kernel, process and thread names of
a real Kineto trace. The file is strict JSON with no raw control byte; names show control and
format characters as escapes (tracekit.labels.visible), are cut at 4,096 characters with one
counted warning, and markup stays text (Perfetto draws names as text)."""

from __future__ import annotations

import gzip
import json

from conftest import FIXTURES

from tracekit.cli import run
from tracekit.timeline import NAME_CHARS

ALEXNET = FIXTURES / "kineto" / "kineto_a100_alexnet.json.gz"
HOSTILE = ["\x1b[31mred\x1b[0m", "<script>alert(1)</script>", "\u202eexe.live", "A" * (1 << 20),
           "nul\x00bel\x07", "\u2028line", "tab\there"]
SHOWN = ["\\x1b[31mred\\x1b[0m", "<script>alert(1)</script>", "\\u202eexe.live",
         "A" * (NAME_CHARS - 1) + "…", "nul\\x00bel\\x07", "\\u2028line", "tab\\there"]


def test_hostile_names_in_the_timeline(tmp_path, capsys):
    doc = json.loads(gzip.decompress(ALEXNET.read_bytes()))
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    for i, e in enumerate(kernels):  # 79 kernels: 12 of each of the first two names, 11 of the others
        e["name"] = HOSTILE[i % len(HOSTILE)]
    for e in doc["traceEvents"]:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            e["args"]["name"] = "<b>proc</b>\x1b]0;title\x07" + "P" * 5000
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            e["args"]["name"] = "\u202edaerht"
    p = tmp_path / "h.json"
    p.write_text(json.dumps(doc))
    assert run(["convert", str(p), "-o", str(tmp_path / "run"), "-q"]) == 0
    capsys.readouterr()
    out = tmp_path / "t.json"
    assert run(["timeline", str(tmp_path / "run"), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    # the 11 launches of the 1 MiB kernel and the 5,000-character process name
    assert "tracekit: warning: 12 label(s) from the trace were too long to show and were cut" in err
    raw = out.read_bytes()
    assert not [b for b in raw if b < 0x20 and b != 0x0A]  # no raw control byte in the file
    assert len(raw) < 400_000  # before: 11.7 MB, the 1 MiB name on each of its 11 launches
    tl = json.loads(raw)  # strict JSON
    got = {}
    for e in tl["traceEvents"]:
        if e.get("cat") == "kernel":
            got[e["name"]] = got.get(e["name"], 0) + 1
    assert got == {s: 12 if i < 2 else 11 for i, s in enumerate(SHOWN)}
    pname = next(e["args"]["name"] for e in tl["traceEvents"] if e.get("name") == "process_name")
    assert pname.startswith("rank 0 · <b>proc</b>\\x1b]0;title\\x07PPP") and "P" * 5000 not in pname
    tracks = [e["args"]["name"] for e in tl["traceEvents"] if e.get("name") == "thread_name"]
    assert any(t.startswith("\\u202edaerht (tid ") for t in tracks), tracks
