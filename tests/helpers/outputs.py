"""The outputs a refactoring must keep byte for byte (issue 38, "outputs are byte-identical before
and after on the shared fixtures"), as SHA-256 digests: every named query's CSV (as ``tracekit
query -f csv`` writes it) on the fixture runs of :data:`QUERY_RUNS`, ``tracekit whatif``'s CSV
under the scenarios of :data:`WHATIF`, and ``tracekit study``'s tables (its CSV files and
study.json, run folder paths replaced by run ids) over :data:`STUDY`.

``tests/data/output_digests.json`` holds the digests of the tree that wrote it, with the DuckDB
and pyarrow versions they were computed with; ``tests/test_output_identity.py`` computes them
again from the session's run folders and compares. After a change that is meant to change an
output, write them anew (and say which changed, and why, in the commit)::

    .venv/bin/python tests/helpers/outputs.py --write
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DIGESTS = ROOT / "tests" / "data" / "output_digests.json"
FIXTURES = ROOT.parent / "shared" / "fixtures"
WRITE_COMMAND = ".venv/bin/python tests/helpers/outputs.py --write"

# fixture stem -> its folder under the fixtures (the runs conftest's nsys_run / kineto_run convert)
SOURCES = {"nsys2026_h100_2gpu_pytorch_slice": "nsys", "kineto_h100_timesformer_infer": "kineto",
           "kineto_cpu_only_rank": "kineto", "kineto_a100_alexnet": "kineto"}
# every named query on these (conftest's SHARED_RESULTS: their results are kept for the session)
QUERY_RUNS = ("nsys2026_h100_2gpu_pytorch_slice", "kineto_h100_timesformer_infer", "kineto_cpu_only_rank")
# tracekit whatif RUN -s ... (a GPU run with NCCL-free steps, a GPU inference step, a CPU rank)
WHATIF = {
    "kineto_a100_alexnet": ("baseline", "launch=0", "kernels:gemm=0.5+host=0.5", "comm=0.5"),
    "kineto_h100_timesformer_infer": ("baseline", "launch=0", "host=0.5", "kernels:gemm|attn=0.5"),
    "kineto_cpu_only_rank": ("baseline", "ops:aten::.*=0.5", "host=2"),
}
STUDY = ("kineto_a100_alexnet", "kineto_h100_timesformer_infer", "kineto_cpu_only_rank")


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def every_query(run: Path) -> dict:
    """{query name: (Arrow table, params)} of every named query on ``run`` with its default
    parameters, in one session; a query the run refuses (QueryError: the roofline of a run
    naming no GPU) is run with ``ceilings=none``, and its params say so."""
    from tracekit.errors import QueryError
    from tracekit.query import Session, all_queries

    out = {}
    with Session([run], explain=False) as s:
        for name in all_queries():
            try:
                out[name] = (s.query(name), {})
            except QueryError:
                out[name] = (s.query(name, {"ceilings": "none"}), {"ceilings": "none"})
    return out


def query_digests(stem: str, results: dict) -> dict[str, str]:
    """``query/STEM/NAME.csv`` -> digest, of ``results`` (:func:`every_query`'s)."""
    from tracekit.cli.serialize import csv_bytes

    return {f"query/{stem}/{name}.csv": digest(csv_bytes(table)) for name, (table, _) in results.items()}


def whatif_digests(stem: str, run: Path) -> dict[str, str]:
    """``whatif/STEM.csv`` -> digest of ``tracekit whatif RUN -s ... -f csv``'s rows."""
    from tracekit.cli.serialize import csv_bytes
    from tracekit.query import Session
    from tracekit.whatif import whatif
    from tracekit.whatif.scenarios import parse_all

    with Session([run]) as s:
        table = whatif(s.engine, parse_all(list(WHATIF[stem])))
    return {f"whatif/{stem}.csv": digest(csv_bytes(table))}


def study_digests(runs: list[Path], out: Path) -> dict[str, str]:
    """``study/FILE`` -> digest of each CSV table ``tracekit study RUNS -o OUT`` writes, and of
    its study.json with each run's folder path replaced by its run id."""
    from tracekit.study import build_study

    build_study(runs, out)
    got = {f"study/{p.name}": digest(p.read_bytes()) for p in sorted(out.glob("*.csv"))}
    meta = json.loads((out / "study.json").read_text(encoding="utf-8"))
    for r in meta["runs"]:
        r["path"] = r["run_id"]
    got["study/study.json"] = digest(json.dumps(meta, indent=1).encode())
    return got


def all_digests(run_of, results_of, tmp: Path) -> dict[str, str]:
    """Every digest: ``run_of(stem)`` is the fixture's run folder (named by its stem),
    ``results_of(run)`` :func:`every_query` of it (the test passes conftest's cached
    ``named_results``), ``tmp`` an empty folder for the study."""
    got: dict[str, str] = {}
    for stem in QUERY_RUNS:
        got |= query_digests(stem, results_of(run_of(stem)))
    for stem in WHATIF:
        got |= whatif_digests(stem, run_of(stem))
    got |= study_digests([run_of(s) for s in STUDY], tmp / "study")
    return dict(sorted(got.items()))


def versions() -> dict[str, str]:
    import duckdb
    import pyarrow

    return {"duckdb": duckdb.__version__, "pyarrow": pyarrow.__version__}


def main(argv: list[str]) -> int:
    import tempfile

    from tracekit.convert import convert

    if argv != ["--write"]:
        print(__doc__)
        return 2
    with tempfile.TemporaryDirectory(prefix="tracekit-digests-") as d:
        base = Path(d)
        runs: dict[str, Path] = {}

        def run_of(stem: str) -> Path:
            if stem not in runs:
                src = FIXTURES / SOURCES[stem] / (stem + (".sqlite" if SOURCES[stem] == "nsys" else ".json.gz"))
                runs[stem] = convert([src], base / "runs" / stem)
            return runs[stem]

        got = all_digests(run_of, every_query, base)
    DIGESTS.parent.mkdir(parents=True, exist_ok=True)
    DIGESTS.write_text(json.dumps({"versions": versions(), "digests": got}, indent=1) + "\n",
                       encoding="utf-8")
    print(f"wrote {DIGESTS.relative_to(ROOT)}: {len(got)} outputs")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main(sys.argv[1:]))
