"""Unpickle a memory snapshot in a process of its own and hand back its entries as flat columns
(standard library only, run as a script: ``python safe_pickle.py IN OUT LIMIT_BYTES CPU_S PPID``).

Three hazards of a hostile pickle are handled here, never in the parent:

- code execution: :class:`NoGlobals` refuses every global (GLOBAL, STACK_GLOBAL, INST, OBJ and
  the EXT opcodes all resolve through ``find_class``) and every persistent ID, so no callable can
  be reached and no ``__reduce__`` runs;
- memory: a PUT / LONG_BINPUT opcode with a huge memo index makes CPython's C unpickler grow and
  zero its memo table to twice that index (a 1 KB file asked for tens of GB, measured), and
  nesting or repetition can build large objects from small input. The load runs under
  ``RLIMIT_AS`` = LIMIT_BYTES, so it fails with MemoryError instead of exhausting the machine;
- time: plain data can still be a DAG of shared references (``x = (x, x)`` 40 times: 2^40
  leaves in a few hundred bytes) whose hash or ``str()`` never ends; as a dict key it is hashed
  by the unpickler itself. The process runs under ``RLIMIT_CPU`` = CPU_S (killed by SIGXCPU),
  gets SIGKILL when its parent dies (``PR_SET_PDEATHSIG``), and :func:`flatten` never hashes,
  prints or walks a value it has not checked to be text or a number.

:func:`flatten` reads only what ``allocator_events`` needs, with bounded work per entry: an
entry's ``action`` must be text (or missing), a frame's ``line`` an int64 (or missing) and its
``name`` text (or missing), else the file is refused; at most :data:`FRAMES_INSPECTED` frames of
an entry's stack and :data:`FRAME_CHARS` characters of each name are looked at, and a stack
shared by several entries is read once. OUT gets the columns as a pickle of lists of ints,
strings and None. Exit status: 0 read; 3 refused (a global or persistent ID); 4 unreadable
(truncated, damaged); 5 over the memory limit; 6 not a memory snapshot. The reason is the last
line on stderr.
"""

from __future__ import annotations

import io
import os
import pickle
import sys

REFUSED, UNREADABLE, TOO_BIG, NOT_SNAPSHOT = 3, 4, 5, 6
FRAMES_INSPECTED = 1000
FRAME_CHARS = 1000
ACTIONS = {"alloc": "alloc", "free_requested": "free", "free_completed": "free_completed",
           "segment_alloc": "segment_alloc", "segment_map": "segment_alloc",
           "segment_free": "segment_free", "segment_unmap": "segment_free", "oom": "oom"}
# distinct "action X" skip reasons counted by name; more are counted together
_COUNT_KEYS = 50
COLUMNS = ("device", "time_us", "action", "size", "addr", "stream", "frame")


class Refused(pickle.UnpicklingError):
    """The pickle names something plain data never holds."""


class NotSnapshot(ValueError):
    """Plain data, but not in the layout of a memory snapshot."""


class NoGlobals(pickle.Unpickler):
    """An unpickler for plain data: dicts, lists, tuples, sets, strings, bytes, numbers."""

    def find_class(self, module, name):
        raise Refused(f"it names {str(module)[:60]}.{str(name)[:60]}, and a memory snapshot "
                      "holds plain data only; refused without running it")

    def persistent_load(self, pid):
        raise Refused("it uses persistent IDs, which a memory snapshot does not")


def _int(v):
    return v if type(v) is int and -(2**63) <= v < 2**63 else None


def _kind(v) -> str:
    return "text" if type(v) is str else type(v).__name__


def _text(v, where: str) -> str | None:
    """``v`` cut at :data:`FRAME_CHARS` characters, None if missing; anything else refused."""
    if v is None or type(v) is str:
        return v if v is None or len(v) <= FRAME_CHARS else v[:FRAME_CHARS]
    raise NotSnapshot(f"{where} is a {_kind(v)}, not text")


def _frame(frames, where: str) -> str | None:
    """The innermost frame outside torch's own files (else the innermost) as 'file:line name',
    from the first :data:`FRAMES_INSPECTED` frames."""
    if type(frames) is not list:
        return None
    pick = first = None
    for f in frames[:FRAMES_INSPECTED]:
        if type(f) is not dict or type(f.get("filename")) is not str:
            continue
        head = f["filename"][:FRAME_CHARS]
        if first is None:
            first = f
        if "/torch/" not in head and not head.startswith("??"):
            pick = f
            break
    pick = pick or first
    if pick is None:
        return None
    line = pick.get("line")
    if line is not None and _int(line) is None:
        what = "an int beyond int64" if type(line) is int else f"a {_kind(line)}"
        raise NotSnapshot(f"{where}: a frame's line is {what}, not a line number")
    name = _text(pick.get("name"), f"{where}: a frame's name")
    return f"{pick['filename'][:FRAME_CHARS]}:{line} {name}"[:FRAME_CHARS]


def _count(counts: dict, key: str) -> None:
    if key not in counts and len(counts) >= _COUNT_KEYS and key.startswith("action "):
        key = "action (other)"
    counts[key] = counts.get(key, 0) + 1


def _entry(e, d: int, i: int, cols: dict, counts: dict, stacks: dict) -> None:
    if type(e) is not dict:
        _count(counts, "entry not a dict")
        return
    a = e.get("action")
    if a is not None and type(a) is not str:
        raise NotSnapshot(f"device_traces[{d}][{i}]: the action is a {_kind(a)}, not text")
    act = ACTIONS.get(a) if a is not None else None
    if act is None:
        _count(counts, f"action {a if a is None else a[:40]}")
        return
    t, size = _int(e.get("time_us")), _int(e.get("size"))
    if t is None or size is None or size < 0 or not -(2**53) < t < 2**53:
        _count(counts, "entry without time_us or size")
        return
    frames = e.get("frames")
    key = id(frames)  # the loaded object keeps every list alive: ids are not reused
    if key not in stacks:
        stacks[key] = _frame(frames, f"device_traces[{d}][{i}]")
    cols["time_us"].append(t)
    cols["action"].append(act)
    cols["size"].append(size)
    cols["addr"].append(None if act == "oom" else _int(e.get("addr")))
    cols["stream"].append(_int(e.get("stream")))
    cols["frame"].append(stacks[key])


def flatten(obj) -> dict:
    """The snapshot's entries as columns (:data:`COLUMNS`), skip counts, and per device the
    segments' allocated and reserved totals. :class:`NotSnapshot` for another layout."""
    if type(obj) is not dict or type(obj.get("segments")) is not list \
            or type(obj.get("device_traces")) is not list:
        raise NotSnapshot("a pickle but not a PyTorch memory snapshot (a dict with 'segments' and "
                          "'device_traces' lists, as torch.cuda.memory._dump_snapshot writes)")
    end_alloc: dict = {}
    end_res: dict = {}
    for s in obj["segments"]:
        d = _int(s.get("device")) if type(s) is dict else None
        if d is not None:
            end_alloc[d] = end_alloc.get(d, 0) + (_int(s.get("allocated_size")) or 0)
            end_res[d] = end_res.get(d, 0) + (_int(s.get("total_size")) or 0)
    if any(abs(v) >= 2**63 for v in (*end_alloc.values(), *end_res.values())):
        raise NotSnapshot("the segments' sizes on one device add up to 2^63 bytes or more")
    cols: dict = {k: [] for k in COLUMNS}
    counts: dict = {}
    stacks: dict = {}
    devices = []
    for d, trace in enumerate(obj["device_traces"]):
        if type(trace) is not list or not trace:
            continue
        devices.append(d)
        n0 = len(cols["size"])
        for i, e in enumerate(trace):
            _entry(e, d, i, cols, counts, stacks)
        cols["device"].extend([d] * (len(cols["size"]) - n0))
        # every total of the device stays an int64 (sizes are each below 2^63, their sum need not)
        if sum(cols["size"][n0:]) + max(end_alloc.get(d, 0), end_res.get(d, 0)) >= 2**63:
            raise NotSnapshot(f"device_traces[{d}]: the sizes of its entries add up to 2^63 bytes or more")
    return {"columns": cols, "counts": counts, "devices": devices, "segments": len(obj["segments"]),
            "end_alloc": end_alloc, "end_reserved": end_res}


def _die_with_parent(parent: int) -> None:
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the parent's own wait remains
        return
    if os.getppid() != parent:  # the parent died before the call above
        os._exit(1)


def main(argv: list[str]) -> int:
    src, dst, limit, cpu_s, parent = argv[0], argv[1], int(argv[2]), int(argv[3]), int(argv[4])
    import resource

    _die_with_parent(parent)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
    if hard != resource.RLIM_INFINITY:
        cpu_s = min(cpu_s, max(hard - 5, 1))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 5))
    try:
        with open(src, "rb") as f:
            obj = NoGlobals(io.BufferedReader(f, 1 << 20)).load()
        out = flatten(obj)
        del obj
        with open(dst, "wb") as f:
            pickle.dump(out, f, protocol=4)
    except Refused as exc:
        print(" ".join(str(exc).split()), file=sys.stderr)
        return REFUSED
    except NotSnapshot as exc:
        print(" ".join(str(exc).split()), file=sys.stderr)
        return NOT_SNAPSHOT
    except MemoryError:
        print(f"unpickling it needs more than {limit >> 20} MiB of memory (a damaged or hostile "
              "file: a snapshot needs a few times its size)", file=sys.stderr)
        return TOO_BIG
    except (pickle.UnpicklingError, EOFError, ValueError, IndexError, KeyError, TypeError,
            OverflowError, RecursionError, AttributeError, UnicodeDecodeError) as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        if isinstance(exc, EOFError) or "truncated" in reason:
            reason = "it is cut short (truncated: copy or write it again)"
        print(reason, file=sys.stderr)
        return UNREADABLE
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
