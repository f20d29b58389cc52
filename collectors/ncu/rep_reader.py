"""Reading Nsight Compute reports (``.ncu-rep``) with NVIDIA's ``ncu_report`` module.

``ncu_report`` (PyPI package ``ncu-report``) reads reports of any ncu version without a GPU,
including reports newer than a locally installed ncu. Each action (profiled launch) of each range
becomes one launch; every metric of the action one metric row, with its unit as the report
stores it (``ns``, ``byte``, ``hz``, ``byte/s`` ...).
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from pathlib import Path

from tracekit.collectors.ncu.rep_framing import cut_at
from tracekit.errors import InputError, ToolNotFoundError, one_line

MAGIC = b"NVR\x00"


def is_report(path: Path) -> bool:
    """An ncu report: ``.ncu-rep`` suffix or the report file's magic bytes."""
    if path.suffix == ".ncu-rep":
        return True
    try:
        with open(path, "rb") as f:
            return f.read(4) == MAGIC
    except OSError:
        return False


def _module():
    try:
        import ncu_report
    except ImportError:
        raise ToolNotFoundError("reading .ncu-rep needs NVIDIA's ncu_report module: "
                                "pip install 'tracekit[ncu]' (package ncu-report)") from None
    return ncu_report


def _nvtx_path(action) -> str | None:
    state = action.nvtx_state()
    if state is None:
        return None
    parts = []
    for dom_id in state.domains():
        dom = state.domain_by_id(dom_id)
        names = list(dom.push_pop_ranges())
        if not names:
            continue
        dname = dom.name()
        prefix = "" if dname in ("", "<default domain>") else f"{dname}@"
        parts.append(prefix + "/".join(names))
    return "; ".join(parts) or None


def read_report(path: Path) -> tuple[list[dict], dict[str, list]]:
    """Launch rows (dicts of ncu_launches columns, without launch_id) and metric columns
    (``index``: position in the launch list, ``metric_name``, ``unit``, ``number``, ``raw_value``)
    of one report. Raises :class:`InputError` when ncu_report cannot load the file."""
    nr = _module()
    with _native_stderr() as said:  # the native library's log lines are not ours to print
        try:
            report = nr.load_report(str(path))
        except Exception as exc:  # ncu_report raises plain exceptions for bad files
            report, error = None, one_line(exc)
        else:
            error = ""
    logged = said()
    note = (error or (logged[0] if logged else ""))[:200]
    if report is None:
        raise InputError("ncu_report cannot read this report (is it truncated or damaged?)"
                         + (f": {note}" if note else ""), path=path)
    launches, m = _read_loaded(nr, report, path)
    why = cut_at(path)
    if why and not launches:  # ncu_report loads a report cut in its first blocks as zero ranges, without a word
        raise InputError(f"the report is truncated or corrupt: {why} (no kernel launch could be "
                         f"read from its {path.stat().st_size:,} bytes)", path=path)
    if not launches and path.stat().st_size > 4096:
        raise InputError(f"the report holds no complete kernel launch in its {path.stat().st_size:,} "
                         "bytes: is it truncated?" + (f" ({note})" if note else ""), path=path)
    bad = [row["ncu_id"] for row in launches if not row["kernel_name"]]
    if bad:
        raise InputError(f"{len(bad)} launch(es) of the report have no kernel name (the first: "
                         f"launch {bad[0]}): the report is truncated or corrupt"
                         + (f" ({why})" if why else ""), path=path)
    return launches, m


@contextlib.contextmanager
def _native_stderr():
    """Collect what native code writes to file descriptor 2 meanwhile; yields a function that
    returns its non-empty lines."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        lines: list[str] = []
        try:
            yield lambda: lines
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        lines += [ln.strip() for ln in tmp.read(1 << 16).decode("utf-8", "replace").splitlines() if ln.strip()]


def _read_loaded(nr, report, path: Path) -> tuple[list[dict], dict[str, list]]:
    string_kind = nr.IMetric.ValueKind_STRING
    int_kinds = {nr.IMetric.ValueKind_UINT32, nr.IMetric.ValueKind_UINT64}
    launches: list[dict] = []
    m = {"index": [], "metric_name": [], "unit": [], "number": [], "raw_value": []}
    n = 0
    for ri in range(report.num_ranges()):
        rng = report.range_by_idx(ri)
        for ai in range(rng.num_actions()):
            a = rng.action_by_idx(ai)
            vals: dict = {}
            for name in a.metric_names():
                metric = a.metric_by_name(name)
                if metric is None:
                    continue
                kind = metric.kind()
                if not metric.has_value():  # ncu prints 'no data'
                    raw, num = "", None
                elif kind == string_kind:
                    raw, num = metric.as_string(), None
                elif kind in int_kinds:
                    num = metric.as_uint64()
                    raw = str(num)
                else:
                    num = metric.as_double()
                    raw = repr(num)
                vals[name] = num if num is not None else raw
                m["index"].append(n)
                m["metric_name"].append(name)
                m["unit"].append(metric.unit() or "")
                m["number"].append(None if num is None else float(num))
                m["raw_value"].append(raw)

            def g(key, cast=int, vals=vals):
                v = vals.get(key)
                try:
                    return None if v is None else cast(v)
                except (TypeError, ValueError):
                    return None

            major = g("device__attribute_compute_capability_major")
            minor = g("device__attribute_compute_capability_minor")
            launches.append({
                "ncu_id": n,
                "kernel_name": a.name(nr.IAction.NameBase_DEMANGLED) or a.name(),
                "function_name": a.name(nr.IAction.NameBase_FUNCTION) or None,
                "mangled_name": a.name(nr.IAction.NameBase_MANGLED) or None,
                "grid_x": g("launch__grid_dim_x"), "grid_y": g("launch__grid_dim_y"),
                "grid_z": g("launch__grid_dim_z"),
                "block_x": g("launch__block_dim_x"), "block_y": g("launch__block_dim_y"),
                "block_z": g("launch__block_dim_z"),
                "device_id": g("launch__device_id") if "launch__device_id" in vals
                else g("device__attribute_device_index"),
                "device_name": g("device__attribute_display_name", str),
                "compute_capability": None if major is None else f"{major}.{minor or 0}",
                "stream_id": g("launch__stream_id"),
                "context_id": g("launch__context_id"),
                "nvtx_range": _nvtx_path(a),
                "source_file": path.name,
            })
            n += 1
    return launches, m
