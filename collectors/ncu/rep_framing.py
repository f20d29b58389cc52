"""Whether an ``.ncu-rep`` file ends where its own framing says it does.

``ncu_report`` loads a report cut short without complaint: a file cut anywhere in its first
blocks loads as a report of zero ranges, one cut later as the launches before the cut. The
file's framing tells a cut apart from a report that holds no launch. As read from the reports of
ncu 2020.1 to 2024.2 (``../shared/fixtures/ncu``): the magic ``NVR\\0``; a little-endian uint32
size and a file-header message of that size; then blocks, each a uint32 size, a block-header
message of that size (protocol buffers) whose field 5 (varint) is the size of the payload that
follows it. An intact report ends exactly after its last payload.
"""

from __future__ import annotations

import struct
from pathlib import Path

MAGIC = b"NVR\x00"
_PAYLOAD_FIELD = 5
_MAX_HEADER = 1 << 26  # a block header is a few hundred bytes; more is not this framing


def _varint(b: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        c = b[i]  # IndexError: cut inside the message
        i += 1
        value |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80 or shift > 63:
            return value, i


def _payload_size(header: bytes) -> int:
    """Field 5 of a block-header message (0 when absent); ValueError when it is no message."""
    i, size = 0, 0
    while i < len(header):
        key, i = _varint(header, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(header, i)
            if field == _PAYLOAD_FIELD:
                size = value
        elif wire == 2:
            n, i = _varint(header, i)
            i += n
        elif wire in (1, 5):
            i += 8 if wire == 1 else 4
        else:
            raise ValueError(f"wire type {wire}")
    if i != len(header):
        raise ValueError("a field runs past the message")
    return size


def cut_at(path: Path) -> str | None:
    """None when the report's blocks end exactly at the end of the file; else one line saying
    where the framing breaks (a size that runs past the end, or bytes that are no block header)."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        if f.read(4) != MAGIC:
            return f"it does not start with the report magic {MAGIC!r}"
        pos, blocks, what = 4, 0, "file header"
        while pos < size:
            raw = f.read(4)
            if len(raw) < 4:
                return f"the file ends inside the size of block {blocks} (byte {pos:,})"
            n = struct.unpack("<I", raw)[0]
            if n > _MAX_HEADER:
                return f"block {blocks} at byte {pos:,} has no valid header"
            if pos + 4 + n > size:
                return (f"the {what} at byte {pos:,} declares {n:,} bytes, but the file ends "
                        f"{size - pos - 4:,} bytes into it")
            header = f.read(n)
            pos += 4 + n
            if what == "file header":
                what = "block header"
                continue
            try:
                payload = _payload_size(header)
            except (IndexError, ValueError):
                return f"block {blocks} at byte {pos - 4 - n:,} has no valid header"
            if pos + payload > size:
                return (f"block {blocks} at byte {pos - 4 - n:,} declares {payload:,} bytes of data, "
                        f"but the file ends {size - pos:,} bytes into them")
            pos += payload
            f.seek(pos)
            blocks += 1
    return None
