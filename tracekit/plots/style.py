"""What every tracekit figure shares: matplotlib set-up (Agg, no LaTeX, no mathtext on trace
text), the colours of GPU-time categories and idle causes, unit-aware axis formatters, titles
naming the run and GPU, and writing (atomically to a file, or as base64 PNG for HTML)."""

from __future__ import annotations

import base64
import io
import os
from pathlib import Path

from tracekit.errors import InputError, ToolNotFoundError, one_line

# GPU time categories (plot kernels, utilization) and idle causes (plot idle, gpu_idle query)
CATEGORY_COLORS = {"compute": "#4c72b0", "nccl": "#dd8452", "memcpy": "#55a868", "memset": "#8c8c8c"}
CATEGORY_LABELS = {"compute": "compute kernels", "nccl": "NCCL kernels", "memcpy": "memcpy", "memset": "memset"}
IDLE_COLORS = {"host": "#c44e52", "sync": "#8172b3", "copy": "#55a868", "other": "#ccb974"}
IDLE_LABELS = {"host": "host (launch not issued)", "sync": "sync (host waited on the GPU)",
               "copy": "copy (host in a copy)", "other": "other (work queued, not started)"}
PHASE_COLORS = {"data": "#8c8c8c", "forward": "#4c72b0", "backward": "#dd8452", "optimizer": "#55a868",
                "comm": "#c44e52", "gpu_busy": "#8172b3"}


def pyplot():
    """matplotlib.pyplot with the Agg backend and tracekit's rc settings; raises
    :class:`ToolNotFoundError` without matplotlib."""
    try:
        import matplotlib
    except ImportError:
        raise ToolNotFoundError("plots need matplotlib: pip install 'tracekit[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"text.usetex": False, "axes.titlesize": 10, "axes.labelsize": 9,
                         "xtick.labelsize": 8, "ytick.labelsize": 8, "legend.fontsize": 7,
                         "figure.dpi": 110, "savefig.dpi": 110, "axes.grid": False})
    return plt


def text(s, limit: int = 1000) -> str:
    """Trace text (kernel, range, run names) safe for matplotlib: control characters shown as
    escapes (an SVG with one is not XML), cut at ``limit`` characters and counted
    (:func:`tracekit.labels.label`), and '$' escaped (it would start mathtext, and an unbalanced
    one raises); other characters are drawn as they are."""
    from tracekit.labels import label

    return label(s, limit).replace("$", r"\$") if s is not None else ""


def short(name: str | None, width: int = 48) -> str:
    """A kernel name shortened for a label: the base name (no templates or parameter list) of a
    demangled name, cut to ``width`` characters with an ellipsis; escaped (:func:`text`)."""
    s = name or "?"
    try:
        from tracekit.collectors.ncu import base_name

        s = base_name(s) or s
    except ImportError:  # pragma: no cover - the layout move of issue 13
        pass
    s = s if len(s) <= width else s[: width - 1] + "…"
    return text(s)


def kernel_labels(names: list[str | None], width: int = 60) -> list[str]:
    """Labels for a list of kernel names: the base name (:func:`short`), or, where two names
    share a base name, the full name cut in the middle so the labels tell them apart; escaped."""
    bases = [short(n, width) for n in names]
    out = []
    for n, b in zip(names, bases):
        if bases.count(b) > 1 and n:
            full = n.removeprefix("void ")
            half = (width - 1) // 2
            b = text(full if len(full) <= width else full[:half] + "…" + full[-half:])
        out.append(b)
    return out


def time_unit(max_ns: float) -> tuple[float, str]:
    """(divisor, unit) so that values up to ``max_ns`` read well: ns, µs, ms or s."""
    for div, unit in ((1e9, "s"), (1e6, "ms"), (1e3, "µs")):
        if max_ns >= 2 * div:
            return div, unit
    return 1.0, "ns"


def run_title(what: str, runs: list[str], gpus: list[str]) -> str:
    """'WHAT — run a, b · GPU NVIDIA H100' (escaped); the GPU part says when the run did not
    record it."""
    r = ", ".join(runs[:3]) + (f" and {len(runs) - 3} more" if len(runs) > 3 else "")
    g = ", ".join(sorted(set(gpus))) if gpus else "GPU model not recorded"
    return text(f"{what} — {'run' if len(runs) == 1 else 'runs'} {r} · {g}")


def gpu_names(eng) -> list[str]:
    """GPU product names the runs record (devices table, via the timeline_names query), and
    ``model not recorded in N run(s)`` when some runs record none while others do (a title naming
    only the V100 of two runs, one of them on H100s, would be wrong)."""
    rows = [r for r in eng.query("timeline_names").to_pylist() if r["kind"] == "device" and r["name"]]
    names = sorted({r["name"] for r in rows})
    missing = len({r.run_id for r in eng.runs} - {r["run_id"] for r in rows})
    if names and missing:
        names.append(f"model not recorded in {missing} run{'s' if missing > 1 else ''}")
    return names


def single(run_dirs):
    """The run folder when there is exactly one (named in error messages), else None."""
    return run_dirs[0] if len(run_dirs) == 1 else None


def gpu_label(rank, pid, device_id, *, many_pids: bool) -> str:
    """Row label of one GPU: 'rank 3', or 'GPU 0' (one process) / 'pid 111 GPU 0'."""
    if rank is not None:
        return f"rank {rank}" + (f" GPU {device_id}" if many_pids else "")
    return f"pid {pid} GPU {device_id}" if many_pids else f"GPU {device_id}"


def save(fig, output: str | os.PathLike, protect=()) -> Path:
    """Write ``fig`` to ``output`` (format from the suffix: png, svg, pdf) by the rules of
    :func:`tracekit.outfile.write_output` (through a temporary file renamed over it, devices and
    pipes written through, a missing parent folder made, nothing inside the run folders in
    ``protect``); closes the figure. :class:`InputError` when it cannot be written."""
    from tracekit.outfile import write_output

    plt = pyplot()
    out = Path(output)
    fmt = out.suffix.lstrip(".").lower() or "png"
    try:
        if fmt not in ("png", "svg", "pdf"):
            raise InputError("a plot file must end in .png, .svg or .pdf", path=out)
        write_output(out, lambda f: fig.savefig(f, format=fmt), protect, create_parent=True)
    except ValueError as exc:
        raise InputError(f"cannot write the plot: {one_line(exc)}", path=out) from None
    finally:
        plt.close(fig)
    return out


def png_base64(fig, dpi: int = 90) -> str:
    """``fig`` as a base64 PNG (for an HTML <img>); closes the figure."""
    plt = pyplot()
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    finally:
        plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")
