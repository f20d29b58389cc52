"""The training loop shared by every workload: DDP, precision, NVTX ranges, timing, result JSON."""

from __future__ import annotations

import contextlib
import datetime as _dt
import gc
import json
import math
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from tracekit.errors import InputError, ToolNotFoundError
from tracekit.schema.step_ranges import step_message
from tracekit.workloads import annotate as _annotate
from tracekit.workloads import mlperflog as _mlperflog
from tracekit.workloads.annotate import COMM, MEASURE, backend, end_range, start_range
from tracekit.workloads.registry import PRESETS, REGISTRY

PRECISIONS = ("fp32", "amp", "bf16")
DEVICES = ("auto", "cpu", "cuda")
RESULT_FORMAT = "tracekit.workloads.result/1"


@dataclass
class RunConfig:
    """What to run. ``batch_size`` is per rank (None: the preset's default)."""

    workload: str
    preset: str = "tiny"
    steps: int = 10
    warmup_steps: int = 2
    batch_size: int | None = None
    precision: str = "fp32"
    channels_last: bool = False
    compile: bool = False
    device: str = "auto"
    seed: int = 0
    result_json: str | None = None
    torch_profile: str | None = None  # folder for torch.profiler Chrome traces (rank{N}.json)
    profile_memory: bool = False  # torch.profiler profile_memory=True ([memory] events)
    mllog: str | None = None  # rank 0 writes an MLPerf log (:::MLLOG lines) here (mlperflog.py)
    command: list[str] = field(default_factory=list)

    def validate(self) -> RunConfig:
        if self.workload not in REGISTRY:
            raise InputError(f"unknown workload {self.workload!r}; choose one of: {', '.join(REGISTRY)}")
        if self.preset not in PRESETS:
            raise InputError(f"unknown preset {self.preset!r}; choose one of: {', '.join(PRESETS)}")
        if self.precision not in PRECISIONS:
            raise InputError(f"unknown precision {self.precision!r}; choose one of: {', '.join(PRECISIONS)}")
        if self.device not in DEVICES:
            raise InputError(f"unknown device {self.device!r}; choose one of: {', '.join(DEVICES)}")
        if self.steps < 1:
            raise InputError(f"--steps must be at least 1, got {self.steps}")
        if self.warmup_steps < 0:
            raise InputError(f"--warmup-steps must be 0 or more, got {self.warmup_steps}")
        if self.batch_size is not None and self.batch_size < 1:
            raise InputError(f"--batch-size must be at least 1, got {self.batch_size}")
        return self


# ------------------------------------------------------------------------------- environment
def _cpu_info() -> dict:
    model, physical = None, set()
    try:
        phys = None
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            key, value = key.strip(), value.strip()
            if key == "model name" and model is None:
                model = value
            elif key == "physical id":
                phys = value
            elif key == "core id":
                physical.add((phys, value))
    except OSError:
        pass
    return {"cpu_model": model or platform.processor() or platform.machine(),
            "cpu_cores": os.cpu_count(), "cpu_physical_cores": len(physical) or None,
            "hostname": socket.gethostname(), "os": platform.platform()}


def _driver_version() -> str | None:
    try:
        m = re.search(r"Kernel Module\s+(\S+)", Path("/proc/driver/nvidia/version").read_text())
        if m:
            return m.group(1)
    except OSError:
        pass
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "--query-gpu=driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=20).stdout.split()
            return out[0] if out else None
        except (OSError, subprocess.SubprocessError):
            return None
    return None


def environment(torch, device) -> dict:
    """Versions, device names and host facts recorded with every result."""
    from importlib import metadata

    def version(pkg):
        try:
            return metadata.version(pkg)
        except metadata.PackageNotFoundError:
            return None

    cuda = device.type == "cuda"
    versions = {"python": platform.python_version(), "torch": torch.__version__,
                "cuda": torch.version.cuda, "cudnn": None, "nccl": None, "driver": None,
                "nvtx": version("nvtx"), "tracekit": version("tracekit")}
    devices = []
    if torch.cuda.is_available():
        versions["cudnn"] = torch.backends.cudnn.version()
        try:
            versions["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
        except Exception:  # NCCL missing from this build
            pass
        versions["driver"] = _driver_version()
        devices = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    host = _cpu_info()
    return {"versions": versions, "devices": devices,
            "device_name": torch.cuda.get_device_name(device) if cuda else host["cpu_model"],
            "host": host}


# ---------------------------------------------------------------------------------- the loop
def _import_torch():
    try:
        import torch
    except ImportError:
        raise ToolNotFoundError("torch is not installed: pip install 'tracekit[collect]' "
                                "(or a torch build for your CUDA version)") from None
    return torch


def _resolve_device(torch, want: str, local_rank: int):
    if want == "cuda" and not torch.cuda.is_available():
        raise InputError("--device cuda: no CUDA device is available to this torch "
                         f"({torch.__version__}); use --device cpu")
    if want == "cuda" or (want == "auto" and torch.cuda.is_available()):
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def _nvtx_allreduce_hook(state, bucket):
    """DDP's default all-reduce, inside a ``comm allreduce`` start/end range that closes when
    the reduction's future completes (on whichever thread completes it)."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    handle = start_range(COMM)
    fut = default_hooks.allreduce_hook(state, bucket)

    def done(f):
        end_range(handle)
        return f.value()

    return fut.then(done)


def _write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=2)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _torch_profiler(torch, cuda: bool, memory: bool = False):
    """torch.profiler over the measured steps (``--torch-profile``): CPU and, on GPUs, CUDA;
    every allocation and free too with ``memory`` (``--profile-memory``)."""
    acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if cuda else [])
    return torch.profiler.profile(activities=acts, record_shapes=True, profile_memory=memory)


def _recorded_range(torch):
    """``nvtx_range`` that also opens a ``record_function`` of the same name (Kineto traces
    then carry the step and phase ranges)."""

    @contextlib.contextmanager
    def rng(message: str):
        with _annotate.nvtx_range(message), torch.profiler.record_function(message):
            yield

    return rng


def run(config: RunConfig | dict) -> dict:
    """Train ``config.workload`` for warm-up + measured steps; returns the result dict (the
    JSON written to ``config.result_json``). Under ``torchrun`` (``WORLD_SIZE`` > 1) this rank
    joins a DDP process group (NCCL on GPUs, Gloo on CPUs); the returned dict of rank 0 holds
    every rank's step times under ``ranks``."""
    if isinstance(config, dict):
        config = RunConfig(**config)
    config.validate()
    spec = REGISTRY[config.workload]
    torch = _import_torch()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = _resolve_device(torch, config.device, local_rank)
    cuda = device.type == "cuda"
    if config.precision == "amp" and not cuda:
        raise InputError("--precision amp (fp16 + GradScaler) needs a CUDA device; use bf16 on CPUs")
    batch_size = config.batch_size or spec.presets[config.preset].batch_size
    dist = None
    if world > 1:
        import torch.distributed as dist

        dist.init_process_group("nccl" if cuda else "gloo")
    try:
        result = _train(torch, dist, config, spec, device, batch_size, world, rank, local_rank)
        if dist is not None:
            # Free the DDP model now, while the interpreter and the process group are whole: its
            # reducer holds all-reduce futures with Python callbacks (the NVTX comm hook) that
            # Gloo's threads would otherwise release during interpreter shutdown. Then every rank
            # gets here before any tears Gloo down: a rank that exits while its peer's Gloo
            # threads are still connected can abort ("terminate called without an active
            # exception", seen intermittently with 2 CPU ranks). Only on success: after an error
            # the peers may be inside another collective.
            gc.collect()
            dist.barrier()
        return result
    finally:
        if dist is not None and dist.is_initialized():
            dist.destroy_process_group()


def _train(torch, dist, config, spec, device, batch_size, world, rank, local_rank) -> dict:
    cuda = device.type == "cuda"
    if cuda:
        torch.backends.cudnn.benchmark = True
    started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    ml = _mlperflog.open_log(config.mllog, rank)
    ml.begin(spec.name, world, device.type)
    torch.manual_seed(config.seed)  # same initial weights on every rank
    task = spec.build(config.preset, batch_size, device)
    model = task.model.to(device)
    channels_last = bool(config.channels_last and task.convolutional)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    if dist is not None:
        from torch.nn.parallel import DistributedDataParallel as DDP

        model = DDP(model, device_ids=[local_rank] if cuda else None, **task.ddp_kwargs)
        model.register_comm_hook(None, _nvtx_allreduce_hook)
    optimizer = task.optimizer(model.parameters())
    fwd_model = torch.compile(model) if config.compile else model
    scaler = torch.amp.GradScaler("cuda") if config.precision == "amp" else None
    dtype = {"amp": torch.float16, "bf16": torch.bfloat16}.get(config.precision)
    gen = torch.Generator(device=device)
    gen.manual_seed(config.seed * 1_000_003 + rank)  # different data on every rank, reproducible

    def autocast():
        return torch.autocast(device.type, dtype=dtype) if dtype else contextlib.nullcontext()

    sync = torch.cuda.synchronize if cuda else (lambda: None)
    total = config.warmup_steps + config.steps
    prof = _torch_profiler(torch, cuda, config.profile_memory) if config.torch_profile else None
    sampler = None  # host CPU time per thread while the torch profiler records (cpusample.py)
    nvtx_range = _annotate.nvtx_range if prof is None else _recorded_range(torch)
    step_ns, losses = [], []
    model.train()
    ml.run_start(batch_size * world)
    for i in range(total):
        if i == config.warmup_steps:  # the measured steps start: profilers' capture range
            backend().push(MEASURE)
            if cuda:
                torch.cuda.profiler.start()
        if prof is not None and i == config.warmup_steps:
            from tracekit.workloads.cpusample import CpuSampler

            prof.start()  # measured steps only
            sampler = CpuSampler().start()
        t0 = time.perf_counter_ns()
        with nvtx_range(step_message(i, i < config.warmup_steps)):
            with nvtx_range("data"):
                batch = task.make_batch(gen)
                if channels_last:
                    batch = (batch[0].contiguous(memory_format=torch.channels_last),) + tuple(batch[1:])
            with nvtx_range("forward"), autocast():
                loss = task.loss(fwd_model, batch)
            with nvtx_range("backward"):
                (scaler.scale(loss) if scaler else loss).backward()
            with nvtx_range("optimizer"):
                if scaler:
                    scaler.step(optimizer)
                    scaler.update()
                else:
                    optimizer.step()
                optimizer.zero_grad(set_to_none=True)
            sync()
        # read after the step range has closed (and t0 before it opened), so the runner's time
        # of a step always contains the trace's: the difference is the range's own push and pop,
        # which a loaded machine can stretch, never a step boundary drawn inside the range
        step_ns.append(time.perf_counter_ns() - t0)
        losses.append(float(loss.detach().float()))
    if cuda:
        torch.cuda.profiler.stop()
    backend().pop()  # MEASURE
    if prof is not None:
        sampler.stop()
        prof.stop()
        Path(config.torch_profile).mkdir(parents=True, exist_ok=True)
        prof.export_chrome_trace(str(Path(config.torch_profile) / f"rank{rank}.json"))

    ml.run_stop(step_ns, config.warmup_steps, batch_size * world, losses)
    return _result(torch, dist, config, spec, device, batch_size, world, rank,
                   step_ns=step_ns, losses=losses, channels_last=channels_last, started=started,
                   sampler=sampler)


def _result(torch, dist, config, spec, device, batch_size, world, rank, *, step_ns, losses,
            channels_last, started, sampler) -> dict:
    """The run's result (every rank's step times gathered), written to ``result_json``."""
    env = environment(torch, device)
    measured = step_ns[config.warmup_steps:]
    samples_per_step = batch_size * world
    per_rank = {"rank": rank, "pid": os.getpid(), "device": str(device), "device_name": env["device_name"],
                "hostname": env["host"]["hostname"], "step_wall_ns": step_ns, "losses": losses}
    ranks = [per_rank]
    if dist is not None:
        ranks = [None] * world
        dist.all_gather_object(ranks, per_rank)
    result = {
        "format": RESULT_FORMAT,
        "workload": spec.name, "suite": spec.suite, "task": spec.task, "preset": config.preset,
        "precision": config.precision, "channels_last": channels_last, "compile": config.compile,
        "device": str(device), "device_type": device.type, "seed": config.seed,
        "batch_size": batch_size, "batch_unit": spec.sample, "world_size": world, "rank": rank,
        "ddp_backend": None if dist is None else dist.get_backend(),
        "steps": config.steps, "warmup_steps": config.warmup_steps,
        "samples_per_step": samples_per_step,
        "shapes": spec.presets[config.preset].shapes,
        "step_wall_ns": step_ns,
        "losses": losses,
        "mean_step_ns": sum(measured) / len(measured),
        "samples_per_s": samples_per_step * len(measured) / (sum(measured) / 1e9) if sum(measured) else None,
        "losses_finite": all(math.isfinite(v) for v in losses),
        "nvtx_backend": backend().name,
        "ranks": ranks,
        "started_at": started,
        "command": config.command or [sys.executable, *sys.argv],
        "threads": torch.get_num_threads(),
        "cpu_samples": None if sampler is None else sampler.rows(),
        **env,
    }
    if config.result_json:
        path = config.result_json
        if "{rank}" in path:
            _write_json(Path(path.replace("{rank}", str(rank))), result)
        elif rank == 0:
            _write_json(Path(path), result)
    return result
