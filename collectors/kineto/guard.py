"""Limits on Kineto JSON text, applied to the byte stream before the JSON parser sees it.

ijson's C backend (yajl) re-scans a token that spans its read chunks from the token's start on
every new chunk, so a single huge string costs time quadratic in its length (8/16/32 MiB names:
3.5/5.0/11.1 s, a 1 GiB name never finished); and its item builder keeps one path prefix per open
container, so memory grows with the square of the nesting depth (10,000 levels: 367 MB; 100,000
levels were killed at 22.9 GB). :class:`StreamGuard` bounds both, in one pass over the text with
C-speed byte operations (``bytes.translate``, ``find``, one regex for chunks with escapes):

- a string value longer than :data:`MAX_STRING_BYTES` is cut there (at a UTF-8 character and
  escape boundary) and ends in ``…``; the rest of it is skipped, so the parser never holds more
  than that. :attr:`StreamGuard.truncated` counts the strings cut (the collector warns with it);
- containers nested deeper than :data:`MAX_DEPTH` make the trace an
  :class:`~tracekit.errors.InputError` (exit 2) before the parser sees that part.

The guard tracks whether each chunk boundary falls inside a string (and after an unpaired
backslash) and the bracket depth outside strings; for text without backslashes a chunk costs a
``translate``, a ``replace`` and four ``count`` calls.
"""

from __future__ import annotations

import re

from tracekit.errors import InputError

MAX_STRING_BYTES = 1 << 20  # a kernel or operator name longer than 1 MiB is not a name
MAX_DEPTH = 1000  # Kineto events nest 3-5 levels; 1000 levels cost the parser ~4 MB
ELLIPSIS = "…".encode()
BOM = b"\xef\xbb\xbf"

_KEEP = b'[]{}"'
_DELETE = bytes(b for b in range(256) if b not in _KEEP)
# the rest of a string from a token boundary inside it: plain bytes and whole escapes, up to
# the closing quote (or a backslash whose escape the chunk cuts short)
_HIGH_SURROGATE = re.compile(rb'\\u[dD][89abAB][0-9a-fA-F]{2}')
_TOKENS = re.compile(rb'(?:[^"\\]++|\\u[0-9a-fA-F]{4}|\\[^u])*+', re.DOTALL)


class StreamGuard:
    """Feed the decompressed text chunk by chunk; :meth:`feed` returns what the parser may see."""

    def __init__(self, path, max_string: int = MAX_STRING_BYTES, max_depth: int = MAX_DEPTH):
        self.path = path
        self.max_string = max_string
        self.max_depth = max_depth
        self.in_string = False  # the last byte fed was inside a string value
        self.esc_skip = 0  # bytes of an escape the next chunk starts with (-1: unknown yet)
        self.open_len = 0  # bytes of the open string so far (when in_string)
        self.cutting = False  # the open string was cut: skip to its closing quote
        self.depth = 0
        self.truncated = 0  # strings cut
        self.offset = 0  # bytes fed so far
        self._end = 0

    def feed(self, chunk: bytes) -> bytes:
        out = []
        pos = 0
        if self.offset == 0 and chunk.startswith(BOM):  # a UTF-8 byte order mark: not JSON
            pos = len(BOM)
        n = len(chunk)
        self._end = self.offset + n
        while pos < n:
            if self.in_string:
                pos = self._string_part(chunk, pos, out)
                continue
            pos = self._outside_part(chunk, pos, out)
        self.offset += n
        return b"".join(out) if len(out) != 1 else out[0]

    # inside a string: find its end in this chunk, cut it past the limit
    def _string_part(self, chunk: bytes, pos: int, out: list) -> int:
        n = len(chunk)
        start = p = pos
        if self.esc_skip == -1:  # the last chunk ended in a backslash: \uXXXX or a 2-byte escape
            self.esc_skip = 5 if chunk[p] == 0x75 else 1
        take = min(self.esc_skip, n - p)
        p += take  # finish an escape begun in the last chunk: p is at a token boundary
        self.esc_skip -= take
        if self.esc_skip:
            end, closed = n, False
        else:
            end = _TOKENS.match(chunk, p).end()
            closed = end < n and chunk[end] == 0x22
            if not closed and end < n:  # an escape cut short by the end of the chunk
                rest = n - end
                self.esc_skip = -1 if rest == 1 else max(
                    0, (6 if chunk[end + 1] == 0x75 else 2) - rest)
                end = n
        part = end - start
        cut = None
        if not self.cutting and self.open_len + part > self.max_string:
            cut = _cut_point(chunk, p, start + self.max_string - self.open_len, end)
        if self.cutting:
            pass  # the rest of a cut string is skipped
        elif cut is None:
            out.append(chunk[start:end])
            self.open_len += part
        else:
            out.append(chunk[start:cut])
            out.append(ELLIPSIS)
            self.cutting = True
            self.truncated += 1
        if closed:
            out.append(b'"')
            self.in_string = self.cutting = False
            self.open_len = self.esc_skip = 0
            return end + 1
        return n

    # outside strings: pass through up to an unterminated string, checking the depth
    def _outside_part(self, chunk: bytes, pos: int, out: list) -> int:
        piece = chunk[pos:] if pos else chunk
        if b"\\" in piece:  # drop escaped backslashes, then escaped quotes: the rest is structure
            piece_n = piece.replace(b"\\\\", b"").replace(b'\\"', b"")
        else:
            piece_n = piece
        compact = piece_n.translate(None, _DELETE)  # only quotes and brackets are left
        if compact.count(b'"') % 2 == 0:  # every string opened here closes here
            self._depth(_fast_outside(compact))
            out.append(piece)
            return len(chunk)
        self._depth(_fast_outside(compact[:compact.rindex(b'"')]))  # the last quote opens
        opener = _raw_opener(chunk, pos)
        out.append(chunk[pos:opener + 1])
        self.in_string = True
        self.open_len = 0
        return opener + 1

    def _depth(self, outside: bytes) -> None:
        opens = outside.count(b"[") + outside.count(b"{")
        closes = outside.count(b"]") + outside.count(b"}")
        if self.depth + opens > self.max_depth:
            d = self.depth
            for b in outside:
                d += 1 if b in (0x5B, 0x7B) else -1
                if d > self.max_depth:
                    raise InputError(
                        f"JSON nested deeper than {self.max_depth} levels (before byte {self._end:,} "
                        "of the decompressed text): refused (a Kineto event nests 3 to 5 levels)",
                        path=self.path)
        self.depth += opens - closes


def _fast_outside(compact: bytes) -> bytes:
    """Brackets outside strings of compact text with whole strings and no backslash: quotes
    alternate open/close, so removing adjacent pairs keeps the structure."""
    outside = compact.replace(b'""', b"")
    return b"".join(outside.split(b'"')[0::2]) if b'"' in outside else outside


def _raw_opener(chunk: bytes, pos: int) -> int:
    """Position of the quote opening the string left open at the end of ``chunk[pos:]``: the
    last quote not escaped (preceded by an even run of backslashes)."""
    i = len(chunk)
    while True:
        q = chunk.rfind(b'"', pos, i)
        k = q
        while k > pos and chunk[k - 1] == 0x5C:
            k -= 1
        if (q - k) % 2 == 0:
            return q
        i = q


def _cut_point(chunk: bytes, p: int, want: int, end: int) -> int | None:
    """The first position at or after ``want`` (and ``p``, a token boundary) where a string can
    be cut: after a whole escape sequence (``\\n``, ``\\uXXXX``) and a whole UTF-8 character.
    None when there is none before ``end``."""
    want = max(want, p)
    e = _TOKENS.match(chunk, p, want).end()
    c = want if e >= want else e + (6 if e + 1 < len(chunk) and chunk[e + 1] == 0x75 else 2)
    if _HIGH_SURROGATE.match(chunk, c - 6) and chunk[c:c + 2] == b"\\u":
        c += 6  # keep a surrogate pair together
    while c < end and 0x80 <= chunk[c] < 0xC0:  # a UTF-8 continuation byte
        c += 1
    return c if c < end else None
