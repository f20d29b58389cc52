"""The shape of the tree (issue 13): one package per input format under collectors/, every SQL
file under queries/, no module (Python or SQL) over 600 lines outside tests/. These checks fail as soon as a
change breaks the shape, so it holds as the code grows."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 600
FORMATS = ("kineto", "memsnapshot", "mllog", "ncu", "nsys")


def _tracked() -> list[Path]:
    """Files git tracks (or would: untracked but not ignored), so build outputs don't count."""
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / line for line in out.splitlines() if line and (ROOT / line).is_file()]


def test_sql_files_live_under_queries():
    stray = [str(p.relative_to(ROOT)) for p in _tracked()
             if p.suffix == ".sql" and p.relative_to(ROOT).parts[0] != "queries"]
    assert stray == [], f".sql files outside queries/: {stray}"


def test_no_module_over_600_lines():
    long = {}
    for p in _tracked():
        rel = p.relative_to(ROOT)
        if p.suffix in (".py", ".sql") and rel.parts[0] != "tests":
            n = len(p.read_text(encoding="utf-8").splitlines())
            if n > MAX_LINES:
                long[str(rel)] = n
    assert long == {}, f"modules over {MAX_LINES} lines (split them along their seams): {long}"


def test_collectors_one_package_per_format():
    entries = {p.name for p in (ROOT / "collectors").iterdir() if p.name != "__pycache__"}
    assert entries == {"__init__.py", "common.py", *FORMATS}, entries
    for fmt in FORMATS:
        assert (ROOT / "collectors" / fmt / "__init__.py").is_file(), fmt
    from tracekit.collectors import REGISTRY, collector_modules

    assert sorted(REGISTRY) == sorted(FORMATS)
    for mod in collector_modules():  # the collector interface, unchanged by the move
        assert mod.NAME in FORMATS and callable(mod.sniff) and callable(mod.collect)


def test_packages_are_declared_for_installation():
    """Every package folder of the tree is in pyproject.toml's packages list (else a wheel
    install would lack it although the editable install works)."""
    import tomllib

    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    declared = set(cfg["tool"]["setuptools"]["packages"])
    dirs = cfg["tool"]["setuptools"]["package-dir"]
    found = set()
    for top, base in (("tracekit", "tracekit"), ("tracekit.collectors", "collectors"),
                      ("tracekit.queries", "queries")):
        for init in (ROOT / base).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / base).parts
            found.add(".".join((top, *rel)))
    assert dirs["tracekit.collectors"] == "collectors" and dirs["tracekit.queries"] == "queries"
    assert found - declared == set(), f"packages missing from pyproject.toml: {found - declared}"


def test_readme_layout_matches_tree():
    """README's Layout section names every top-level folder and every entry of collectors/."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    layout = text[text.index("## Layout"):]
    layout = layout[:layout.index("```", layout.index("```") + 3)]
    words = set(layout.split())
    for top in ("tracekit/", "collectors/", "queries/", "tests/", "examples/", "benchmarks/", "docs/"):
        assert top in words, f"README's Layout section does not name {top}"
    for p in (ROOT / "collectors").iterdir():
        if p.name not in ("__init__.py", "__pycache__"):
            name = p.name + ("/" if p.is_dir() else "")
            assert name in words, f"README's Layout section does not name collectors/{name}"
    for part in ("roofline/_macros.sql", "data/"):
        assert part in words and (ROOT / "queries" / part).exists(), part


def test_no_test_module_imports_another():
    """Shared test code lives in tests/helpers/ (issue 38): a test module importing another runs
    that module's tests' imports and fixtures and ties the two together."""
    import ast

    found = []
    for p in sorted((ROOT / "tests").glob("test_*.py")):
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            found += [f"{p.name} imports {n}" for n in names if n.split(".")[0].startswith("test_")]
    assert found == []


# A module that only re-exports another module's names under an old name; the one left has a
# caller another developer owns (tracekit/cli/whatif.py imports scheduler_address from it).
KNOWN_SHIMS: set[str] = set()


def test_no_module_is_a_re_export_shim():
    """Issue 38: a module moved is moved, its callers switched; a module whose only statements
    are imports of another project module (a package's __init__ aside) is an old name kept alive."""
    import ast

    shims = set()
    for base in (ROOT / "tracekit", ROOT / "collectors"):
        for p in sorted(base.rglob("*.py")):
            if p.name == "__init__.py":
                continue
            body = ast.parse(p.read_text(encoding="utf-8")).body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                body = body[1:]  # the docstring
            body = [n for n in body if not (isinstance(n, ast.ImportFrom) and n.module == "__future__")]
            if body and all(isinstance(n, ast.ImportFrom) and (n.module or "").startswith("tracekit")
                            for n in body):
                shims.add(str(p.relative_to(ROOT)))
    assert shims == KNOWN_SHIMS, f"re-export shims (switch their callers and remove them): {shims - KNOWN_SHIMS}"
