"""The import graph of the product (tracekit/ and collectors/, benchmarks and tests aside), read
from the source with :mod:`ast` (imports inside functions count): no cycle, imports run one way
down the layers (at most :data:`MAX_UPWARD` running back up), no module imports another module's
``_private`` names, no function over :data:`MAX_FUNCTION_LINES` lines and no module over
:data:`MAX_MODULE_LINES` (save :data:`KNOWN_LONG`). Issue 23."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = {"tracekit": ROOT / "tracekit", "tracekit.collectors": ROOT / "collectors"}

# Layers, top to bottom: a module may import from its own layer and the layers below. The most
# specific prefix decides (tracekit.schema.docs generates docs from the collectors' interface).
LAYERS = {
    "tracekit.cli": 5, "tracekit.__main__": 5, "tracekit.extensions": 5,
    "tracekit.collect": 4, "tracekit.study": 4, "tracekit.plots": 4, "tracekit.timeline": 4,
    "tracekit.workloads": 4, "tracekit.whatif": 3,
    "tracekit.convert": 3, "tracekit.workers": 3, "tracekit.query": 3, "tracekit.roofline": 3,
    "tracekit.outfile": 3, "tracekit.schema.docs": 3,
    "tracekit.collectors": 2,
    "tracekit.runfolder": 1, "tracekit.schema": 1, "tracekit.duck": 1, "tracekit.progress": 1,
    "tracekit.suggest": 1, "tracekit.labels": 1,
    "tracekit.errors": 0, "tracekit.limits": 0, "tracekit": 0,
}
NAMES = {5: "CLI", 4: "commands", 3: "library", 2: "collectors", 1: "schema and run folders",
         0: "errors"}
MAX_UPWARD = 0
MAX_FUNCTION_LINES = 100
MAX_MODULE_LINES = 500
# modules and functions allowed past the limits: none (the Kineto collector's 220-line event
# loop became collectors/kineto/events.py, one method per event category)
KNOWN_LONG: set[str] = set()


def _modules() -> dict[str, Path]:
    out = {}
    for top, base in SOURCES.items():
        for p in base.rglob("*.py"):
            rel = p.relative_to(base).with_suffix("").parts
            if rel[-1] == "__init__":
                rel = rel[:-1]
            name = ".".join((top, *rel))
            if top == "tracekit" and rel[:1] == ("collectors",):
                continue
            out[name] = p
    return out


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The project module ``name`` is, or the closest package above it."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(mod: str, path: Path):
    """(imported module, names imported from it) of every import in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if (target := _resolve(a.name)) is not None:
                    yield target, []
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[:len(parts) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            for a in node.names:
                full = f"{base}.{a.name}"
                if full in MODULES:  # from package import submodule
                    yield full, []
                elif (target := _resolve(base)) is not None:
                    yield target, [a.name]


def _graph() -> dict[str, dict[str, list[str]]]:
    graph: dict[str, dict[str, list[str]]] = {}
    for mod, path in MODULES.items():
        edges = graph.setdefault(mod, {})
        for target, names in _imports(mod, path):
            if target != mod:
                edges.setdefault(target, []).extend(names)
    return graph


def _layer(mod: str) -> int:
    best = max((p for p in LAYERS if mod == p or mod.startswith(p + ".")), key=len)
    return LAYERS[best]


def _cycles(graph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _is_ancestor(pkg: str, mod: str) -> bool:
    return mod.startswith(pkg + ".")


def test_every_module_has_a_layer():
    """A new top-level module or package is given its layer in :data:`LAYERS` (one line)."""
    missing = sorted(m for m in MODULES if m != "tracekit" and max(
        (p for p in LAYERS if m == p or m.startswith(p + ".")), key=len) == "tracekit")
    assert missing == [], f"modules with no layer in tests/test_imports.py LAYERS: {missing}"


def test_no_import_cycle():
    graph = _graph()
    # a package's __init__ importing its own submodules is how a package presents its names; a
    # submodule importing its package's __init__ is the cycle that matters
    pruned = {m: {t: n for t, n in e.items() if not _is_ancestor(m, t)} for m, e in graph.items()}
    assert _cycles(pruned) == []


def test_imports_run_down_the_layers():
    upward = sorted(f"{m} ({NAMES[_layer(m)]}) imports {t} ({NAMES[_layer(t)]})"
                    for m, e in _graph().items() for t in e if _layer(t) > _layer(m))
    assert len(upward) <= MAX_UPWARD, "imports running back up the layers:\n" + "\n".join(upward)


def test_no_private_imports_across_modules():
    found = sorted(f"{m} imports {t}.{n}" for m, e in _graph().items() for t, names in e.items()
                   for n in names if n.startswith("_") and not n.startswith("__"))
    assert found == [], "imports of another module's private names:\n" + "\n".join(found)


def test_no_function_over_100_lines():
    long = []
    for mod, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES and f"{mod}.{node.name}" not in KNOWN_LONG:
                    long.append(f"{mod}.{node.name}: {n} lines")
    assert long == [], f"functions over {MAX_FUNCTION_LINES} lines:\n" + "\n".join(long)


def test_no_module_over_500_lines():
    long = [f"{mod}: {n} lines" for mod, path in MODULES.items()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
            and mod not in KNOWN_LONG]
    assert long == [], f"modules over {MAX_MODULE_LINES} lines:\n" + "\n".join(long)


def test_known_long_units_still_exist():
    """The exemptions above name real units (remove them once split)."""
    funcs = {f"{mod}.{n.name}" for mod, path in MODULES.items()
             for n in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    assert KNOWN_LONG <= funcs | set(MODULES)


def _package(mod: str) -> str:
    """The top-level package (or root module) of ``mod``: tracekit.query.engine -> tracekit.query."""
    parts = mod.split(".")
    return ".".join(parts[:3]) if parts[:2] == ["tracekit", "collectors"] else ".".join(parts[:2])


# packages that still import each other: none (issue 38; plots/study.py reads a Study's tables
# without importing study/)
KNOWN_PACKAGE_CYCLES: list[list[str]] = []


def test_no_package_imports_back_into_one_that_imports_it():
    """Issue 38: the query core is closed (query/ imports neither whatif/ nor roofline/: they
    plug in through tracekit.query.hooks); no two packages import each other."""
    packages: dict[str, dict[str, list[str]]] = {}
    for m, e in _graph().items():
        for t in e:
            if _package(t) != _package(m):
                packages.setdefault(_package(m), {}).setdefault(_package(t), [])
    assert [c for c in _cycles(packages) if c not in KNOWN_PACKAGE_CYCLES] == []


def test_benchmarks_keep_the_rules():
    """benchmarks/ too (issue 38): no function over 100 lines, no cycle between its scripts
    (run.py and multi.py share benchmarks/common.py, neither imports the other)."""
    bench = ROOT / "benchmarks"
    scripts = {p.stem: p for p in bench.glob("*.py")}
    graph: dict[str, dict[str, list[str]]] = {}
    long = []
    for name, p in scripts.items():
        tree = ast.parse(p.read_text(encoding="utf-8"))
        edges = graph.setdefault(name, {})
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module in scripts and node.module != name:
                edges.setdefault(node.module, [])
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name in scripts and a.name != name:
                        edges.setdefault(a.name, [])
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES:
                    long.append(f"benchmarks/{p.name}: {node.name}")
    assert long == [] and _cycles(graph) == []

