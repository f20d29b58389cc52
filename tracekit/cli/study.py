"""``tracekit study RUN_DIR... -o STUDY_DIR`` and ``tracekit compare RUN_A RUN_B``."""

from __future__ import annotations

from pathlib import Path

import typer

from tracekit.cli.app import app
from tracekit.cli.output import Format, render
from tracekit.cli.query import STEP_PATTERN


@app.command()
def study(
    run_dirs: list[Path] = typer.Argument(..., help="Run folders (from `tracekit collect` or "
                                          "`tracekit convert`; keys a manifest lacks are inferred "
                                          "from the trace or given by --override)."),
    output: Path = typer.Option(..., "-o", "--output", help="Study folder to write (report.html, "
                                "TABLE.csv, TABLE.parquet, study.json)."),
    override: Path = typer.Option(None, "--override", help="TOML or YAML file giving workload, "
                                  "suite, precision, world_size, batch_size, interconnect or pass "
                                  "per run (table runs.RUN_ID) or for all (table defaults); see "
                                  "docs/study.md."),
    title: str = typer.Option("tracekit study", "--title", help="Report title."),
    force: bool = typer.Option(False, "--force", help="Replace an existing study folder."),
    pool: bool = typer.Option(False, "--pool", help="Average runs whose keys (workload, precision, "
                              "world size, interconnect, batch) are equal into one point; by "
                              "default every run is its own point."),
    step_pattern: str = STEP_PATTERN,
):
    """Cross-run study: scaling efficiency, mixed precision, host CPU, compute against memory
    traffic, communication; one self-contained HTML report plus CSV and Parquet tables
    (see docs/study.md)."""
    from rich.console import Console

    from tracekit.study import build_study

    st, out = build_study(run_dirs, output, override=override, force=force, title=title, pool=pool,
                          step_pattern=step_pattern)
    rows = ", ".join(f"{n} {len(t)}" for n, t in st.tables.items())
    Console(stderr=True, highlight=False).print(
        f"wrote {out / 'report.html'} ({len(st.runs)} runs; rows: {rows})")


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
    fail_if_slower: float = typer.Option(None, "--fail-if-slower", metavar="PCT",
                                         help="Regression gate: exit 3 when B's mean step time "
                                         "(GPU busy time without steps) is more than PCT percent "
                                         "above A's; the verdict goes to stderr."),
    step_pattern: str = STEP_PATTERN,
):
    """Compare two runs: step time, per-kernel time (new, missing, slower, faster kernels, matched
    by name), GPU idle time, overlap and copies per kind; --fail-if-slower makes it a gate."""
    import pyarrow as pa
    from rich.console import Console

    from tracekit.study import compare_runs

    res = compare_runs(run_a, run_b, threshold=threshold, step_pattern=step_pattern)
    verdict = None
    if fail_if_slower is not None:
        from tracekit.study.gate import gate

        verdict = gate(res["metrics"], fail_if_slower)
    metrics = pa.Table.from_pandas(res["metrics"], preserve_index=False)
    kernels = pa.Table.from_pandas(res["kernels"], preserve_index=False)
    c = res["kernel_counts"]
    summary = (f"{res['a']} -> {res['b']}: kernels {c['new']} new, {c['missing']} missing, "
               f"{c['slower']} slower, {c['faster']} faster, {c['same']} same "
               f"(threshold {threshold:g})")
    if output is not None:
        mpath = output.with_name(f"{output.stem}.metrics{output.suffix}")
        render(kernels, fmt, output)
        render(metrics, fmt, mpath)
        Console(stderr=True, highlight=False).print(f"{summary}; wrote {output} and {mpath}")
        return _gate_exit(verdict)
    if fmt == Format.table:
        render(metrics, fmt, None, title=f"{res['a']} (a) -> {res['b']} (b)")
        shown = kernels if top == 0 else kernels.slice(0, top)
        render(shown, fmt, None, title=f"kernels by |delta_ns| ({len(shown)} of {len(kernels)})")
        Console(stderr=True, highlight=False).print(summary)
    else:
        render(kernels, fmt, None)
    return _gate_exit(verdict)


def _gate_exit(verdict):
    """Print the --fail-if-slower verdict on stderr; exit 3 when B is too slow."""
    if verdict is None:
        return None
    import sys

    from tracekit.study.gate import EXIT_SLOWER

    print(f"tracekit compare: {verdict.message()}", file=sys.stderr)
    if verdict.slower:
        raise typer.Exit(EXIT_SLOWER)
    return None
