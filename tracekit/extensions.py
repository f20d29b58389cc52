"""The query core's extensions that tracekit ships: the entry list of :mod:`tracekit.query.hooks`.

The query core loads this module by name on first use (:data:`tracekit.query.hooks.ENTRY_MODULE`),
as a plugin system loads its entry points, so the engine never imports the packages built on it.
It sits at the top of the import layers: it may import any of them. A new extension is one
:func:`~tracekit.query.hooks.register` call here (docs/development.md, "The query core's
extension point").
"""

from __future__ import annotations

from tracekit import roofline
from tracekit.query.hooks import Extension, register


def _critical_path(engine, con) -> None:
    """The replay's critical path as the table tk_critical_path (docs/whatif.md); imported here,
    on first use, because the replay's modules take 0.1 s to import."""
    from tracekit.whatif.critical import register as critical_register

    critical_register(engine)


# roofline: gpu_peaks, gpu_aliases, tensor_factors, kernel_name_tags, tk_ncu_spec and the macros of
# queries/roofline/_macros.sql (docs/roofline.md)
register(Extension("roofline", roofline.provides(), roofline.reads(), roofline.prepare))

# the critical path of every step, computed by replaying the runs' dependency graph, whose nodes
# and edges the macros of queries/whatif/_macros.sql build: a query over it reads what they read
register(Extension(
    "critical_path", frozenset({"tk_critical_path"}),
    frozenset({"tk_wi_nodes", "tk_wi_launch_edges", "tk_wi_sync_edges", "tk_wi_event_edges",
               "tk_wi_collectives", "tk_wi_step_nodes", "tk_wi_ranks"}),
    _critical_path, in_full=False, steps=True))
