"""``tracekit study RUN_DIR... -o STUDY_DIR`` and ``tracekit compare RUN_A RUN_B``."""

from __future__ import annotations

from pathlib import Path

import typer

from tracekit.cli.app import app
from tracekit.cli.output import Format


@app.command()
def study(
    run_dirs: list[Path] = typer.Argument(..., help="Run folders (from `tracekit collect`, or "
                                          "described by --override)."),
    output: Path = typer.Option(..., "-o", "--output", help="Study folder to write (report.html, "
                                "TABLE.csv, TABLE.parquet, study.json)."),
    override: Path = typer.Option(None, "--override", help="TOML or YAML file giving workload, "
                                  "suite, precision, world_size, batch_size, interconnect or pass "
                                  "per run (table runs.RUN_ID) or for all (table defaults); see "
                                  "docs/study.md."),
    title: str = typer.Option("tracekit study", "--title", help="Report title."),
    force: bool = typer.Option(False, "--force", help="Replace an existing study folder."),
):
    """Cross-run study: scaling, precision, host CPU, compute vs memory, communication.

    Scaling efficiency, mixed precision, host CPU, compute against memory traffic and
    communication across runs; one self-contained HTML report plus CSV and Parquet tables (see
    docs/study.md).
    """
    from tracekit.cli.messages import info
    from tracekit.study import build_study

    st, out = build_study(run_dirs, output, override=override, force=force, title=title)
    rows = ", ".join(f"{n} {len(t)}" for n, t in st.tables.items())
    info(f"wrote {out / 'report.html'} ({len(st.runs)} runs; rows: {rows})")


@app.command()
def compare(
    run_a: Path = typer.Argument(..., help="Baseline run folder."),
    run_b: Path = typer.Argument(..., help="Run folder compared with it."),
    threshold: float = typer.Option(0.05, "--threshold", help="A kernel is slower/faster when its "
                                    "total time changed by more than this fraction of A's."),
    top: int = typer.Option(20, "--top", help="Kernels to show on the terminal (0 = all)."),
    fmt: Format = typer.Option(Format.table, "-f", "--format", help="table, csv, json or parquet."),
    output: Path = typer.Option(None, "-o", "--output", help="Write the kernel table here "
                                "(and the metrics beside it as STEM.metrics.EXT)."),
):
    """Compare two runs: step time, per-kernel time, GPU idle time and overlap.

    Kernels are matched by name and classed new, missing, slower, faster or same. On the terminal
    values show in readable units; -f csv/json write the metrics and the kernels to stdout as one
    document, -o FILE the kernels in FILE and the metrics beside it.
    """
    from tracekit.cli.compare_output import write_compare
    from tracekit.outfile import check_output
    from tracekit.study import compare_runs

    if output is not None and str(output) == "-":
        output = None  # stdout: the kernel table, as without -o
    if output is not None:
        check_output(output, [run_a, run_b])
        mpath = output.with_name(f"{output.stem}.metrics{output.suffix}")
        check_output(mpath, [run_a, run_b])
    res = compare_runs(run_a, run_b, threshold=threshold)
    write_compare(res, fmt, output, top=top, threshold=threshold, protect=[run_a, run_b])
