"""Nsight Compute collector: ``--csv --page raw``, ``--csv --page details`` and ``.ncu-rep``.

Writes ``ncu_launches`` (one row per profiled launch) and ``ncu_metrics`` (long: launch, raw
metric name, raw unit, value in base units, raw text). Several ncu inputs given together are
concatenated in order; launch_id numbers the launches of the run. Metrics are not interpreted
here: FLOPs, bytes and ceilings are computed by the roofline queries (docs/roofline.md).

Modules: :mod:`~tracekit.collectors.ncu.csv_reader` (raw and details CSV pages),
:mod:`~tracekit.collectors.ncu.rep_reader` (``.ncu-rep`` through NVIDIA's ``ncu-report``),
:mod:`~tracekit.collectors.ncu.units` (ncu's units to base units, as a table),
:mod:`~tracekit.schema.ncu_metrics` (the metric names the roofline reads, per ncu version).
"""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from tracekit.collectors.common import describe_input
from tracekit.collectors.ncu import csv_reader as C
from tracekit.collectors.ncu import units as U
from tracekit.collectors.ncu.rep_framing import cut_at
from tracekit.collectors.ncu.rep_reader import is_report, read_report
from tracekit.errors import InputError
from tracekit.progress import NULL_PROGRESS, Progress
from tracekit.runfolder import RunWriter

NAME = "ncu"


def sniff(path: Path) -> bool:
    """An .ncu-rep (suffix or magic bytes) or a CSV whose first non-log line is ncu's header, or
    which starts with ncu's ``==PROF==``-style log lines. SQLite and JSON files never match."""
    if is_report(path):
        return True
    try:
        with open(path, "rb") as f:
            head = f.read(65536)
    except OSError:
        return False
    return C.looks_like_ncu_csv(head)


def column_sources() -> dict[tuple[str, str], str]:
    """Where each column comes from, for docs/schema.md."""
    return {
        ("ncu_metrics", "value"): "CSV cell (raw page: metric column; details page: \"Metric Value\") "
        "or ncu_report IMetric value, scaled by the unit table in docs/roofline.md",
        ("ncu_metrics", "unit"): "raw page: the units row; details page: \"Metric Unit\"; "
        "report: IMetric.unit()",
    }


_TEMPLATE = re.compile(r"<[^<>]*>")


def base_name(name: str | None) -> str | None:
    """'void f<int, (x)2>(float *, int)' -> 'f'; 'ns::k(int)' -> 'ns::k'."""
    if not name:
        return name
    s = name
    for _ in range(20):  # strip nested template argument lists
        t = _TEMPLATE.sub("", s)
        if t == s:
            break
        s = t
    s = s.split("(", 1)[0].strip()
    return s.split(" ")[-1] or name


NVTX_PUSHPOP_HEADER = "thread Domain:Push/Pop_Range"
NVTX_HEADERS = (NVTX_PUSHPOP_HEADER, "Id:Domain:Start/Stop_Range")
_NVTX_ITEM = re.compile(r'"([^":]*):([^":]*):')


def nvtx_path(cell: str | None) -> str | None:
    """The push/pop NVTX column of a raw CSV ('TID  "<default domain>:GENE:...:GENE"  "..."')
    as 'GENE/gsub/...' (ranges outside the default domain prefixed 'DOMAIN@')."""
    if not cell:
        return None
    parts = []
    for dom, name in _NVTX_ITEM.findall(cell):
        parts.append(name if dom in ("", "<default domain>") else f"{dom}@{name}")
    return "/".join(parts) or None


def _launch_columns(table: pa.Table, header: list[str]) -> dict[str, pa.Array]:
    def text(n):
        c = C.col(table, header, n)
        return None if c is None else pc.if_else(pc.equal(c, ""), pa.scalar(None, pa.string()), c)

    def integer(n):
        c = text(n)
        return None if c is None else U.parse_values(c.combine_chunks()).cast(pa.int64())

    out = {
        "ncu_id": integer("ID"), "pid": integer("Process ID"), "process_name": text("Process Name"),
        "kernel_name": text("Kernel Name"), "stream_id": integer("Stream"),
        "context_id": integer("Context"), "device_id": integer("Device"),
        "compute_capability": text("CC"),
    }
    for label, prefix in (("Grid Size", "grid"), ("Block Size", "block")):
        c = text(label)
        if c is not None:
            x, y, z = C.dims(c.combine_chunks())
            out.update({f"{prefix}_x": x, f"{prefix}_y": y, f"{prefix}_z": z})
    return {k: v for k, v in out.items() if v is not None}


def _from_raw(header, table):
    units, rows = table.slice(0, 1), table.slice(1)
    if not table.num_rows:  # a header and nothing else
        units = None
    elif C.col(units, header, "ID")[0].as_py() != "":
        # without the units row the values' scale is unknown (gpu__time_duration.sum is in
        # usecond or msecond, dram__bytes in Kbyte or Mbyte): reading them as base units is wrong
        raise InputError("the raw page has no units row after its header, so the scale of every "
                         "metric is unknown; export it again with units (ncu --import REPORT --csv "
                         "--page raw, without --print-units none)", path=None)
    launches = _launch_columns(rows, header)
    n = rows.num_rows
    for i, h in enumerate(header):
        if h.startswith(NVTX_PUSHPOP_HEADER):
            launches["nvtx_range"] = pa.array([nvtx_path(v) for v in rows.column(f"c{i}").to_pylist()], pa.string())
    metric_idx = [i for i, h in enumerate(header)
                  if h not in C.LAUNCH_COLUMNS and not h.startswith(NVTX_HEADERS)]
    idx = pa.array(range(n), pa.int64())
    parts = []
    for i in metric_idx:
        unit = "" if units is None else units.column(f"c{i}")[0].as_py()
        parts.append(pa.table({
            "index": idx,
            "metric_name": pa.array([header[i]] * n, pa.string()),
            "unit": pa.array([unit] * n, pa.string()),
            "raw_value": rows.column(f"c{i}").combine_chunks(),
        }))
    metrics = pa.concat_tables(parts) if parts else None
    return launches, n, metrics


def _from_details(header, table):
    # rule rows (no metric name) carry odd Context/Stream cells: drop them first
    table = table.filter(pc.not_equal(C.col(table, header, "Metric Name"), ""))
    keys = [h for h in ("ID", "Process ID", "Kernel Name") if h in header]
    key = pc.binary_join_element_wise(*[C.col(table, header, k) for k in keys], "\x1f")
    uniq = pc.unique(key)
    index = pc.index_in(key, value_set=uniq).cast(pa.int64())
    first = pc.index_in(uniq, value_set=key)  # first row of each launch
    launch_rows = table.take(first)
    launches = _launch_columns(launch_rows, header)
    name = C.col(table, header, "Metric Name")
    metrics = pa.table({
        "index": index,
        "metric_name": name,
        "section": C.col(table, header, "Section Name"),
        "unit": C.col(table, header, "Metric Unit"),
        "raw_value": C.col(table, header, "Metric Value"),
    })
    return launches, len(uniq), _drop_repeated(metrics)


def _drop_repeated(metrics: pa.Table) -> pa.Table:
    """A details export that repeats a (launch, section, metric) row (files concatenated, a
    section printed twice) keeps the first; the count is in ``metrics.schema.metadata``."""
    keys = ["index", "section", "metric_name"]
    first = metrics.append_column("_row", pa.array(range(metrics.num_rows), pa.int64())) \
        .group_by(keys, use_threads=False).aggregate([("_row", "min"), ("raw_value", "count_distinct")])
    repeated = metrics.num_rows - first.num_rows
    if not repeated:
        return metrics
    differing = int(pc.sum(pc.greater(first.column("raw_value_count_distinct"), 1)).as_py() or 0)
    rows = first.column("_row_min")
    kept = metrics.take(pc.take(rows, pc.sort_indices(rows)))
    return kept.replace_schema_metadata({"repeated": str(repeated), "differing": str(differing)})


def _device_info(launches: pa.Table, metrics: pa.Table) -> pa.Table:
    """Fill device_name / compute capability / grid / block from metric rows where the launch
    columns lack them."""
    fill = {
        "device_name": ("device__attribute_display_name", pa.string()),
        "grid_x": ("launch__grid_dim_x", pa.int32()), "grid_y": ("launch__grid_dim_y", pa.int32()),
        "grid_z": ("launch__grid_dim_z", pa.int32()),
        "block_x": ("launch__block_dim_x", pa.int32()), "block_y": ("launch__block_dim_y", pa.int32()),
        "block_z": ("launch__block_dim_z", pa.int32()),
        "stream_id": ("launch__stream_id", pa.int64()), "context_id": ("launch__context_id", pa.int64()),
    }
    n = launches.num_rows
    lid = launches.column("launch_id")
    cols = {c: launches.column(c) for c in launches.column_names}

    def metric(name, typ):
        sel = metrics.filter(pc.equal(metrics.column("metric_name"), name))
        pos = pc.index_in(lid, value_set=sel.column("launch_id"))
        if typ == pa.string():
            return pc.take(sel.column("raw_value"), pos)
        return pc.take(sel.column("value"), pos).cast(typ, safe=False)

    for col, (mname, typ) in fill.items():
        got = metric(mname, typ)
        have = cols.get(col)
        cols[col] = got if have is None else pc.coalesce(have.cast(typ), got)
    if cols.get("compute_capability") is None or cols["compute_capability"].null_count == n:
        major = metric("device__attribute_compute_capability_major", pa.int64()).cast(pa.string())
        minor = metric("device__attribute_compute_capability_minor", pa.int64()).cast(pa.string())
        cc = pc.binary_join_element_wise(major, minor, ".")
        have = cols.get("compute_capability")
        cols["compute_capability"] = cc if have is None else pc.coalesce(have, cc)
    return pa.table(cols)


def _metrics_table(m: pa.Table, offset: int, numbers: pa.Array | None = None) -> pa.Table:
    raw = m.column("raw_value").combine_chunks()
    num = U.parse_values(raw) if numbers is None else numbers
    value, base = U.convert(num, m.column("unit").combine_chunks())
    out = {
        "launch_id": pc.add(m.column("index"), offset),
        "metric_name": m.column("metric_name"),
        "unit": m.column("unit"),
        "value": value, "base_unit": base, "raw_value": raw,
    }
    if "section" in m.column_names:
        out["section"] = m.column("section")
    return pa.table(out)


def read_one(path: Path, offset: int) -> tuple[pa.Table, pa.Table, dict]:
    """(ncu_launches rows, ncu_metrics rows, manifest info) of one input; launch IDs from
    ``offset``. Raises :class:`InputError` for unreadable input or an input with no launch."""
    if is_report(path):
        rows, mcols = read_report(path)
        if not rows:
            raise InputError("the report holds no profiled kernel launch", path=path)
        launches = pa.Table.from_pylist(rows)
        launches = launches.append_column("launch_id", pa.array(range(offset, offset + len(rows)), pa.int64()))
        m = pa.table({k: mcols[k] for k in ("index", "metric_name", "unit", "raw_value")})
        m = m.set_column(0, "index", m.column("index").cast(pa.int64()))
        metrics = _metrics_table(m, offset, pa.array(mcols["number"], pa.float64()))
        info = {"format": "ncu-rep", "launches": len(rows)}
        cut = cut_at(path)
        if cut:  # launches before the cut are whole; those after it are lost
            info["truncated"] = cut
            info["warnings"] = [f"{path.name}: the report is truncated or corrupt ({cut}): the "
                                f"{len(rows)} launch(es) before the cut were read, any after it "
                                "are missing"]
        return launches, metrics, info
    page, header, table, logs = C.read_csv(path)
    if page == "raw":
        try:
            cols, n, m = _from_raw(header, table)
        except InputError as exc:
            raise InputError(str(exc), path=path) from None
    else:
        cols, n, m = _from_details(header, table)
    if n == 0:
        raise InputError("ncu CSV has a header but no profiled launch", path=path)
    cols["launch_id"] = pa.array(range(offset, offset + n), pa.int64())
    cols["source_file"] = pa.array([path.name] * n, pa.string())
    if "kernel_name" in cols:
        names = cols["kernel_name"].to_pylist()
        cols["function_name"] = pa.array([base_name(x) for x in names], pa.string())
    launches = pa.table(cols)
    metrics = _metrics_table(m, offset) if m is not None else None
    if metrics is None:
        metrics = _metrics_table(pa.table({"index": pa.array([], pa.int64()), "metric_name": pa.array([], pa.string()),
                                           "unit": pa.array([], pa.string()),
                                           "raw_value": pa.array([], pa.string())}), offset)
    launches = _device_info(launches, metrics)
    warnings = [ln for ln in logs if ln.startswith(("==WARNING==", "==ERROR=="))]
    info = {"format": f"ncu-csv-{page}", "launches": n, "log_warnings": warnings[:20]}
    meta = (m.schema.metadata or {}) if m is not None else {}
    if b"repeated" in meta:
        info["repeated_metric_rows"] = int(meta[b"repeated"])
        info["warnings"] = [f"{path.name}: {int(meta[b'repeated'])} repeated metric row(s) (same "
                            "launch, section and metric) dropped, the first kept"
                            + (f"; {int(meta[b'differing'])} of them with another value"
                               if int(meta[b"differing"]) else "")]
    bad = U.comma_decimals(metrics.column("raw_value").combine_chunks())
    if bad:
        info["comma_decimal_values"] = bad
        info.setdefault("warnings", []).append(
            f"{path.name}: {bad} metric value(s) like '1,5' have a comma that is not a thousands "
            "separator (a localized decimal comma?): stored as NULL, raw_value keeps the text")
    return launches, metrics, info


def collect(paths: list[Path], writer: RunWriter, progress: Progress = NULL_PROGRESS) -> None:
    """Convert ncu inputs into ``writer``'s run folder (tables ncu_launches, ncu_metrics).

    Raises :class:`InputError` for a file that is not readable as ncu output, a CSV in which ncu
    profiled no kernel, or a report with no launch.
    """
    all_l, all_m, info = [], [], []
    offset = 0
    advance = progress.task("ncu             ", total=len(paths))
    for p in paths:
        launches, metrics, meta = read_one(Path(p), offset)
        writer.manifest["inputs"].append(describe_input(p, meta["format"]))
        for w in meta.pop("warnings", []):
            writer.warn(w)
        info.append({"file": Path(p).name, **meta})
        offset += launches.num_rows
        all_l.append(launches)
        all_m.append(metrics)
        advance(1)
    writer.write_table("ncu_launches", all_l)
    writer.write_table("ncu_metrics", all_m)
    writer.manifest.setdefault("sources", {})[NAME] = {"format": "ncu", "inputs": info}
