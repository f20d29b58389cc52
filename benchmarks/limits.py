"""Time and peak RSS of `tracekit convert` on hostile inputs, against the same input unharmed.

    python benchmarks/limits.py [--out docs/benchmarks.md]

The Kineto fixture kineto_a100_alexnet.json.gz gets one kernel named by 16, 32 or 64 MiB of text,
or 20,000 levels of nested arrays in one event's ``args``; the small nsys export
nsys2025.5_cuda_graph.sqlite gets a 64 MiB kernel name in StringIds. Each is converted in its own
process (wall time, ``os.wait4`` peak RSS) beside the unmodified input. For comparison the JSON
parser alone (ijson's C backend, what tracekit used before the limits) reads the same long-name
and deep texts: its time grows with the square of the name length and its memory with the square
of the depth. The section "Limits on hostile input" of the output file is replaced.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
FIXTURES = ROOT.parent / "shared" / "fixtures"
KINETO = FIXTURES / "kineto" / "kineto_a100_alexnet.json.gz"
NSYS = FIXTURES / "nsys" / "nsys2025.5_cuda_graph.sqlite"
MIB = 1 << 20
BEGIN, END = "<!-- limits:begin -->", "<!-- limits:end -->"

sys.path.insert(0, str(HERE))
from versions import versions_line  # noqa: E402

_PARSE = """
import ijson, sys
n = 0
with open(sys.argv[1], "rb") as f:
    for _ in ijson.items(f, "traceEvents.item", use_float=False, buf_size=1 << 16):
        n += 1
print(n)
"""


def measure(cmd: list[str], timeout: float = 600) -> dict:
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _, status, ru = os.wait4(p.pid, 0)
    finally:
        p.returncode = 0
    wall = time.perf_counter() - t0
    err = p.stderr.read().decode("utf-8", "replace").strip().splitlines()
    return {"wall": wall, "rss_mib": ru.ru_maxrss / 1024, "rc": os.waitstatus_to_exitcode(status),
            "err": err[-1] if err else ""}


def kineto_doc() -> dict:
    return json.loads(gzip.open(KINETO).read())


def write_long_name(path: Path, mib: int, compress: bool) -> None:
    doc = kineto_doc()
    k = next(e for e in doc["traceEvents"] if e.get("cat") == "kernel")
    k["name"] = "@@NAME@@"
    head, tail = json.dumps(doc).split("@@NAME@@")
    opener = gzip.open if compress else open
    with opener(path, "wb") as f:
        f.write(head.encode())
        block = b"a" * MIB
        for _ in range(mib):
            f.write(block)
        f.write(tail.encode())


def write_deep(path: Path, depth: int) -> None:
    text = json.dumps(kineto_doc()).replace('"args": {', '"args": {"deep": ' + "[" * depth + "]" * depth
                                            + ", ", 1)
    path.write_text(text)


def nsys_long_name(path: Path, mib: int) -> None:
    shutil.copyfile(NSYS, path)
    path.chmod(0o644)
    con = sqlite3.connect(path)
    con.execute("UPDATE StringIds SET value = ? WHERE id = (SELECT demangledName FROM "
                "CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1)", ["a" * (mib * MIB)])
    con.commit()
    con.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "docs" / "benchmarks.md"))
    args = ap.parse_args()
    tk = [sys.executable, "-m", "tracekit", "convert"]
    rows = []
    with tempfile.TemporaryDirectory(prefix="tracekit-limits-") as tmp:
        tmp = Path(tmp)

        def convert(label, src, note="", ref=None):
            out = tmp / f"run{len(rows)}"
            r = measure(tk + [str(src), "-o", str(out)])
            shutil.rmtree(out, ignore_errors=True)
            rows.append((label, src.stat().st_size, r, note, ref))
            return r

        def parse(label, src, note="", ref=None):
            r = measure([sys.executable, "-c", _PARSE, str(src)])
            rows.append((label, src.stat().st_size, r, note, ref))
            return r

        plain = tmp / "plain.json"
        plain.write_bytes(gzip.open(KINETO).read())
        base = convert("Kineto alexnet trace, unmodified (baseline)", plain)
        for mib in (16, 32, 64):
            p = tmp / f"name{mib}.json.gz"
            write_long_name(p, mib, compress=True)
            convert(f"… one kernel named by {mib} MiB of text (.json.gz)", p, "name cut at 1 MiB, warned",
                    ("the baseline", base))
        first = None
        for mib in (16, 32):
            p = tmp / f"name{mib}.json"
            write_long_name(p, mib, compress=False)
            r = parse(f"ijson alone, no limit: {mib} MiB name", p, "the parser before the limit",
                      None if first is None else ("16 MiB", first))
            first = first or r
        first = None
        for depth in (5_000, 10_000):
            p = tmp / f"deep{depth}.json"
            write_deep(p, depth)
            r = parse(f"ijson alone, no limit: args {depth:,} levels deep", p, "the parser before the limit",
                      None if first is None else ("5,000 levels", first))
            first = first or r
        p = tmp / "deep20000.json"
        write_deep(p, 20_000)
        convert("… args nested 20,000 levels deep", p, "refused, exit 2", ("the baseline", base))
        nb = tmp / "nsys.sqlite"
        shutil.copyfile(NSYS, nb)
        nbase = convert("nsys cuda_graph export, unmodified (baseline)", nb)
        nl = tmp / "nsys_long.sqlite"
        nsys_long_name(nl, 64)
        convert("… a 64 MiB kernel name in StringIds", nl, "cut at 1 MiB, warned", ("the baseline", nbase))

    lines = [BEGIN, "## Limits on hostile input (`benchmarks/limits.py`)", "",
             f"Measured {time.strftime('%Y-%m-%d')} on {os.cpu_count()} CPUs (shared machine). "
             "Each row is one process: wall time and its own peak RSS; ratios against the "
             "unmodified input of the same format, in this run. Target: a 64 MiB name and "
             "20,000-deep args under 60 s and under 1 GB (docs/robustness.md). " + versions_line(), "",
             "| input | size | time | peak RSS | exit | ratio | outcome |",
             "|---|---|---|---|---|---|---|"]
    for label, size, r, note, ref in rows:
        ratio = "" if ref is None else (f"{r['wall'] / ref[1]['wall']:.1f}x the time, "
                                        f"{r['rss_mib'] / ref[1]['rss_mib']:.1f}x the RSS of {ref[0]}")
        lines.append(f"| {label} | {size / MIB:,.1f} MiB | {r['wall']:.2f} s | {r['rss_mib']:,.0f} MiB | "
                     f"{r['rc']} | {ratio} | {note} |")
    lines += ["", END]
    section = "\n".join(lines)
    print(section)
    out = Path(args.out)
    text = out.read_text() if out.exists() else ""
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + section + text[text.index(END) + len(END):]
    else:
        text = text.rstrip() + "\n\n" + section + "\n"
    out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
