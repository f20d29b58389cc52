"""`tracekit convert` of the same export under two sets of package versions, in one run.

    python benchmarks/versions_bench.py --other-python /path/to/venv/bin/python [--repeats 3]

The conversion's time depends on duckdb, pyarrow and the ADBC SQLite driver as much as on
tracekit. This converts the 300-copy H100 export (benchmarks/make_big_export.py) with this
Python (the lock's versions) and with ``--other-python`` (a virtual environment holding other
versions and tracekit installed editable from this checkout), alternating, each ``--repeats``
times, and replaces the section "Conversion by package versions" of docs/benchmarks.md with
the median wall and CPU times, peak RSS and the ratio, each beside the versions it ran with.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import FIXTURE, ROOT, machine, measure  # noqa: E402

BEGIN, END = "<!-- versions:begin -->", "<!-- versions:end -->"
_REPORT = (f"import sys, json; sys.path.insert(0, {str(HERE)!r}); from versions import installed; "
           "print(json.dumps(installed()))")


def _versions(python: str) -> dict:
    out = subprocess.run([python, "-c", _REPORT], capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def _convert(python: str, export: Path, work: Path) -> dict:
    out = work / "run"
    r = measure([python, "-m", "tracekit", "convert", str(export), "-o", str(out), "--force"])
    if r["rc"] != 0:
        raise SystemExit(f"convert under {python} failed: {r['error']}")
    return r


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--other-python", required=True, help="python of the environment to compare")
    ap.add_argument("--copies", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--work", type=Path, default=HERE / "data")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks.md")
    args = ap.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    export = args.work / f"h100x{args.copies}.sqlite"
    if not export.exists():
        from make_big_export import build

        build(FIXTURE, args.copies, export)
    pythons = {"lock": sys.executable, "other": args.other_python}
    vers = {k: _versions(p) for k, p in pythons.items()}
    load0 = os.getloadavg()
    started = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    runs: dict[str, list[dict]] = {"lock": [], "other": []}
    with tempfile.TemporaryDirectory(dir=args.work) as tmp:
        for _ in range(args.repeats):
            for k, p in pythons.items():
                runs[k].append(_convert(p, export, Path(tmp)))
    med = {k: {m: statistics.median(r[m] for r in v) for m in ("seconds", "cpu_s", "rss_mib")}
           for k, v in runs.items()}
    diff = sorted(n for n in vers["lock"] if vers["lock"][n] != vers["other"].get(n))
    lines = [BEGIN, "## Conversion by package versions (`benchmarks/versions_bench.py`)", "",
             f"Measured {started} UTC on {machine()}; load average {load0[0]:.1f} at the start, "
             f"{os.getloadavg()[0]:.1f} at the end. `tracekit convert` of the {args.copies}-copy "
             f"export ({export.stat().st_size / 1e6:.0f} MB), the same commit under two environments, "
             f"alternating, median of {args.repeats}. The environments differ in: "
             + ", ".join(f"{n} {vers['lock'][n]} vs {vers['other'].get(n)}" for n in diff) + ".", "",
             "| environment | time | CPU | peak RSS | time ratio |", "|---|---|---|---|---|"]
    for k in ("lock", "other"):
        label = "requirements/lock.txt" if k == "lock" else "the other versions"
        lines.append(f"| {label} | {med[k]['seconds']:.2f} s | {med[k]['cpu_s']:.2f} s | "
                     f"{med[k]['rss_mib']:,.0f} MiB | {med[k]['seconds'] / med['lock']['seconds']:.2f}x |")
    lines += ["", "Every run: " + "; ".join(
        f"{k} " + ", ".join(f"{r['seconds']:.2f} s" for r in v) for k, v in runs.items()) + ".", END]
    text = args.out.read_text()
    section = "\n".join(lines) + "\n"
    if BEGIN in text:
        text = text[:text.index(BEGIN)] + section + text[text.index(END) + len(END) + 1:]
    else:
        text = text.rstrip("\n") + "\n\n" + section
    args.out.write_text(text)
    print(section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
