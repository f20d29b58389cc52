"""tracekit's figures (matplotlib), one module per figure kind, all drawn from named queries so
their numbers are the tables' numbers; :mod:`tracekit.plots.style` holds what they share.

- :mod:`~tracekit.plots.utilization`: GPU busy fraction over time per GPU (``gpu_utilization_timeline``);
- :mod:`~tracekit.plots.kernels`: GPU time by category and top kernels (``gpu_time_breakdown``);
- :mod:`~tracekit.plots.steps`: step time per step and rank, with phases (``step_summary``);
- :mod:`~tracekit.plots.idle`: GPU idle time by cause and gap lengths (``gpu_idle``, ``gpu_idle_gaps``);
- :mod:`~tracekit.plots.roofline`: the hierarchical roofline (``roofline``, ``roofline_ceilings``);
- :mod:`~tracekit.plots.critical_path`: each step's critical path by category and rank
  (``critical_path_summary``; ``tracekit plot critical-path``);
- :mod:`~tracekit.plots.study`: the study report's figures (``tracekit study``).

``tracekit plot KIND RUN... -o FILE.png|.svg`` (:mod:`tracekit.cli.plot`) calls
``tracekit.plots.KIND.plot_KIND``; every function writes the file
atomically, raises :class:`~tracekit.errors.InputError` (one line) when the runs hold nothing to
draw, and :class:`~tracekit.errors.ToolNotFoundError` without matplotlib.
"""

from __future__ import annotations
