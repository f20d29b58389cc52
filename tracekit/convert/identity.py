"""Job identity: whether the inputs of a multi-rank conversion can be one job.

:func:`conflicts` compares the rank parts of a job (each input converted on its own, see
:mod:`tracekit.convert.job`) and lists what says they are not one job:

- different world sizes (Kineto ``distributedInfo.world_size``; nsys: ``WORLD_SIZE``-style
  variables of the profiled command's recorded environment);
- the same rank twice on the same host (the trace's rank and host both recorded and equal);
- process groups of the same name described differently (``distributedInfo.pg_config``:
  description, size or member ranks);
- time windows that do not overlap within :data:`WINDOW_SLACK_NS`: two profiles of one job
  cover the same time, up to the hosts' clock difference (NTP: at most about 10 ms; the slack
  is a hundred times that).

``tracekit convert`` refuses such inputs (one line naming two files and the conflict, exit 2,
nothing written) unless ``--merge-unrelated`` is given; then the conflicts are recorded in the
manifest (``job.identity_conflicts``) and every cross-rank query says so in a notice.

Ranks that record the same ``distributedInfo.rank`` on different (or unrecorded) hosts, e.g.
local rank 0 of two nodes, are not a conflict: the job gives them distinct ranks (file name,
else file order) and every table uses those (:mod:`tracekit.convert.job`), with a warning.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

WINDOW_SLACK_NS = 1_000_000_000
"""How far apart two ranks' time windows may be and still be one job: 1 s."""

_TIME_COLUMNS = ("start_ns", "end_ns", "timestamp_ns")


def kineto_file(manifest: dict) -> dict:
    files = ((manifest.get("sources") or {}).get("kineto") or {}).get("files") or [{}]
    return files[0] if isinstance(files[0], dict) else {}


def trace_host(manifest: dict) -> str | None:
    """The host an input records: nsys TARGET_INFO_SYSTEM_ENV Hostname, or a Kineto trace's
    top-level ``hostname`` (``prof.add_metadata_json('hostname', ...)``, tracekit collect) or
    ``host_name`` (written by PyTorch's profiler itself since 2.x)."""
    src = manifest.get("sources") or {}
    h = (src.get("nsys") or {}).get("hostname")
    if not h:
        f = kineto_file(manifest)
        meta = f.get("trace_metadata") or {}
        h = f.get("hostname") or meta.get("hostname") or meta.get("hostName") or meta.get("host_name")
    return h if isinstance(h, str) and h else None


def _world_size(manifest: dict):
    w = kineto_file(manifest).get("world_size")
    if w is None:
        w = ((manifest.get("sources") or {}).get("nsys") or {}).get("env_world_size")
    return w if isinstance(w, int) else None


def _pg_config(manifest: dict) -> dict[str, tuple]:
    meta = kineto_file(manifest).get("trace_metadata") or {}
    pgs = (meta.get("distributedInfo") or {}).get("pg_config") or []
    out = {}
    for pg in pgs if isinstance(pgs, list) else []:
        if isinstance(pg, dict) and pg.get("pg_name") is not None:
            out[str(pg["pg_name"])] = (pg.get("pg_desc"), pg.get("pg_size"), tuple(pg.get("ranks") or ()))
    return out


def window(part: dict) -> tuple[int, int] | None:
    """(first, last) timestamp of a part on the job's clock, from the Parquet statistics of its
    tables (no data read); None when it has no timestamps."""
    lo, hi = None, None
    for info in (part["manifest"].get("tables") or {}).values():
        path = part["dir"] / info["file"]
        meta = pq.read_metadata(path)
        names = meta.schema.to_arrow_schema().names
        for c in _TIME_COLUMNS:
            if c not in names:
                continue
            i = names.index(c)
            for g in range(meta.num_row_groups):
                st = meta.row_group(g).column(i).statistics
                if st is not None and st.has_min_max:
                    lo = st.min if lo is None else min(lo, st.min)
                    hi = st.max if hi is None else max(hi, st.max)
    if lo is None:
        return None
    off = part.get("clock_offset_ns") or 0
    return lo + off, hi + off


def conflicts(parts: list[dict], trace_ranks: list) -> list[str]:
    """What says ``parts`` (with the ranks their traces record) are not one job; [] if nothing.
    Each entry is one line naming the two files."""
    out: list[str] = []
    names = [Path(p["path"]).name for p in parts]
    ws = [_world_size(p["manifest"]) for p in parts]
    known = [(n, w) for n, w in zip(names, ws) if w is not None]
    for n, w in known[1:]:
        if w != known[0][1]:
            out.append(f"{known[0][0]} records world size {known[0][1]}, {n} world size {w}")
            break
    seen: dict[tuple, str] = {}
    for n, p, r in zip(names, parts, trace_ranks):
        h = trace_host(p["manifest"])
        if r is not None and h is not None:
            if (h, r) in seen:
                out.append(f"{seen[(h, r)]} and {n} are both rank {r} on host {h}")
                break
            seen[(h, r)] = n
    pgs: dict[str, tuple[str, tuple]] = {}
    for n, p in zip(names, parts):
        for name, desc in _pg_config(p["manifest"]).items():
            if name in pgs and pgs[name][1] != desc:
                out.append(f"{pgs[name][0]} and {n} describe process group {name!r} differently "
                           f"({_pg_text(pgs[name][1])} vs {_pg_text(desc)})")
                break
            pgs.setdefault(name, (n, desc))
    wins = [(n, window(p)) for n, p in zip(names, parts)]
    wins = [(n, w) for n, w in wins if w is not None]
    if len(wins) > 1:
        late = max(wins, key=lambda x: x[1][0])
        early = min(wins, key=lambda x: x[1][1])
        gap = late[1][0] - early[1][1]
        if gap > WINDOW_SLACK_NS:
            out.append(f"{early[0]} ends {_duration(gap)} before {late[0]} starts: their time windows "
                       "do not overlap")
    return out


def _pg_text(desc: tuple) -> str:
    d, size, ranks = desc
    return f"{d or '?'}, size {size}, {len(ranks)} ranks listed"


def _duration(ns: int) -> str:
    s = ns / 1e9
    if s >= 86400:
        return f"{s / 86400:.1f} days"
    if s >= 3600:
        return f"{s / 3600:.1f} h"
    return f"{s:.1f} s"


__all__ = ["WINDOW_SLACK_NS", "conflicts", "trace_host", "window"]
