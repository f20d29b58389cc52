"""Where a result file sits in a submission, and the system it ran on.

MLCommons' results repositories (``training_results_vX.Y``) lay a submission out as::

    SUBMITTER/results/SYSTEM/BENCHMARK/result_N.txt     one training run each
    SUBMITTER/results/SYSTEM/BENCHMARK/scaling.json     {"scaling_factor": f} (4.0 onward, optional)
    SUBMITTER/systems/SYSTEM.json                       the system description

The system description is JSON from round 0.7 on (``number_of_nodes``, ``accelerators_per_node``,
``accelerator_model_name``, ``system_name``, ...). In round 0.6 it is a copy of the log's
``submission_*`` lines (``org: {"value": ...}``, one per line) whose ``entry`` value is a Python
dict literal holding ``nodes`` (``num_nodes``, ``num_accelerators`` per node, ``accelerator``) as
another literal; it is read with :func:`ast.literal_eval`, which evaluates literals only.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

_ROUND = re.compile(r"^training_results_v(\d+\.\d+)(?:\.\d+)?$")
_LITERAL_LIMIT = 1 << 16  # a description's entry is a few KiB; longer is not one


def layout(path: Path) -> dict:
    """round, submitter, system, benchmark, run number and the paths of the system description
    and scaling.json, from ``path``'s place in a results tree; the keys it cannot tell are absent."""
    p = Path(path).absolute()
    out: dict = {}
    m = re.fullmatch(r"result_(\d+)\.txt", p.name)
    if m:
        out["result_index"] = int(m.group(1))
    parts = p.parts
    if len(parts) >= 5 and parts[-4] == "results":
        out["submitter"], out["system"], out["benchmark"] = parts[-5], parts[-3], parts[-2]
        out["system_file"] = p.parents[3] / "systems" / f"{parts[-3]}.json"
        out["scaling_file"] = p.parent / "scaling.json"
    for part in reversed(parts[:-1]):
        m = _ROUND.match(part)
        if m:
            out["round"] = m.group(1)
            break
    return out


def _literal(text):
    if not isinstance(text, str) or len(text) > _LITERAL_LIMIT:
        return None
    try:
        v = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return v if isinstance(v, dict) else None


def from_entry(entry) -> dict:
    """The round-0.6 ``submission_entry`` (a dict literal, or its text) as the description's
    0.7+ keys: number_of_nodes, accelerators_per_node, accelerator_model_name, framework."""
    e = _literal(entry) if isinstance(entry, str) else entry
    if not isinstance(e, dict):
        return {}
    nodes = _literal(e.get("nodes")) if isinstance(e.get("nodes"), str) else e.get("nodes")
    nodes = nodes if isinstance(nodes, dict) else {}
    out = {"number_of_nodes": nodes.get("num_nodes"), "accelerators_per_node": nodes.get("num_accelerators"),
           "accelerator_model_name": nodes.get("accelerator"), "framework": e.get("framework"),
           "system_name": e.get("hardware")}
    return {k: v for k, v in out.items() if v not in (None, "")}


def read_description(path: Path) -> dict | None:
    """The system description at ``path`` with the 0.7+ keys (0.6's format converted by
    :func:`from_entry`); None when there is none or it is neither format."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    try:
        obj = json.loads(text)
        return obj if isinstance(obj, dict) else None
    except (ValueError, RecursionError):
        pass
    fields = {}
    for line in text.splitlines():
        key, sep, rest = line.partition(": ")
        if not sep:
            continue
        try:
            v = json.loads(rest)
        except (ValueError, RecursionError):
            continue
        if isinstance(v, dict) and "value" in v:
            fields[key.strip()] = v["value"]
    if "entry" not in fields:
        return None
    out = from_entry(fields["entry"])
    for src, dst in (("org", "submitter"), ("division", "division"), ("status", "status")):
        if isinstance(fields.get(src), str):
            out[dst] = fields[src]
    return out


def read_scaling(path: Path | None) -> float | None:
    """``scaling_factor`` of a benchmark folder's scaling.json (the factor MLPerf multiplies the
    score by when hyperparameters were borrowed), None when there is no such file."""
    if path is None:
        return None
    try:
        obj = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    f = obj.get("scaling_factor") if isinstance(obj, dict) else None
    return float(f) if type(f) in (int, float) and f > 0 else None


def as_int(v) -> int | None:
    """A count from a description ('8', 8, '8.0'); None otherwise."""
    if type(v) is int:
        return v
    if isinstance(v, str):
        try:
            f = float(v.strip())
        except ValueError:
            return None
        return int(f) if f.is_integer() and 0 <= f < 2**31 else None
    return None
