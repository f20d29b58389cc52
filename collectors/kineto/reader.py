"""Streaming reader of PyTorch profiler (Kineto) Chrome-trace JSON files (plain or gzip).

- :func:`sniff_bytes` recognizes a trace from its first bytes (gzip magic, JSON object with a
  ``traceEvents`` key).
- :class:`TraceStream` yields the events of ``traceEvents`` one dict at a time with ijson's C
  backend (memory does not grow with the file) and, after the last event, gives the trace's
  top-level metadata (``deviceProperties``, ``distributedInfo``, ``baseTimeNanoseconds`` ...),
  which Kineto writes partly before and partly after ``traceEvents``. The metadata is recovered
  from the first and last few MiB of the decompressed text, so the file is read once.
- :func:`to_ns` converts a Kineto timestamp or duration (microseconds as an int, a JSON number
  with a fraction, or a string) to int64 nanoseconds exactly: numbers with a fraction arrive as
  :class:`decimal.Decimal` (ijson never goes through binary floats), so ``4458676522690.655`` us
  is exactly ``4458676522690655`` ns.
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from collections import deque
from decimal import Decimal, InvalidOperation
from pathlib import Path

import ijson

from tracekit.collectors.kineto.guard import StreamGuard
from tracekit.collectors.kineto.surrogates import SurrogateFixer
from tracekit.errors import InputError

GZIP_MAGIC = b"\x1f\x8b"
# bytes handed to ijson per read: its C backend builds every event of a chunk before yielding
# the first, so small chunks keep those objects in the CPU caches (parsing the 174 MB benchmark
# trace: 3.5-4.0 s with 1 MiB chunks, 2.6 s with 64 KiB, 2.6-2.8 s with 16 KiB)
CHUNK_BYTES = 1 << 16
HEAD_BYTES = 8 << 20
TAIL_BYTES = 8 << 20
_SNIFF_BYTES = 1 << 20
_THOUSAND = Decimal(1000)


def _open_raw(path: Path):
    with open(path, "rb") as f:
        magic = f.read(2)
    return gzip.open(path, "rb") if magic == GZIP_MAGIC else open(path, "rb")


def sniff_bytes(path: Path) -> bool:
    """True when ``path`` (plain or gzip) starts as a JSON object holding ``"traceEvents"`` in
    its first MiB, or starts as a JSON object and is named ``*.json`` / ``*.json.gz``."""
    try:
        with open(path, "rb") as f:
            raw = f.read(_SNIFF_BYTES)
        if raw[:2] == GZIP_MAGIC:  # decompressed as far as it goes: a cut file still shows its start
            head = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(raw, _SNIFF_BYTES)
        else:
            head = raw
    except (OSError, zlib.error):
        return False
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not text.startswith(b"{"):
        return False
    if b'"traceEvents"' in head:
        return True
    name = path.name.lower()
    return name.endswith(".json") or name.endswith(".json.gz")


def to_ns(value) -> int | None:
    """Kineto microseconds (int, Decimal, numeric string, or float) -> int ns, rounded half to
    even below 1 ns. ``None`` for a missing value; :class:`ValueError` for a non-number."""
    t = type(value)
    if t is int:
        return value * 1000
    if t is Decimal:
        return int((value * _THOUSAND).to_integral_value())
    if value is None:
        return None
    if t is str:
        try:
            d = Decimal(value.strip())
        except InvalidOperation:
            raise ValueError(f"not a timestamp: {value!r}") from None
        if not d.is_finite():
            raise ValueError(f"not a timestamp: {value!r}")
        return int((d * _THOUSAND).to_integral_value())
    if t is float:
        return int((Decimal(repr(value)) * _THOUSAND).to_integral_value())
    if t is bool:
        raise ValueError(f"not a timestamp: {value!r}")
    raise ValueError(f"not a timestamp: {value!r}")


# --- top-level metadata from the head and the tail of the text ----------------------------

_decoder = json.JSONDecoder(parse_float=Decimal)
_END_WS = re.compile(r"\s*\Z")
_AFTER_ARRAY = re.compile(r"\]\s*(?:,\s*\"|\}\s*\Z)")


def head_metadata(head: bytes) -> dict:
    """Top-level keys written before ``"traceEvents"`` (``{}`` when none or not found)."""
    text = head.decode("utf-8", errors="replace")
    start = 0
    while True:
        pos = text.find('"traceEvents"', start)
        if pos < 0:
            return {}
        cand = text[:pos].rstrip()
        if cand.endswith(","):
            cand = cand[:-1]
        try:
            obj = json.loads(cand + "}", parse_float=Decimal)
            if isinstance(obj, dict):
                return obj
        except ValueError:
            pass
        start = pos + 1


def tail_metadata(tail: bytes) -> dict | None:
    """Top-level keys written after the ``traceEvents`` array. ``{}`` when the array closes the
    object; ``None`` when the end of the array is not within ``tail``.

    The end of the array is the first ``]`` in ``tail`` after which the rest of the text is
    exactly the remaining members of the top-level object: ``, "key": value, ... }``. An array
    inside an event (``"grid": [1, 1, 1], ...``) is followed by the rest of that event and more
    events, so it never parses that way.
    """
    text = tail.decode("utf-8", errors="replace")
    for m in _AFTER_ARRAY.finditer(text):
        end_of_match = m.end()
        if text[end_of_match - 1] == '"':
            if text.startswith('traceEvents"', end_of_match):
                continue  # an array before traceEvents (e.g. deviceProperties)
            # ] , "key": ... }  -> parse the members as an object starting after the comma
            comma = text.index(",", m.start())
            try:
                obj, end = json.decoder.JSONObject(
                    (text, comma + 1), True, _decoder.scan_once, None, None, {})
            except (ValueError, IndexError):
                continue
            if _END_WS.match(text, end) and "traceEvents" not in obj:
                return obj
        else:
            return {}
    return None


class TraceStream:
    """Iterate the events of one Kineto trace; then read :attr:`metadata`.

    Usage::

        ts = TraceStream(path, on_bytes=advance)
        for event in ts:          # dicts, numbers with a fraction as Decimal
            ...
        ts.metadata               # top-level keys other than traceEvents

    Raises :class:`InputError` for a file that is not JSON, is truncated, or has no
    ``traceEvents`` array.
    """

    def __init__(self, path: Path, on_bytes=None):
        self.path = Path(path)
        self.on_bytes = on_bytes or (lambda n: None)
        self.metadata: dict = {}
        self.metadata_complete = True
        self.events_seen = 0
        self.guard = StreamGuard(self.path)  # .truncated: strings cut at MAX_STRING_BYTES
        self.surrogates = SurrogateFixer()  # .replaced: lone surrogate escapes made U+FFFD

    def __iter__(self):
        path = self.path
        tap = None
        try:
            with _open_raw(path) as f:
                tap = _Tap(f, self.on_bytes, self.guard, self.surrogates)
                for event in ijson.items(tap, "traceEvents.item", use_float=False, buf_size=CHUNK_BYTES):
                    self.events_seen += 1
                    yield event
                while tap.read(CHUNK_BYTES):  # the rest after traceEvents, for the tail
                    pass
        except ijson.IncompleteJSONError as exc:
            raise InputError(f"truncated or invalid JSON ({_short(exc)})", path=path) from None
        except EOFError:
            raise InputError("the gzip file is truncated (it ends before its compressed stream "
                             "does); copy or write it again", path=path) from None
        except ijson.JSONError as exc:
            raise InputError(f"not valid JSON ({_short(exc)})", path=path) from None
        except UnicodeDecodeError as exc:  # a lone UTF-16 surrogate escape ("\udfff") in a string
            raise InputError(f"text that is not Unicode in the JSON (a lone surrogate escape such "
                             f"as \\udfff?): {_short(exc)}", path=path) from None
        except (OSError, zlib.error) as exc:
            raise InputError(f"cannot read the trace ({_short(exc)})", path=path) from None
        head = bytes(tap.head)
        meta = head_metadata(head)
        if not meta and b'"traceEvents"' not in head and self.events_seen == 0:
            raise InputError("JSON without a traceEvents array: not a PyTorch profiler (Kineto) trace",
                             path=path)
        if self.events_seen == 0 and re.search(rb'"traceEvents"\s*:\s*[^\[\s]', head):
            raise InputError("traceEvents is not an array: not a PyTorch profiler (Kineto) trace",
                             path=path)
        after = tail_metadata(b"".join(tap.tail))
        if after is None:
            self.metadata_complete = False
        else:
            meta.update(after)
        self.metadata = meta


class _Tap:
    """File wrapper handed to ijson: keeps the first HEAD_BYTES and the last TAIL_BYTES (or a
    little more) of the decompressed text and reports compressed bytes read to ``on_bytes``."""

    def __init__(self, f, on_bytes, guard=None, surrogates=None):
        self.f = f
        self.guard = guard  # StreamGuard: string-length and depth limits (kineto/guard.py)
        self.surrogates = surrogates  # SurrogateFixer, before the guard (kineto/surrogates.py)
        self.raw = getattr(f, "fileobj", None) or f
        self.on_bytes = on_bytes
        self.pos = self.raw.tell()
        self.head = bytearray()
        self.tail: deque[bytes] = deque()
        self.tail_len = 0

    def read(self, n=-1):
        while True:
            chunk = self.f.read(n)
            if self.surrogates is not None:
                chunk = self.surrogates.feed(chunk) if chunk else self.surrogates.flush()
            if not chunk or self.guard is None:
                break
            chunk = self.guard.feed(chunk)
            if chunk:  # all of it may be the skipped rest of a cut string: read on
                break
        if chunk:
            if len(self.head) < HEAD_BYTES:
                self.head += chunk[: HEAD_BYTES - len(self.head)]
            self.tail.append(chunk)
            self.tail_len += len(chunk)
            while self.tail_len - len(self.tail[0]) >= TAIL_BYTES:
                self.tail_len -= len(self.tail.popleft())
            pos = self.raw.tell()
            self.on_bytes(pos - self.pos)
            self.pos = pos
        return chunk


def _short(exc: Exception) -> str:
    msg = exc.args[0] if len(exc.args) == 1 and isinstance(exc.args[0], bytes) else str(exc)
    if isinstance(msg, bytes):  # yajl reports bytes: "lexical error: ...\n <context>"
        msg = msg.decode("utf-8", "replace")
    return msg.strip().splitlines()[0][:200] if msg.strip() else type(exc).__name__
