"""Multi-rank inputs built from the shared fixtures: an nsys export as rank N of a job, the
AlexNet Kineto trace under another pid, an 8-rank job from the NCCL Kineto trace, a copy of a
run folder under another run_id."""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3

import pytest
from conftest import FIXTURES, edited_export

from tracekit.convert import convert

BASE = "nsys2023.1_rtx3090_conv_fp16"  # one process (pid 24129), 36 kernels, host "host"
NCCL_TRACE = FIXTURES / "kineto" / "kineto_a100_nccl_2ranks_rank0.json.gz"


def rank_export(tmp_path, name, rank, start_shift_ns=0, host="host", pid_shift=0, extra_sql=""):
    """The fixture export as rank ``rank`` (RANK=<rank> in its recorded environment), recorded
    ``start_shift_ns`` later on host ``host``, its pids moved by ``pid_shift``; ``extra_sql``
    applied too."""
    sql = extra_sql + (f"UPDATE TARGET_INFO_SYSTEM_ENV SET value = value || ';RANK={rank}' WHERE name = 'DeviceEnvironment';"
           f"UPDATE TARGET_INFO_SYSTEM_ENV SET value = '{host}' WHERE name = 'Hostname';"
           f"UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs = utcEpochNs + {start_shift_ns};")
    if pid_shift:  # globalPid / globalTid carry the pid in bits 24..47, in every table having them
        con = sqlite3.connect(f"file:{FIXTURES / 'nsys' / (BASE + '.sqlite')}?mode=ro", uri=True)
        for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
            for c in ("globalPid", "globalTid"):
                if c in [r[1] for r in con.execute(f'PRAGMA table_info("{t}")')]:
                    sql += f'UPDATE "{t}" SET {c} = {c} + ({pid_shift} << 24) WHERE {c} IS NOT NULL;'
        con.close()
        sql += f"UPDATE PROCESSES SET pid = pid + {pid_shift};"
    return edited_export(tmp_path, BASE, sql, name=name)


def kineto_copy(tmp_path, name, pid, drop_rank=True):
    """The small AlexNet Kineto trace with its host pid changed and no distributedInfo."""
    doc = json.loads(gzip.open(FIXTURES / "kineto" / "kineto_a100_alexnet.json.gz", "rt").read())
    doc.pop("distributedInfo", None)
    for e in doc["traceEvents"]:
        if e.get("pid") == 2869224:
            e["pid"] = pid
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return p


def copy_run(src, dst, run_id=None):
    shutil.copytree(src, dst)
    m = json.loads((dst / "manifest.json").read_text())
    m["run_id"] = run_id or dst.name
    (dst / "manifest.json").write_text(json.dumps(m))
    return dst


@pytest.fixture(scope="module")
def rank8_run(tmp_path_factory):
    """An 8-rank job from the NCCL Kineto trace: rank r's copy has distributedInfo.rank r, host
    pid 2910249 + r and its GPU events on device r (Kineto's GPU pid and args.device)."""
    base = tmp_path_factory.mktemp("rank8")
    with gzip.open(NCCL_TRACE, "rt") as f:
        text = f.read()
    host = 2910249
    paths = []
    for r in range(8):
        doc = json.loads(text)
        doc["distributedInfo"].update(rank=r, world_size=8)
        for e in doc["traceEvents"]:
            if e.get("pid") == host:
                e["pid"] = host + r
            elif e.get("pid") == 0:
                e["pid"] = r
                if isinstance(e.get("args"), dict) and "device" in e["args"]:
                    e["args"]["device"] = r
        p = base / f"rank{r}.json"
        p.write_text(json.dumps(doc))
        paths.append(p)
    return convert(paths, base / "run")
