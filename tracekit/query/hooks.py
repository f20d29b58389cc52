"""The query core's one extension point: names a statement may use that are not run-folder tables
or ``queries/`` macros, created on an engine's connection by whoever provides them.

In the spirit of sqlite-utils' ``prepare_connection`` plugin hook: an :class:`Extension` says which
names it provides (tables, views, macros), which names it reads in turn (so the engine creates
those first, and :func:`tracekit.query.catalog.tables_read` can tell which run-folder tables a
statement depends on through it), and a ``prepare(engine, con)`` function that creates its
names on the engine's DuckDB connection ``con``. The engine calls ``prepare`` once per engine,
when a statement first names one of the provided names (and, for ``in_full`` extensions, when
:attr:`Engine.con` is asked for everything). The engine and the catalog have no special case for any of them.

Extensions are registered with :func:`register`. The ones tracekit ships are listed in one entry
module at the top of the import layers, :data:`ENTRY_MODULE` (``tracekit/extensions.py``: the
roofline tables, the critical path), loaded on first use by name, the way a plugin system loads
its entry points: the query core never imports the packages that build on it.

The filters (``--step``/``--window``/``--rank``/``--device``/``--nvtx``,
:mod:`tracekit.query.filters`) are not an extension, on purpose: they provide no name a statement
uses but narrow the core's own table views, from tables computed on the same connection while
those views are still unfiltered (then dropped and made again narrowed; the kept steps likewise,
when a statement first calls ``tk_steps()``). As an extension they would need three more hooks
(on open, on each view, before the steps) that only they use, and the engine's view cache
opened up to them; they stay inside the query core, in one module the engine calls.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

ENTRY_MODULE = "tracekit.extensions"


@dataclass(frozen=True)
class Extension:
    """Names the query core does not create itself, and how to create them.

    ``name``: a short identifier (``roofline``, ``critical_path``); ``provides``: the names
    (lower case) statements may use; ``reads``: the names of the core (tables, run views,
    macros) the provided names read, created before ``prepare`` runs; ``prepare(engine, con)``:
    creates the provided names on ``con``, the engine's connection as it is (``engine.con``
    would create every name first) (:class:`~tracekit.errors.QueryError` on failure);
    ``in_full``: also created by :attr:`Engine.con` (False for costly ones: the critical path
    replays the whole run); ``steps``: needs the run's steps (a filtered engine computes
    its kept steps first)."""

    name: str
    provides: frozenset[str]
    reads: frozenset[str]
    prepare: Callable[[object, object], None]
    in_full: bool = True
    steps: bool = False

    @property
    def marker(self) -> str:
        """The entry of :func:`tracekit.query.catalog.needed`'s result that stands for this
        extension (never a SQL name)."""
        return f"<{self.name}>"


_REGISTRY: dict[str, Extension] = {}
_BY_NAME: dict[str, Extension] = {}  # provided name -> extension, rebuilt after register()
_LOADED = False


def register(ext: Extension) -> None:
    """Add ``ext`` (replacing an extension of the same name)."""
    _REGISTRY[ext.name] = ext
    _BY_NAME.clear()


def extensions() -> list[Extension]:
    """Every registered extension (the entry module is loaded on the first call)."""
    global _LOADED
    if not _LOADED:
        _LOADED = True
        importlib.import_module(ENTRY_MODULE)
    return list(_REGISTRY.values())


def provider(name: str) -> Extension | None:
    """The extension that provides ``name`` (lower case), or None."""
    if not _BY_NAME:
        _BY_NAME.update({n: e for e in extensions() for n in e.provides})
    return _BY_NAME.get(name)


def by_marker(marker: str) -> Extension | None:
    """The extension whose :attr:`Extension.marker` is ``marker``, or None."""
    return next((e for e in extensions() if e.marker == marker), None)


def unregister(name: str) -> None:
    """Remove the extension called ``name`` (none: nothing happens)."""
    _REGISTRY.pop(name, None)
    _BY_NAME.clear()
