"""The NVTX-annotated training workloads (tracekit.workloads): every tiny preset trains on a CPU,
the result JSON holds what the contract lists, NVTX ranges follow docs/workloads.md, and a
2-process Gloo DDP run under torchrun reports both ranks."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from tracekit.errors import InputError  # noqa: E402
from tracekit.workloads import (  # noqa: E402
    REGISTRY,
    RunConfig,
    annotate,  # noqa: E402
    parse_step_message,
    run,
    step_message,
)
from tracekit.workloads.registry import SUITES  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
IDS = ["resnet50", "ssd", "maskrcnn", "transformer", "gnmt", "ncf", "dlrm", "minigo", "bert",
       "resnet_cifar", "gemm", "conv", "rnn", "allreduce"]


@pytest.fixture(autouse=True)
def one_thread():
    """Two CI cores shared with other processes: oversubscribed OpenMP threads make tiny models
    10-100x slower, so train with one intra-op thread (restored afterwards)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def cpu_run(workload, **kw):
    kw.setdefault("steps", 2)
    kw.setdefault("warmup_steps", 0)
    return run(RunConfig(workload=workload, device="cpu", **kw))


def test_registry_ids_suites_presets():
    assert list(REGISTRY) == IDS
    assert {s.suite for s in REGISTRY.values()} == set(SUITES)
    assert [n for n, s in REGISTRY.items() if s.suite == "dawnbench"] == ["resnet_cifar"]
    assert [n for n, s in REGISTRY.items() if s.suite == "deepbench"] == ["gemm", "conv", "rnn", "allreduce"]
    for spec in REGISTRY.values():
        assert set(spec.presets) == {"tiny", "full"}
        assert spec.description and spec.task and spec.sample
        assert all(p.batch_size >= 1 for p in spec.presets.values())
    # Published shapes in the full presets.
    assert REGISTRY["resnet50"].presets["full"].shapes["image"] == 224
    assert REGISTRY["bert"].presets["full"].shapes["layers"] == 24
    assert REGISTRY["transformer"].presets["full"].shapes["d_model"] == 1024


def test_ssd_full_has_8732_anchors():
    from tracekit.workloads.detection import ssd_num_anchors

    assert ssd_num_anchors(REGISTRY["ssd"].presets["full"].shapes) == 8732  # 38²·4+19²·6+10²·6+5²·6+3²·4+1·4


@pytest.mark.parametrize("workload", IDS)
def test_tiny_preset_trains_on_cpu(workload):
    r = cpu_run(workload, steps=2)
    spec = REGISTRY[workload]
    assert r["workload"] == workload and r["suite"] == spec.suite and r["preset"] == "tiny"
    assert r["batch_size"] == spec.presets["tiny"].batch_size
    assert r["world_size"] == 1 and r["samples_per_step"] == r["batch_size"]
    assert len(r["losses"]) == 2 and all(math.isfinite(v) for v in r["losses"]), r["losses"]
    assert len(r["step_wall_ns"]) == 2 and all(isinstance(t, int) and t > 0 for t in r["step_wall_ns"])


# gnmt: LSTMs on the meta device run step by step in Python (slow); maskrcnn: below.
@pytest.mark.parametrize("workload", [w for w in IDS if w not in ("gnmt", "maskrcnn")])
def test_full_preset_shapes_are_consistent(workload):
    """The full presets (GPU-sized) build and run forward + backward on the meta device: every
    layer's shapes fit together without allocating memory or computing anything."""
    with torch.device("meta"):
        task = REGISTRY[workload].build("full", 2, torch.device("meta"))
    loss = task.loss(task.model, task.make_batch(None))
    loss.backward()
    assert loss.shape == () and loss.is_meta


def test_maskrcnn_full_shapes():
    s = REGISTRY["maskrcnn"].presets["full"].shapes
    with torch.device("meta"):
        task = REGISTRY["maskrcnn"].build("full", 2, torch.device("meta"))
    x, gt, rpn_labels, *_ = task.make_batch(None)
    obj, deltas, cls, box, mask = task.model(x, gt)
    cells = (800 // 16) * (1344 // 16)  # stride-16 C4 map: 50 x 84
    assert obj.shape == (2, cells * 15) == rpn_labels.shape and deltas.shape == (2, cells * 15, 4)
    assert cls.shape == (2 * 512, 81) and box.shape == (2 * 512, 81, 4)
    assert mask.shape == (2 * 128, 81, 28, 28) and s["roi_size"] * 2 == 28


@pytest.mark.parametrize("workload", ["resnet_cifar", "transformer", "dlrm"])
def test_bf16_autocast_on_cpu(workload):
    r = cpu_run(workload, precision="bf16")
    assert r["precision"] == "bf16"
    assert all(math.isfinite(v) for v in r["losses"])


def test_channels_last_only_where_it_applies():
    assert cpu_run("conv", channels_last=True, steps=1)["channels_last"] is True
    assert cpu_run("ncf", channels_last=True, steps=1)["channels_last"] is False


def test_same_seed_same_losses_other_seed_other_losses():
    a = cpu_run("dlrm", steps=3, seed=7)["losses"]
    b = cpu_run("dlrm", steps=3, seed=7)["losses"]
    c = cpu_run("dlrm", steps=3, seed=8)["losses"]
    assert a == b
    assert a != c


def test_result_json_contract(tmp_path):
    out = tmp_path / "sub" / "result.json"
    r = cpu_run("gemm", steps=3, warmup_steps=2, batch_size=32, result_json=str(out))
    data = json.loads(out.read_text())
    assert data == json.loads(json.dumps(r))
    for key in ("workload", "preset", "precision", "batch_size", "world_size", "steps", "warmup_steps",
                "samples_per_step", "step_wall_ns", "versions", "devices", "host"):
        assert key in data, key
    assert (data["batch_size"], data["steps"], data["warmup_steps"]) == (32, 3, 2)
    assert len(data["step_wall_ns"]) == 5  # indexed by step number, warm-up steps first
    assert data["mean_step_ns"] == pytest.approx(sum(data["step_wall_ns"][2:]) / 3)
    assert data["samples_per_s"] == pytest.approx(32 * 3 / (sum(data["step_wall_ns"][2:]) / 1e9))
    assert data["versions"]["torch"] == torch.__version__
    assert data["host"]["cpu_cores"] == os.cpu_count() and data["host"]["cpu_model"]
    assert not list(out.parent.glob(".result.json.*"))  # no temporary file left behind


def test_bad_options_are_input_errors():
    with pytest.raises(InputError, match="amp"):
        cpu_run("gemm", precision="amp")
    with pytest.raises(InputError, match="unknown workload"):
        run({"workload": "alexnet"})
    with pytest.raises(InputError, match="--steps"):
        cpu_run("gemm", steps=0)


def test_module_cli_exit_status(capsys):
    from tracekit.workloads.__main__ import main

    with pytest.raises(SystemExit) as e:
        main(["alexnet"])
    assert e.value.code == 2
    assert main(["gemm", "--device", "cpu", "--precision", "amp"]) == 2
    assert "needs a CUDA device" in capsys.readouterr().err
    assert main(["gemm", "--device", "cpu", "--steps", "1", "--warmup-steps", "0"]) == 0
    assert capsys.readouterr().out.startswith("gemm tiny fp32 on 1 x cpu: 1 steps")


# ------------------------------------------------------------------------------------- NVTX
class NvtxRecorder:
    """Wraps the real ``nvtx`` package functions: records every call, then calls through."""

    def __init__(self, monkeypatch):
        import nvtx

        self.events = []
        self.lock = threading.Lock()
        for fname in ("push_range", "pop_range", "start_range", "end_range", "mark"):
            orig = getattr(nvtx, fname)
            monkeypatch.setattr(nvtx, fname, self._wrap(fname, orig))
        monkeypatch.setenv("TRACEKIT_NVTX", "nvtx")
        annotate.reset_backend()

    def _wrap(self, fname, orig):
        def f(*args, **kwargs):
            rv = orig(*args, **kwargs)
            with self.lock:
                self.events.append((fname, args, kwargs, threading.get_ident(), rv))
            return rv

        return f


@pytest.fixture
def recorder(monkeypatch):
    rec = NvtxRecorder(monkeypatch)
    yield rec
    annotate.reset_backend()


def test_nvtx_ranges_follow_the_convention(recorder):
    r = cpu_run("resnet_cifar", steps=2, warmup_steps=1)
    assert r["nvtx_backend"] == "nvtx"
    ev = recorder.events
    assert all(kw.get("domain") == "tracekit" for f, _, kw, _, _ in ev if f in ("push_range", "pop_range"))
    assert not any("payload" in kw or len(a) > 1 for f, a, kw, _, _ in ev)  # no payloads, ever
    assert len({tid for *_, tid, _ in ev}) == 1  # all push/pop on the training thread
    # Rebuild the nesting from push/pop order.
    stack, tree = [], []
    for f, args, _, _, _ in ev:
        if f == "push_range":
            node = (args[0], [])
            (stack[-1][1] if stack else tree).append(node)
            stack.append(node)
        elif f == "pop_range":
            stack.pop()
    assert stack == []
    # Warm-up steps first; the measured steps inside one "measure" range (profilers' capture range).
    assert [name for name, _ in tree] == ["step 0 (warmup)", "measure"]
    steps = [tree[0]] + tree[1][1]
    assert [name for name, _ in steps] == ["step 0 (warmup)", "step 1", "step 2"]
    for _name, children in steps:
        assert [c for c, _ in children] == ["data", "forward", "backward", "optimizer"]
    assert [parse_step_message(n) for n, _ in steps] == [(0, True), (1, False), (2, False)]


def test_step_message_round_trip():
    for step, warm in [(0, True), (12, False), (12345, True)]:
        assert parse_step_message(step_message(step, warm)) == (step, warm)
    assert parse_step_message("data") is None
    assert parse_step_message("step 3 (warm)") is None
    import re

    from tracekit.schema.step_ranges import STEP_SQL_REGEX

    assert re.match(STEP_SQL_REGEX, "step 4 (warmup)").groups() == ("4", " (warmup)")


def test_ddp_comm_hook_emits_comm_ranges(recorder):
    """The DDP comm hook opens 'comm allreduce' when it launches a bucket's all-reduce and closes
    it when the reduction completes (a 1-rank Gloo group in this process)."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from tracekit.workloads.loop import _nvtx_allreduce_hook

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        model = DDP(torch.nn.Linear(8, 4))
        model.register_comm_hook(None, _nvtx_allreduce_hook)
        model(torch.randn(2, 8)).sum().backward()
        grad = model.module.weight.grad.clone()
    finally:
        dist.destroy_process_group()
    starts = [(a, kw, rv) for f, a, kw, _, rv in recorder.events if f == "start_range"]
    ends = [a[0] for f, a, _, _, _ in recorder.events if f == "end_range"]
    assert [(a[0], kw["domain"]) for a, kw, _ in starts] == [("comm allreduce", "tracekit")]
    assert ends == [starts[0][2]]  # the same range closed
    assert torch.isfinite(grad).all()


def test_no_nvtx_backend_is_a_no_op(monkeypatch):
    monkeypatch.setitem(sys.modules, "nvtx", None)  # "not installed"
    monkeypatch.setenv("TRACEKIT_NVTX", "auto")
    annotate.reset_backend()
    try:
        r = cpu_run("gemm", steps=1)
        assert r["nvtx_backend"] == ("torch.cuda.nvtx" if torch.cuda.is_available() else "none")
        monkeypatch.setenv("TRACEKIT_NVTX", "bogus")
        annotate.reset_backend()
        with pytest.raises(InputError, match="TRACEKIT_NVTX"):
            cpu_run("gemm", steps=1)
    finally:
        annotate.reset_backend()


def test_registry_and_cli_import_without_torch():
    code = ("import sys, tracekit.workloads, tracekit.cli; "
            "assert 'torch' not in sys.modules, 'torch imported'; "
            "assert len(tracekit.workloads.REGISTRY) == 14")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, timeout=60)


# --------------------------------------------------------------------------------- the CLI
def test_tracekit_workloads_lists_every_workload(capsys):
    from tracekit.cli import run as cli

    assert cli(["workloads"]) == 0
    out = capsys.readouterr().out
    for name in IDS:
        assert name in out
    assert cli(["workloads", "--json", "--suite", "deepbench"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [d["name"] for d in data] == ["gemm", "conv", "rnn", "allreduce"]
    assert data[0]["presets"]["full"]["shapes"] == {"k": 4096, "n": 4096}
    assert cli(["workloads", "bert"]) == 0
    assert "seq=512" in capsys.readouterr().out
    assert cli(["workloads", "--suite", "spec"]) == 2
    assert "unknown suite" in capsys.readouterr().err


# ------------------------------------------------------------------------------ torchrun DDP
@pytest.mark.slow
def test_torchrun_two_rank_gloo(tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1", TRACEKIT_NVTX="off")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
           "--standalone", "-m", "tracekit.workloads", "ncf", "--steps", "2",
           "--warmup-steps", "1", "--device", "cpu", "--result-json", str(tmp_path / "r{rank}.json")]
    p = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=150)
    assert p.returncode == 0, p.stderr[-3000:]
    r0, r1 = (json.loads((tmp_path / f"r{i}.json").read_text()) for i in (0, 1))
    assert (r0["rank"], r1["rank"]) == (0, 1)
    for r in (r0, r1):
        assert r["world_size"] == 2 and r["ddp_backend"] == "gloo"
        assert r["batch_size"] == 32 and r["samples_per_step"] == 64
        assert len(r["step_wall_ns"]) == 3 and all(math.isfinite(v) for v in r["losses"])
    assert [x["rank"] for x in r0["ranks"]] == [0, 1]
    assert r0["ranks"][1]["step_wall_ns"] == r1["step_wall_ns"]
    assert r0["losses"] != r1["losses"]  # each rank trains on its own synthetic data
    assert p.stdout.count("ncf tiny fp32 on 2 x cpu") == 1  # summary from rank 0 only
