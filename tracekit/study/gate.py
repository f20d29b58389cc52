"""``tracekit compare --fail-if-slower PCT``: the regression gate.

The gated metric is the mean step time (``step_ns``: ``step_summary.wall_ns`` over measured steps)
when both runs have steps, else the whole-run GPU busy time (``gpu_busy_run_ns``:
``gpu_utilization`` scope 'run' busy_ns summed over GPUs). Run B fails the gate when that metric
is more than PCT percent above run A's: change = (B - A) / A x 100 > PCT.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from tracekit.errors import InputError

EXIT_SLOWER = 3
"""Exit status of ``tracekit compare`` when B is slower than the gate allows."""


@dataclass(frozen=True)
class GateResult:
    metric: str
    a: float
    b: float
    change_pct: float
    limit_pct: float
    grew: dict | None = None  # the scaling-loss row of the part that grew most (compare's loss)

    @property
    def slower(self) -> bool:
        return self.change_pct > self.limit_pct

    def message(self) -> str:
        what = {"step_ns": "mean step time", "gpu_busy_run_ns": "GPU busy time (no steps)"}[self.metric]
        c = self.change_pct
        how = (f"b is {c:.2f}% slower" if c > 0 else f"b is {-c:.2f}% faster" if c < 0
               else "b takes the same time")
        verdict = (f"fails: more than {self.limit_pct:g}% slower" if self.slower
                   else f"passes (limit: {self.limit_pct:g}% slower)")
        text = f"{self.metric} ({what}): a {_ms(self.a)}, b {_ms(self.b)}: {how}; {verdict}"
        if self.grew is not None:
            g = self.grew
            share = f", {100 * g['share']:.1f} % of the difference" if g.get("share") is not None else ""
            text += f"; the part that grew most: {g['part']} +{_ms(g['ns'])} per step{share}"
        return text


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.3f} ms"


def gate(metrics: pd.DataFrame, limit_pct: float, loss: list[dict] | None = None) -> GateResult:
    """The gate over ``compare_runs(...)["metrics"]``; ``loss``: its scaling-loss rows, whose
    part that grew most the message names. :class:`InputError` for a negative limit
    or when neither metric is known for both runs (nothing to compare)."""
    if limit_pct < 0:
        raise InputError(f"--fail-if-slower must be at least 0 (a percentage), got {limit_pct:g}")
    rows = metrics.set_index("metric")
    for name in ("step_ns", "gpu_busy_run_ns"):
        if name in rows.index:
            a, b = rows.at[name, "a"], rows.at[name, "b"]
            if pd.notna(a) and pd.notna(b) and a > 0:
                from tracekit.study.scaling_loss import grew_most

                return GateResult(name, float(a), float(b), 100.0 * (b - a) / a, limit_pct,
                                  grew_most(loss or []))
    raise InputError("--fail-if-slower: the two runs do not both have steps or GPU busy time "
                     "(traces of the CPU only, without steps); nothing to gate on")
