"""Unpickle plain data only, in a process of its own with a memory limit (standard library only,
run as a script: ``python safe_pickle.py IN OUT LIMIT_BYTES``).

Two hazards of a hostile pickle are handled here:

- code execution: :class:`NoGlobals` refuses every global (GLOBAL, STACK_GLOBAL, INST, OBJ and
  the EXT opcodes all resolve through ``find_class``) and every persistent ID, so no callable can
  be reached and no ``__reduce__`` runs;
- memory: a PUT / LONG_BINPUT opcode with a huge memo index makes CPython's C unpickler grow and
  zero its memo table to twice that index (a 1 KB file asked for tens of GB, measured), and
  nesting or repetition can build large objects from small input. The load runs under
  ``RLIMIT_AS`` = LIMIT_BYTES, so it fails with MemoryError instead of exhausting the machine.

The loaded object is written to OUT with :func:`pickle.dump` (plain data, memoized in order)
for the parent process, which reads it with :class:`NoGlobals` too. Exit status: 0 loaded;
3 refused (a global or persistent ID); 4 unreadable (truncated, damaged); 5 over the memory
limit. The reason is the last line on stderr.
"""

from __future__ import annotations

import io
import pickle
import sys

REFUSED, UNREADABLE, TOO_BIG = 3, 4, 5


class Refused(pickle.UnpicklingError):
    """The pickle names something plain data never holds."""


class NoGlobals(pickle.Unpickler):
    """An unpickler for plain data: dicts, lists, tuples, sets, strings, bytes, numbers."""

    def find_class(self, module, name):
        raise Refused(f"it names {str(module)[:60]}.{str(name)[:60]}, and a memory snapshot "
                      "holds plain data only; refused without running it")

    def persistent_load(self, pid):
        raise Refused("it uses persistent IDs, which a memory snapshot does not")


def main(argv: list[str]) -> int:
    src, dst, limit = argv[0], argv[1], int(argv[2])
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        with open(src, "rb") as f:
            obj = NoGlobals(io.BufferedReader(f, 1 << 20)).load()
        with open(dst, "wb") as f:
            pickle.dump(obj, f, protocol=4)
    except Refused as exc:
        print(" ".join(str(exc).split()), file=sys.stderr)
        return REFUSED
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
