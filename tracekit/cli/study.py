"""``tracekit study RUN_DIR... -o STUDY_DIR`` and ``tracekit compare RUN_A RUN_B``."""

from __future__ import annotations

from pathlib import Path

import typer

from tracekit.cli.app import QUIET, app, set_quiet
from tracekit.cli.options import STEP_PATTERN
from tracekit.cli.output import Format


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
    """Cross-run study: scaling, precision, host CPU, compute vs memory, communication.

    Scaling efficiency, mixed precision, host CPU, compute against memory traffic and
    communication across runs; one self-contained HTML report plus CSV and Parquet tables (see
    docs/study.md).
    """
    from tracekit.cli.messages import info
    from tracekit.study import build_study

    st, out = build_study(run_dirs, output, override=override, force=force, title=title, pool=pool,
                          step_pattern=step_pattern)
    rows = ", ".join(f"{n} {len(t)}" for n, t in st.tables.items())
    info(f"wrote {out / 'report.html'} ({len(st.runs)} runs; rows: {rows})")
    if st.findings:
        from tracekit.cli.termtable import terminal_width, wrap

        info("why scaling loses (scaling_loss.csv; docs/study.md):")
        for i, f in enumerate(st.findings, start=1):
            for line in wrap(f"{i}. {f['text']}: `{f['query']}`", terminal_width() - 3):
                info("   " + line)


@app.command()
def compare(
    run_a: Path = typer.Argument(..., help="Baseline run folder."),
    run_b: Path = typer.Argument(..., help="Run folder compared with it."),
    threshold: float = typer.Option(0.05, "--threshold", help="A kernel is slower/faster when its "
                                    "mean time per launch changed by more than this fraction of "
                                    "A's, else more/fewer launches when its launches per step did."),
    top: int = typer.Option(20, "--top", help="Kernels to show on the terminal (0 = all)."),
    fmt: Format = typer.Option(Format.table, "-f", "--format", help="table, csv, json or parquet."),
    output: Path = typer.Option(None, "-o", "--output", help="Write the output here instead of "
                                "stdout: the metrics and the kernels, one file."),
    fail_if_slower: float = typer.Option(None, "--fail-if-slower", metavar="PCT",
                                         help="Regression gate: exit 3 when B's mean step time "
                                         "(GPU busy time without steps) is more than PCT percent "
                                         "above A's; the verdict goes to stderr."),
    step_pattern: str = STEP_PATTERN,
    quiet: bool = QUIET,
):
    """Compare two runs: step time, per-kernel time, GPU idle time, overlap and copies per kind.

    Kernels are matched by name and classed new, missing, slower, faster or same. On the terminal
    values show in readable units; -f csv/json write the metrics and the kernels to stdout as one
    document, -o FILE that document in FILE (parquet: one long table). --fail-if-slower makes it a
    regression gate (exit 3).
    """
    from tracekit.cli.compare_output import write_compare

    set_quiet(quiet)
    from tracekit.outfile import check_output
    from tracekit.study import compare_runs

    if output is not None and str(output) == "-":
        output = None  # stdout: the kernel table, as without -o
    if output is not None:
        check_output(output, [run_a, run_b])
    res = compare_runs(run_a, run_b, threshold=threshold, step_pattern=step_pattern)
    verdict = None
    if fail_if_slower is not None:
        from tracekit.study.gate import gate

        verdict = gate(res["metrics"], fail_if_slower, res.get("loss"))
    write_compare(res, fmt, output, top=top, threshold=threshold, protect=[run_a, run_b])
    return _gate_exit(verdict)


def _gate_exit(verdict):
    """Print the --fail-if-slower verdict on stderr; exit 3 when B is too slow."""
    if verdict is None:
        return None
    from tracekit.cli.messages import info
    from tracekit.study.gate import EXIT_SLOWER

    info(f"tracekit compare: {verdict.message()}")
    if verdict.slower:
        raise typer.Exit(EXIT_SLOWER)
    return None
