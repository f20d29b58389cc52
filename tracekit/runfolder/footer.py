"""A Parquet file's row count and top-level column names from its footer, without pyarrow.

Opening a run folder reads every table file's footer to check it (rows against the manifest,
columns against the table's). pyarrow would do it, but importing pyarrow (with numpy) is most of
a small ``tracekit query``'s start-up (issue 39), and a query needs nothing else of it.

The footer is the ``FileMetaData`` structure of the Parquet format, Thrift compact protocol,
before the last 8 bytes (its length, little-endian uint32, then ``PAR1``). Read here: field 2
(``schema``: a depth-first list of ``SchemaElement``, the root first, each with ``name`` in field
4 and ``num_children`` in field 5) and field 3 (``num_rows``, i64). Parsing stops once both are
read; the row groups after them are not parsed.

:func:`read_footer` raises :class:`ValueError` with a short reason for anything that is not such a
footer (cut file, wrong magic, a length past the file, a malformed structure, an encrypted footer).
"""

from __future__ import annotations

import os
import struct

MAGIC = b"PAR1"
_TAIL = 8


class _Compact:
    """Reader of Thrift compact-protocol values in ``buf`` (only what FileMetaData needs)."""

    def __init__(self, buf: bytes):
        self.buf, self.pos = buf, 0

    def byte(self) -> int:  # past the end: IndexError, made a ValueError by parse()
        self.pos += 1
        return self.buf[self.pos - 1]

    def varint(self) -> int:
        buf, pos = self.buf, self.pos
        c = buf[pos]
        if c < 0x80:  # most values: one byte
            self.pos = pos + 1
            return c
        out, shift = c & 0x7F, 7
        while True:
            pos += 1
            c = buf[pos]
            out |= (c & 0x7F) << shift
            if not c & 0x80:
                self.pos = pos + 1
                return out
            shift += 7
            if shift > 63:
                raise ValueError("varint longer than 10 bytes")

    def zigzag(self) -> int:
        v = self.varint()
        return (v >> 1) ^ -(v & 1)

    def binary(self) -> bytes:
        n = self.varint()
        if self.pos + n > len(self.buf):
            raise ValueError("string past the end of the footer")
        self.pos += n
        return self.buf[self.pos - n:self.pos]

    def fields(self):
        """(field id, type) of each field of the struct at ``pos``, up to its stop byte; the
        caller reads each value, or passes over it with :meth:`skip`, before asking for the next."""
        last = 0
        buf = self.buf
        while True:
            head = buf[self.pos]
            self.pos += 1
            if head == 0:
                return
            delta, kind = head >> 4, head & 0x0F
            last = last + delta if delta else self.zigzag()
            yield last, kind

    def list_header(self) -> tuple[int, int]:
        head = self.byte()
        size = head >> 4
        return (self.varint() if size == 15 else size), head & 0x0F

    def skip(self, kind: int, depth: int = 0) -> None:
        if depth > 64:
            raise ValueError("structures nested too deep")
        if kind in (1, 2):  # a boolean struct field: the value is the type
            return
        if kind == 3:
            self.pos += 1
        elif kind in (4, 5, 6):
            self.varint()
        elif kind == 7:
            self.pos += 8
        elif kind == 8:
            self.binary()
        elif kind in (9, 10):
            n, item = self.list_header()
            if item in (1, 2):  # booleans in a list take one byte each
                self.pos += n
            for _ in range(n if item not in (1, 2) else 0):
                self.skip(item, depth + 1)
        elif kind == 11:
            n = self.varint()
            kv = self.byte() if n else 0
            for _ in range(n):
                self.skip(kv >> 4, depth + 1)
                self.skip(kv & 0x0F, depth + 1)
        elif kind == 12:
            for _, k in self.fields():
                self.skip(k, depth + 1)
        else:
            raise ValueError(f"unknown Thrift type {kind}")
        if self.pos > len(self.buf):
            raise ValueError("footer ends inside a value")


def _schema_element(r: _Compact) -> tuple[str | None, int]:
    name, children = None, 0
    for fid, kind in r.fields():
        if fid == 4 and kind == 8:
            name = r.binary().decode("utf-8")
        elif fid == 5 and kind == 5:
            children = r.zigzag()
        else:
            r.skip(kind)
    return name, children


def _top_level(elements: list[tuple[str | None, int]]) -> tuple[str, ...]:
    """Names of the root's children in a depth-first schema list."""
    if not elements:
        raise ValueError("no schema")
    names, pos = [], 1
    for _ in range(elements[0][1]):
        if pos >= len(elements) or elements[pos][0] is None:
            raise ValueError("schema shorter than its root says")
        names.append(elements[pos][0])
        pending = 1
        while pending:  # skip this column's subtree (a list column's groups)
            if pos >= len(elements) or elements[pos][1] < 0:
                raise ValueError("schema shorter than its groups say")
            pending += elements[pos][1] - 1
            pos += 1
    return tuple(names)


def parse(meta: bytes) -> tuple[int, tuple[str, ...]]:
    """(num_rows, top-level column names) of a serialized FileMetaData."""
    try:
        return _parse(meta)
    except IndexError:
        raise ValueError("footer ends inside a value") from None


def _parse(meta: bytes) -> tuple[int, tuple[str, ...]]:
    r = _Compact(meta)
    rows = elements = None
    for fid, kind in r.fields():
        if fid == 2 and kind == 9:
            n, item = r.list_header()
            if item != 12:
                raise ValueError("schema is not a list of structures")
            elements = [_schema_element(r) for _ in range(n)]
        elif fid == 3 and kind == 6:
            rows = r.zigzag()
        else:
            r.skip(kind)
        if rows is not None and elements is not None:
            break
    if rows is None or elements is None or rows < 0:
        raise ValueError("footer without a schema or a row count")
    return rows, _top_level(elements)


def _length(size: int, tail: bytes) -> int:
    """The footer's length from the file's last 8 bytes; :class:`ValueError` when they are not
    a Parquet file's."""
    if size < 12:
        raise ValueError(f"{size} bytes: too small to be a Parquet file")
    if tail[4:] != MAGIC:
        encrypted = " (an encrypted footer)" if tail[4:] == b"PARE" else ""
        raise ValueError(f"no Parquet magic bytes at the end{encrypted}")
    (length,) = struct.unpack("<I", tail[:4])
    if length > size - 12:
        raise ValueError(f"footer length {length} past the start of the file")
    return length


def read_footer(path: str | os.PathLike, data: bytes | None = None) -> tuple[int, tuple[str, ...]]:
    """(num_rows, top-level column names) of the Parquet file ``path`` (or of its bytes
    ``data``, already read). :class:`ValueError` when it is not a readable Parquet footer;
    :class:`OSError` when the file cannot be read."""
    if data is None:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            f.seek(max(size - _TAIL, 0))
            length = _length(size, f.read(_TAIL))
            f.seek(size - _TAIL - length)
            meta = f.read(length)
    else:
        size = len(data)
        length = _length(size, data[-_TAIL:])
        meta = data[size - _TAIL - length:size - _TAIL]
    try:
        return parse(meta)
    except UnicodeDecodeError as exc:  # a column name that is not UTF-8
        raise ValueError(str(exc)) from None
