"""Property-based fuzzing of the Kineto (PyTorch profiler JSON) collector.

Each example is a generated trace: well-formed kernel events (integer ts/dur in microseconds),
kernel events whose timestamp is garbage, noise events of every kind and shape (wrong types,
non-dict entries, odd args), optionally truncated or gzipped. Every example must end in an
:class:`InputError` (exit 2) or in a run whose ``kernels`` table holds exactly the well-formed
kernels with the right nanoseconds -- never a garbage kernel with an invented time.
"""

from __future__ import annotations

import collections
import gzip
import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracekit.convert import convert
from tracekit.errors import InputError

FUZZ = settings(max_examples=40, derandomize=True, database=None, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.text(max_size=8),
                    st.floats(allow_nan=False, allow_infinity=False))
junk = st.recursive(scalars, lambda ch: st.lists(ch, max_size=3) | st.dictionaries(st.text(max_size=5), ch, max_size=3),
                    max_leaves=6)
CATS = ["cuda_runtime", "cuda_driver", "gpu_memcpy", "gpu_memset", "cpu_op", "user_annotation",
        "gpu_user_annotation", "ac2g", "python_function", "cuda_sync", "Trace", "kernel"]


@st.composite
def good_kernel(draw):
    return {"ph": "X", "cat": "kernel", "name": draw(st.text(min_size=1, max_size=12)),
            "pid": draw(st.integers(0, 7)), "tid": draw(st.integers(0, 50)),
            "ts": draw(st.integers(1, 10**12)), "dur": draw(st.integers(-5, 10**6)),
            "args": {"device": draw(st.integers(0, 7)), "stream": draw(st.integers(0, 50)),
                     "correlation": draw(st.integers(0, 10**6))}}


@st.composite
def bad_kernel(draw):
    """A kernel event whose timestamp is not a number: it must be dropped and counted."""
    e = draw(good_kernel())
    e["ts"] = draw(st.one_of(st.none(), st.sampled_from(["abc", "", "1e", "NaN"]), st.booleans(),
                             st.lists(st.integers(), max_size=2)))
    return e


@st.composite
def noise(draw):
    e = {"ph": draw(st.sampled_from(["X", "i", "s", "f", "M", "B", "E", None])),
         "cat": draw(st.one_of(st.sampled_from(CATS[:-1]), junk)),
         "name": draw(junk), "pid": draw(junk), "tid": draw(junk),
         "ts": draw(st.one_of(st.integers(0, 10**12), junk)), "dur": draw(junk),
         "args": draw(junk)}
    for k in draw(st.lists(st.sampled_from(list(e)), max_size=3)):
        e.pop(k, None)
    return e


@st.composite
def trace(draw):
    good = draw(st.lists(good_kernel(), max_size=8))
    bad = draw(st.lists(bad_kernel(), max_size=3))
    other = draw(st.lists(st.one_of(noise(), junk), max_size=8))
    events = good + bad + other
    order = draw(st.permutations(range(len(events))))
    doc = {"schemaVersion": 1, "traceEvents": [events[i] for i in order]}
    if draw(st.booleans()):
        doc["deviceProperties"] = draw(st.one_of(junk, st.just([{"id": 0, "name": "GPU"}])))
    text = json.dumps(doc)
    cut = draw(st.one_of(st.none(), st.integers(1, max(1, len(text) - 1))))
    return {"good": good, "bad": bad, "text": text if cut is None else text[:cut],
            "truncated": cut is not None, "gzip": draw(st.booleans())}


def _write(tmp, case) -> Path:
    if case["gzip"]:
        p = tmp / "trace.json.gz"
        p.write_bytes(gzip.compress(case["text"].encode()))
    else:
        p = tmp / "trace.json"
        p.write_text(case["text"])
    return p


@pytest.mark.slow
def test_fuzz_kineto_traces(tmp_path):
    n = collections.Counter()

    @FUZZ
    @given(case=trace())
    def one(case):
        n["examples"] += 1
        d = tmp_path / f"ex{n['examples']}"
        d.mkdir()
        p = _write(d, case)
        try:
            out = convert([p], d / "run")
        except InputError as exc:
            n["input_error"] += 1
            assert str(p) in str(exc) and "\n" not in str(exc)
            assert not (d / "run").exists()
            assert not [x for x in d.iterdir() if ".tmp-" in x.name]
            return
        n["ok"] += 1
        assert not case["truncated"] or case["text"].rstrip().endswith("}"), \
            "a truncated trace was converted without error"
        m = json.loads((out / "manifest.json").read_text())
        kt = m["tables"].get("kernels")
        got = collections.Counter()
        if kt:
            t = pq.read_table(out / kt["file"], columns=["start_ns", "duration_ns", "end_ns", "name"])
            for r in t.to_pylist():
                assert r["end_ns"] - r["start_ns"] == r["duration_ns"]
                got[(r["start_ns"], r["duration_ns"], r["name"])] += 1
        want = collections.Counter((k["ts"] * 1000, k["dur"] * 1000, k["name"]) for k in case["good"])
        assert got == want
        files = m["sources"]["kineto"]["files"]
        assert sum(f["bad_timestamps"] for f in files) >= len(case["bad"])
        shutil.rmtree(d, ignore_errors=True)

    one()
    assert n["ok"] and n["input_error"], n


# Smallest failing inputs hypothesis found (kept as fast regression cases).
REPRODUCERS = {
    "event_not_an_object": {"traceEvents": [None, 5, "x"]},
    "args_not_an_object": {"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1,
                                            "pid": 0, "tid": 0, "args": True}]},
    "name_not_a_string": {"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": [1], "ts": 1, "dur": 1,
                                           "pid": 0, "tid": 0}]},
    "category_not_a_string": {"traceEvents": [{"ph": "X", "cat": None, "name": "a", "ts": 1, "dur": 1},
                                              {"ph": "X", "cat": "x", "name": "b", "ts": 1, "dur": 1}]},
    "device_properties_not_a_list": {"traceEvents": [], "deviceProperties": True},
    "device_properties_of_strings": {"traceEvents": [], "deviceProperties": ["GPU"]},
    "metadata_args_not_an_object": {"traceEvents": [{"ph": "M", "name": "process_name", "pid": 1,
                                                     "args": [1]}]},
}


def test_kineto_reproducers(tmp_path):
    failures = {}
    for name, doc in REPRODUCERS.items():
        p = tmp_path / f"{name}.json"
        p.write_text(json.dumps(doc))
        try:
            convert([p], tmp_path / name)
        except InputError:
            pass
        except Exception as exc:  # noqa: BLE001 - collected to report all at once
            failures[name] = f"{type(exc).__name__}: {exc}"
    assert not failures, failures
