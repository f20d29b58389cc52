"""The README's Layout section is true (issue 38 item 6): every path it names exists, every
package and root module (and every module of the query core) is named, and "Where new work goes"
works: a query added as one `.sql` file in `queries/TOPIC/` runs through `tracekit.query.run`
and `tracekit query`, a figure added as a module `tracekit/plots/KIND.py` plus its command in
`tracekit/cli/plot.py` draws through `tracekit plot`."""

from __future__ import annotations

import re
import shutil
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NAME_COLUMN = 26  # the Layout block's names end before this column, descriptions start at it


def _block() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    layout = text[text.index("## Layout"):]
    start = layout.index("```") + 3
    return layout[start:layout.index("```", start)].strip("\n").splitlines()


def _entries():
    """(path a line names, the folder it describes, its description) for every line: names are
    relative to the folder above them by indentation."""
    stack: list[tuple[int, Path]] = []
    for line in _block():
        left, right = line[:NAME_COLUMN], line[NAME_COLUMN:]
        indent = len(left) - len(left.lstrip())
        names = left.split()
        if names:
            while stack and stack[-1][0] >= indent:
                stack.pop()
        base = stack[-1][1] if stack else Path()
        for n in names:
            yield base / n, base, right
        if len(names) == 1 and names[0].endswith("/"):
            stack.append((indent, base / names[0]))
        elif not names:  # a continuation line: same folder as the line before
            yield None, (stack[-1][1] if stack else Path()), right


def test_every_path_the_layout_names_exists():
    missing = []
    for path, folder, description in _entries():
        if path is not None and not (ROOT / path).exists():
            missing.append(str(path))
        here = ROOT / (path if path is not None and str(path).endswith("/") else folder)
        for f in re.findall(r"[\w/]+\.(?:py|sql|csv|md)\b", description):
            if not ((here / f).exists() or any(here.rglob(f)) or (ROOT / f).exists()):
                missing.append(f"{f} (described under {here.relative_to(ROOT)})")
    assert missing == [], f"README's Layout names paths that do not exist: {missing}"


def test_every_package_and_root_module_is_named():
    words = {w.rstrip("/") for line in _block() for w in re.findall(r"[\w./]+", line)}
    base = ROOT / "tracekit"
    want = [p for p in base.iterdir() if p.name not in ("__init__.py", "__main__.py", "__pycache__")
            and (p.suffix == ".py" or (p / "__init__.py").exists())]
    want += [p for p in (base / "query").glob("*.py") if p.name != "__init__.py"]  # the core
    unnamed = sorted(str(p.relative_to(ROOT)) for p in want if p.name not in words and p.stem not in words)
    assert unnamed == [], f"README's Layout does not name: {unnamed}"


@pytest.fixture
def queries_copy(tmp_path, monkeypatch):
    """A copy of queries/ that tracekit reads instead of its own (a new file goes in it)."""
    from tracekit.query import named_queries

    copy = tmp_path / "queries"
    shutil.copytree(ROOT / "queries", copy, ignore=shutil.ignore_patterns("__pycache__"))
    real = named_queries.resources.files
    monkeypatch.setattr(named_queries.resources, "files",
                        lambda pkg: copy if pkg == "tracekit.queries" else real(pkg))
    monkeypatch.setattr(named_queries, "_CACHE", None)
    monkeypatch.setattr(named_queries, "_ONE", {})
    yield copy
    named_queries._CACHE = None  # noqa: SLF001 - the real queries again


def test_a_new_named_query_is_one_sql_file(queries_copy, run_factory, capsys):
    from tracekit.cli import run as cli
    from tracekit.query import run

    (queries_copy / "demo").mkdir()
    (queries_copy / "demo" / "demo_kernel_time.sql").write_text(textwrap.dedent("""\
        -- demo_kernel_time: GPU time of all kernels per run.
        -- @include core
        --
        -- The sum of kernel durations, and of the GPU busy time (tk_gpu_activity()).
        --
        -- @column run_id    id     Run folder the row comes from.
        -- @column total_ns  ns     Sum of kernel durations.
        -- @key total_ns
        SELECT run_id, sum(duration_ns) AS total_ns FROM kernels
        WHERE EXISTS (SELECT 1 FROM tk_gpu_activity()) GROUP BY run_id
        """), encoding="utf-8")
    r = run_factory({"kernels": {"name": ["a", "b", "a"], "start_ns": [0, 10, 30],
                                 "end_ns": [5, 20, 31], "duration_ns": [5, 10, 1], "device_id": [0, 0, 0],
                                 "stream_id": [7, 7, 7], "pid": [1, 1, 1]}}, name="demo")
    result = run("demo_kernel_time", [r])
    assert result.table.to_pylist() == [{"run_id": "demo", "total_ns": 16}]
    assert result.units["total_ns"] == ("ns", "Sum of kernel durations.")
    assert cli(["queries"]) == 0 and "demo_kernel_time" in capsys.readouterr().out
    assert cli(["query", "demo_kernel_time", str(r), "-f", "csv"]) == 0
    assert capsys.readouterr().out.splitlines() == ['"run_id","total_ns"', '"demo",16']


def test_a_new_figure_is_a_plots_module_and_a_command(tmp_path, monkeypatch, run_factory, capsys):
    import tracekit.plots
    from tracekit.cli import run as cli
    from tracekit.cli.plot import plot_app

    pkg = tmp_path / "more_plots"
    pkg.mkdir()
    (pkg / "demo_figure.py").write_text(textwrap.dedent('''\
        from tracekit.plots import style
        from tracekit.query import Session

        def plot_demo_figure(run_dirs, output):
            with Session(run_dirs) as s:
                rows = s.query("kernel_summary").to_pylist()
            plt = style.pyplot()
            fig, ax = plt.subplots()
            ax.bar([style.short(r["name"]) for r in rows], [r["total_ns"] for r in rows])
            return {"kernels": len(rows), "file": style.save(fig, output)}
        '''), encoding="utf-8")
    monkeypatch.setattr(tracekit.plots, "__path__", [*tracekit.plots.__path__, str(pkg)])

    @plot_app.command("demo-figure")
    def demo_figure(run_dirs: list[Path], output: Path):
        from tracekit.plots.demo_figure import plot_demo_figure

        print(plot_demo_figure(run_dirs, output)["kernels"])

    try:
        r = run_factory({"kernels": {"name": ["gemm", "relu"], "start_ns": [0, 10],
                                     "end_ns": [5, 12], "duration_ns": [5, 2]}})
        out = tmp_path / "demo.png"
        assert cli(["plot", "demo-figure", str(r), str(out)]) == 0
        assert capsys.readouterr().out.strip() == "2"
        assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    finally:
        plot_app.registered_commands.pop()
