"""Operator arguments in PyTorch's NVTX op ranges (``torch.autograd.profiler.emit_nvtx``).

With ``emit_nvtx()`` every operator call is an NVTX push/pop range whose message is the operator
name followed by ``, seq = N`` (autograd sequence number, forward operators),
``, op_id = N`` (the call's id), ``, sizes = [[2, 3], [], [3]]`` (with ``record_shapes=True``: one
shape per argument, ``[]`` for a non-tensor) and ``, input_op_ids = [...]``, e.g.
``aten::addmm, seq = 12, op_id = 40, sizes = [[16], [4, 8], [8, 16], [], []]``.
:func:`add_columns` parses them into ``nvtx_ranges.input_dims``, ``op_id`` and
``sequence_number`` (the message itself is kept as written). Each distinct ``sizes`` text is
parsed once: shapes repeat from step to step, so the cost follows the distinct shapes, not the
ranges.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.compute as pc

_SEQ = r", seq = (?P<v>-?\d+)"
_OP_ID = r", op_id = (?P<v>\d+)"
# the sizes list: '[' then shapes '[..]' separated by ', ' then ']'
_SIZES = r", sizes = (?P<v>\[(?:\[[-0-9, ]*\](?:, )?)*\])"
DIMS = pa.list_(pa.list_(pa.int64()))
_I64 = 2**63


def _ints(name: pa.Array, pattern: str) -> pa.Array:
    got = pc.extract_regex(name, pattern)
    text = pc.struct_field(got, [0])
    return pc.cast(text, pa.int64(), safe=False) if len(text) else pa.array([], pa.int64())


def _shapes(text: str):
    try:
        v = json.loads(text)
    except ValueError:
        return None
    if type(v) is not list or not all(type(s) is list and all(type(x) is int and -_I64 <= x < _I64 for x in s)
                                       for s in v):
        return None
    return v


def add_columns(b: pa.RecordBatch) -> pa.RecordBatch:
    """``b`` (nvtx_ranges rows with ``name``) with ``input_dims``, ``op_id`` and
    ``sequence_number`` parsed from PyTorch NVTX messages; null where a message has none."""
    name = b.column("name")
    if pa.types.is_dictionary(name.type):
        name = name.cast(pa.string())
    n = b.num_rows
    has = pc.match_substring(name, ", op_id = ").fill_null(False)
    if not pc.any(has).as_py():
        cols = {"input_dims": pa.nulls(n, DIMS), "op_id": pa.nulls(n, pa.int64()),
                "sequence_number": pa.nulls(n, pa.int64())}
    else:
        seq = _ints(name, _SEQ)
        op_id = _ints(name, _OP_ID)
        sizes = pc.struct_field(pc.extract_regex(name, _SIZES), [0])
        distinct = pc.unique(sizes).drop_null()
        parsed = pa.array([_shapes(t) for t in distinct.to_pylist()], DIMS)
        dims = pc.take(parsed, pc.index_in(sizes, value_set=distinct))
        cols = {"input_dims": dims, "op_id": op_id, "sequence_number": seq}
    for k, v in cols.items():
        if k in b.schema.names:
            b = b.drop_columns([k])
        b = b.append_column(k, v)
    return b
