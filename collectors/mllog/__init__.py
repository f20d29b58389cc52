"""MLPerf training result logs (MLCommons' ``training_results_vX.Y`` repositories, or a log a
``tracekit collect`` workload wrote with ``mlperf_logging.mllog``) to ``mlperf_events`` and
``mlperf_runs``.

A result file is one training run to the quality target: the lines of the reference code's MLPerf
logger (:mod:`~tracekit.collectors.mllog.parse`: ``:::MLL`` in rounds 0.5/0.6, ``:::MLLOG`` from
0.7) among the program's other output. Every entry is a row of ``mlperf_events``; each file is a
row of ``mlperf_runs`` with the run's start, stop and time to train, and the submission it
belongs to from its place in the results tree and the system description
(:mod:`~tracekit.collectors.mllog.system`), else from the log's own ``:::SYSJSON`` line or
``submission_entry``. Given a folder, ``tracekit convert`` reads every ``result_*.txt`` under it
(:func:`expand_inputs`): one run folder for a whole results tree.

Lines with the MLPerf token that do not parse are skipped and counted (a warning names the file
and the count per reason); a file with none that parse is refused (:class:`InputError`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa

from tracekit.collectors.common import describe_input
from tracekit.collectors.mllog import system as _system
from tracekit.collectors.mllog.parse import COLUMNS, read_log
from tracekit.errors import InputError
from tracekit.progress import NULL_PROGRESS, Progress
from tracekit.runfolder import RunWriter

NAME = "mllog"
__all__ = ["NAME", "QUALITY_TARGETS", "collect", "expand_inputs", "read_tables", "sniff"]

SNIFF_BYTES = 1 << 20
RESULT_GLOB = "result_*.txt"

# The quality target of each benchmark per round, from the MLPerf Training rules
# (training_policies, "Benchmarks" table): (target, 'higher' or 'lower' is better). The logs do
# not state it (no eval_target line in the fixtures' rounds); a benchmark not listed has none.
QUALITY_TARGETS = {
    ("0.5", "resnet"): (0.749, "higher"), ("0.5", "ssd"): (0.212, "higher"),
    ("0.6", "resnet"): (0.759, "higher"), ("0.6", "ssd"): (0.23, "higher"),
    ("4.0", "gnn"): (0.72, "higher"), ("4.0", "llama2_70b_lora"): (0.925, "lower"),
}


def sniff(path: Path) -> bool:
    """Text whose first MiB holds a ``:::MLLOG`` or ``:::MLL`` log line."""
    try:
        with open(path, "rb") as f:
            head = f.read(SNIFF_BYTES)
    except OSError:
        return False
    return b":::MLLOG {" in head or b":::MLL " in head


def expand_inputs(path: Path) -> list[Path]:
    """The MLPerf result files (``result_*.txt``) under the folder ``path``, sorted; [] if none."""
    return sorted(p for p in Path(path).rglob(RESULT_GLOB) if p.is_file())


def _first(cols: dict, key: str, start: int = 0) -> int | None:
    keys = cols["key"]
    for i in range(start, len(keys)):
        if keys[i] == key:
            return i
    return None


def _last_before(cols: dict, column: str, stop: int, key: str | None = None):
    """The last non-null ``column`` of the entries up to ``stop`` (of ``key`` only, if given)."""
    vals, keys = cols[column], cols["key"]
    for i in range(min(stop, len(vals) - 1), -1, -1):
        if vals[i] is not None and (key is None or keys[i] == key):
            return vals[i]
    return None


def _text_value(cols: dict, key: str) -> str | None:
    i = _first(cols, key)
    if i is None or cols["value"][i] is None:
        return None
    v = json.loads(cols["value"][i])
    return v if isinstance(v, str) else None


def _description(where: dict, sysjson: dict | None, cols: dict) -> tuple[dict, str | None]:
    """The system description and where it came from: the systems/ file, the log's :::SYSJSON,
    the log's submission_entry (0.6)."""
    if "system_file" in where:
        desc = _system.read_description(where["system_file"])
        if desc:
            return desc, "systems_file"
    if sysjson:
        return sysjson, "sysjson"
    entry = _text_value(cols, "submission_entry")
    desc = _system.from_entry(entry) if entry else {}
    return desc, ("submission_entry" if desc else None)


def _str(v) -> str | None:
    """A description's text field; anything but non-empty text (a number, a list) is none."""
    return v[:1000] if isinstance(v, str) and v else None


def run_row(path: Path, cols: dict, sysjson: dict | None, bad_lines: int) -> dict:
    """The ``mlperf_runs`` row of one result file (its entries in ``cols``)."""
    where = _system.layout(path)
    desc, desc_source = _description(where, sysjson, cols)
    desc = {k: (v if k in ("number_of_nodes", "accelerators_per_node") else _str(v)) for k, v in desc.items()}
    start = _first(cols, "run_start")
    stop = _first(cols, "run_stop", start or 0)
    end = stop if stop is not None else len(cols["key"]) - 1
    start_ns = cols["time_ns"][start] if start is not None else None
    stop_ns = cols["time_ns"][stop] if stop is not None else None
    status = None
    if stop is not None and cols["metadata"][stop]:
        status = json.loads(cols["metadata"][stop]).get("status")
    benchmark = where.get("benchmark") or _text_value(cols, "submission_benchmark")
    rnd = where.get("round")
    nodes = _system.as_int(desc.get("number_of_nodes"))
    per_node = _system.as_int(desc.get("accelerators_per_node"))
    target = QUALITY_TARGETS.get((rnd, benchmark))
    return {
        "file": str(path), "round": rnd, "submitter": where.get("submitter") or _text_value(cols, "submission_org"),
        "division": desc.get("division") or _text_value(cols, "submission_division"),
        "availability": desc.get("status") or _text_value(cols, "submission_status"),
        "system": where.get("system") or _text_value(cols, "submission_platform"),
        "system_name": desc.get("system_name"), "platform": _text_value(cols, "submission_platform"),
        "benchmark": benchmark, "result_index": where.get("result_index"),
        "framework": desc.get("framework"), "number_of_nodes": nodes, "accelerators_per_node": per_node,
        "accelerators": nodes * per_node if nodes is not None and per_node is not None else None,
        "accelerator_model": desc.get("accelerator_model_name") or None, "system_source": desc_source,
        "global_batch_size": _last_before(cols, "value_num", end, "global_batch_size"),
        "run_start_ns": start_ns, "run_stop_ns": stop_ns,
        "time_to_train_s": (stop_ns - start_ns) / 1e9 if start_ns is not None and stop_ns is not None else None,
        "status": status if isinstance(status, str) else None,
        "epoch_num": _last_before(cols, "epoch_num", end),
        "samples_count": _last_before(cols, "samples_count", end),
        "train_samples": _last_before(cols, "value_num", end, "train_samples"),
        "eval_accuracy": _last_before(cols, "value_num", end, "eval_accuracy"),
        "quality_target": target[0] if target else None, "target_direction": target[1] if target else None,
        "scaling_factor": _system.read_scaling(where.get("scaling_file")),
        "events": len(cols["key"]), "bad_lines": bad_lines,
    }


def read_tables(paths: list[Path]) -> tuple[dict, list[str], dict]:
    """The result files ``paths`` as {'mlperf_events': [tables], 'mlperf_runs': [table]}, the
    warnings to record and the manifest's ``sources.mllog`` entry. :class:`InputError` for a file
    with no MLPerf line that parses."""
    events, runs, skipped, other, warnings = [], [], {}, 0, []
    for path in paths:
        path = Path(path)
        cols, bad, sysjson, n_other = read_log(path)
        if not cols["key"]:
            why = f" ({sum(bad.values())} MLPerf line(s) that do not parse: " \
                  + ", ".join(f"{v} {k}" for k, v in sorted(bad.items())) + ")" if bad else ""
            raise InputError(f"not an MLPerf result log: no :::MLLOG or :::MLL line that parses{why}", path=path)
        runs.append(run_row(path, cols, sysjson, sum(bad.values())))
        t = pa.table({c: cols[c] for c in COLUMNS})
        events.append(t.append_column("file", pa.array([str(path)] * t.num_rows, pa.string())))
        if bad:
            skipped[str(path)] = bad
            warnings.append(f"{path}: {sum(bad.values())} MLPerf log line(s) not read: "
                            + ", ".join(f"{v} {k}" for k, v in sorted(bad.items())))
        other += n_other
    no_stop = [r["file"] for r in runs if r["time_to_train_s"] is None]
    if no_stop:
        warnings.append(f"{len(no_stop)} result file(s) without run_start and run_stop (no time to "
                        "train): " + ", ".join(no_stop[:3]) + (" ..." if len(no_stop) > 3 else ""))
    source = {"format": "mlperf-log",
              "clock": "time_ns = the log's Unix time (0.5/0.6: seconds, 0.7+: time_ms) in ns",
              "files": len(runs), "other_lines": other, "skipped": skipped}
    return {"mlperf_events": events, "mlperf_runs": [pa.Table.from_pylist(runs)]}, warnings, source


def collect(paths: list[Path], writer: RunWriter, progress: Progress = NULL_PROGRESS) -> None:
    """Read every result file in ``paths`` into ``writer``'s ``mlperf_events`` and
    ``mlperf_runs`` (one row per file)."""
    tables, warnings, source = read_tables(paths)
    for path in paths:
        writer.manifest["inputs"].append(describe_input(Path(path), "mlperf-log"))
    for name, parts in tables.items():
        writer.write_table(name, parts)
    for w in warnings:
        writer.warn(w)
    writer.manifest["sources"][NAME] = source
