"""Lone UTF-16 surrogate escapes in Kineto JSON text, replaced before the parser sees them.

JSON writes a character outside the Basic Multilingual Plane as two ``\\uXXXX`` escapes, a high
surrogate (D800-DBFF) then a low one (DC00-DFFF). A trace whose text holds one half alone
(``"\\udfff"``: a name cut between the halves by the program that wrote it, or bytes decoded
with ``surrogateescape``) names no character, and ijson's decoder fails on it with
``UnicodeDecodeError``, which ended the whole file. :class:`SurrogateFixer` rewrites each lone
half as ``\\ufffd`` (the replacement character, the same 6 bytes), so the event keeps its place
and the rest of the trace reads; :attr:`SurrogateFixer.replaced` counts them (the collector
warns with it). Pairs are kept. A chunk without a surrogate escape costs one regex search.
"""

from __future__ import annotations

import re

# an escape is a backslash preceded by an even run of backslashes (``\\\\udfff`` is text)
_ANY = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile(
    rb"(?<!\\)((?:\\\\)*)\\u([dD][89abAB][0-9a-fA-F]{2})(\\u[dD][c-fC-F][0-9a-fA-F]{2})?"
    rb"|(?<!\\)((?:\\\\)*)\\u[dD][c-fC-F][0-9a-fA-F]{2}")
_HIGH = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}")
_HOLD = 12  # a pair of escapes is 12 bytes: a chunk's last 12 may begin one the next ends


class SurrogateFixer:
    """Feed the decompressed text chunk by chunk, then :meth:`flush` at its end."""

    def __init__(self):
        self.replaced = 0
        self._carry = b""

    def feed(self, chunk: bytes) -> bytes:
        if self._carry:
            chunk, self._carry = self._carry + chunk, b""
        chunk = self._hold(chunk)
        return _SURROGATE.sub(self._one, chunk) if _ANY.search(chunk) else chunk

    def flush(self) -> bytes:
        rest, self._carry = self._carry, b""
        return _SURROGATE.sub(self._one, rest) if _ANY.search(rest) else rest

    def _hold(self, chunk: bytes) -> bytes:
        """The chunk less a backslash run in its last bytes, which may begin an escape (or a
        pair) that the next chunk completes, and less a high surrogate escape just before it:
        that is kept back and fixed with the next chunk (holding back only changes where the
        chunks end, never the text)."""
        k = chunk.find(b"\\", max(0, len(chunk) - _HOLD))
        if k < 0:
            return chunk
        while k > 0 and chunk[k - 1] == 0x5C:
            k -= 1
        if k >= 6 and _HIGH.fullmatch(chunk, k - 6, k):  # the first half of a pair: held too
            k -= 6
            while k > 0 and chunk[k - 1] == 0x5C:
                k -= 1
        if k == 0 and len(chunk) > 2 * _HOLD:  # a long run of backslashes: not held for ever
            return chunk
        self._carry = chunk[k:]
        return chunk[:k]

    def _one(self, m: re.Match) -> bytes:
        if m.group(2) is not None:
            if m.group(3) is not None:
                return m.group(0)  # a pair
            self.replaced += 1
            return m.group(1) + b"\\ufffd"
        self.replaced += 1
        return m.group(4) + b"\\ufffd"
