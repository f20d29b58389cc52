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

_SEQ = ", seq = "
_OP_ID = ", op_id = "
# the sizes list: '[' then shapes '[..]' separated by ', ' then ']'
_SIZES_LABEL = ", sizes = "
_SIZES = _SIZES_LABEL + r"(?P<v>\[(?:\[[-0-9, ]*\](?:, )?)*\])"
DIMS = pa.list_(pa.list_(pa.int64()))
_I64 = 2**63
_STEP_MAX = (2**64 - 1 - 9) // 10  # a uint64 this large or smaller takes one more digit
_FULL_STEPS = 20  # digit positions read for every row at once (int64 has 19 digits)


def _regex(label: str, signed: bool) -> str:
    """The regular expression :func:`_ints` stands for (labels hold no special characters)."""
    return f"{label}(?P<v>{'-?' if signed else ''}\\d+)"


def _ints(name: pa.Array, label: str, signed: bool = False, pos=None) -> pa.Array:
    """The integer written after the first ``label`` (e.g. ``', op_id = '``) that a number
    follows, as int64; null where none does or the number does not fit int64.

    What ``extract_regex(label + r'(-?\\d+)')`` (signed) or ``r'(\\d+)'`` finds, without a regular expression per row
    (a third of the conversion's NVTX time): the label is found by substring search and the
    digits after it are read from the string data in NumPy, all rows at once. The rare row
    whose first ``label`` is not followed by a number but which holds the label again is given
    to the regular expression. ``pos``: where ``label`` starts in each row (-1: nowhere), when
    the caller has searched already."""
    import numpy as np

    n = len(name)
    if pos is None:
        pos = _find(name, label)
    if n == 0 or not (pos >= 0).any():
        return pa.nulls(n, pa.int64())
    offsets = _offsets(name)
    data = np.frombuffer(name.buffers()[2], np.uint8) if name.buffers()[2] is not None else np.zeros(1, np.uint8)
    last = data.size - 1
    found = pos >= 0
    at = offsets[:-1] + pos + len(label.encode())
    end = offsets[1:]
    neg = np.zeros(n, bool)
    if signed:
        neg = found & (at < end) & (data[np.minimum(at, last)] == ord("-"))
        at = at + neg
    value, digits, big = _read_digits(data, at, end, found & (at < end))
    limit = np.where(neg, np.uint64(_I64), np.uint64(_I64 - 1))
    ok = (digits > 0) & ~big & (value <= limit)
    out = np.where(neg, (np.uint64(0) - value).view(np.int64), value.view(np.int64))
    result = pa.array(out, pa.int64(), mask=~ok)
    again = np.flatnonzero(found & (digits == 0))  # the label without a number: look further on
    if again.size:
        text = pc.struct_field(pc.extract_regex(pc.take(name, pa.array(again)), _regex(label, signed)), [0])
        mask = np.zeros(n, bool)
        mask[again] = True
        result = pc.replace_with_mask(result, pa.array(mask), _ints(text, "", signed))
    return result


def _find(name: pa.Array, label: str):
    """Where ``label`` first starts in each row, in bytes (-1: nowhere or a null row)."""
    return pc.find_substring(name, label).fill_null(-1).to_numpy()


def _offsets(name: pa.Array):
    """Where each row of ``name`` (string or large_string) starts and ends in its data buffer
    (n + 1 values, int64)."""
    import numpy as np

    off_type = np.int64 if pa.types.is_large_string(name.type) else np.int32
    return np.frombuffer(name.buffers()[1], off_type)[name.offset:name.offset + len(name) + 1].astype(np.int64)


def _text(name: pa.Array) -> bytes:
    """The string data of ``name``'s rows, one after the other (searched once for a label with
    ``in``: False means no row holds it; True may also come from the end of one row and the start
    of the next, so it only tells where the per-row search can be skipped)."""
    if len(name) == 0 or name.buffers()[2] is None:
        return b""
    offsets = _offsets(name)
    return name.buffers()[2][int(offsets[0]):int(offsets[-1])].to_pybytes()


def _read_digits(data, at, end, active):
    """The decimal number at ``data[at:end]`` of each active row (its leading digits): its value
    (uint64), the count of digits and whether it is past int64 (leading zeros do not count).
    The first digit positions are read for all rows at once; a run longer than that (a hostile
    message) goes on over the rows whose number is still going on."""
    import numpy as np

    n, last = at.size, data.size - 1
    value = np.zeros(n, np.uint64)
    digits = np.zeros(n, np.int64)
    big = np.zeros(n, bool)
    step = 0
    while True:
        if step < _FULL_STEPS:  # every row at once: no index arrays while most rows are active
            if not active.any():
                break
            pos = at + step
            ch = data[np.minimum(pos, last)] - np.uint8(48)
            active &= (pos < end) & (ch < 10)
            big |= active & (value > _STEP_MAX)
            value = np.where(active, value * np.uint64(10) + ch, value)
            digits += active
        else:
            rows = np.flatnonzero(active)
            if not rows.size:
                break
            pos = at[rows] + step
            ch = data[np.minimum(pos, last)] - np.uint8(48)
            go = (pos < end[rows]) & (ch < 10)
            active[rows[~go]] = False
            rows, ch = rows[go], ch[go]
            big[rows] |= value[rows] > _STEP_MAX
            value[rows] = value[rows] * np.uint64(10) + ch
            digits[rows] += 1
        step += 1
    return value, digits, big


def _shapes(text: str):
    try:
        v = json.loads(text)
    except ValueError:
        return None
    if type(v) is not list or not all(type(s) is list and all(type(x) is int and -_I64 <= x < _I64 for x in s)
                                       for s in v):
        return None
    return v


# the columns add_columns sets, from ``name`` alone
COLUMNS = ("input_dims", "op_id", "sequence_number")


def add_columns(b: pa.RecordBatch) -> pa.RecordBatch:
    """``b`` (nvtx_ranges rows with ``name``) with ``input_dims``, ``op_id`` and
    ``sequence_number`` parsed from PyTorch NVTX messages; null where a message has none."""
    name = b.column("name")
    if pa.types.is_dictionary(name.type):
        name = name.cast(pa.string())
    n = b.num_rows
    at_op_id = _find(name, _OP_ID)
    if not (at_op_id >= 0).any():
        cols = {"input_dims": pa.nulls(n, DIMS), "op_id": pa.nulls(n, pa.int64()),
                "sequence_number": pa.nulls(n, pa.int64())}
    else:
        # messages without ``seq`` or ``sizes`` (emit_nvtx without record_shapes; PyTorch's
        # backward operators) skip their per-row search: a third of this step's time each
        text = _text(name)  # the batch's bytes, copied once for both searches
        seq = _ints(name, _SEQ, signed=True) if _SEQ.encode() in text else pa.nulls(n, pa.int64())
        op_id = _ints(name, _OP_ID, pos=at_op_id)
        if _SIZES_LABEL.encode() in text:
            sizes = pc.struct_field(pc.extract_regex(name, _SIZES), [0])
            distinct = pc.unique(sizes).drop_null()
            parsed = pa.array([_shapes(t) for t in distinct.to_pylist()], DIMS)
            dims = pc.take(parsed, pc.index_in(sizes, value_set=distinct))
        else:
            dims = pa.nulls(n, DIMS)
        cols = {"input_dims": dims, "op_id": op_id, "sequence_number": seq}
    for k, v in cols.items():
        if k in b.schema.names:
            b = b.drop_columns([k])
        b = b.append_column(k, v)
    return b
