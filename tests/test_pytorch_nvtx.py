"""PyTorch's NVTX operator arguments (collectors/nsys/pytorch_nvtx.py): the numbers after
', op_id = ' and ', seq = ' are read without a regular expression per row; they must be what
the regular expression finds, on any message (hostile ones included), and a number past int64
is null instead of failing the conversion."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from tracekit.collectors.nsys import pytorch_nvtx as P

PIECES = [", op_id = ", ", seq = ", ", sizes = ", "-", "0", "7", "12", "x", "ä", "日本", " ", ",",
          "0" * 25, "9" * 21, "1" * 19, "9223372036854775807", "9223372036854775808"]


def _by_regex(name: pa.Array, label: str, signed: bool) -> list:
    """What the regular expression finds, as a Python int when it fits int64."""
    got = pc.struct_field(pc.extract_regex(name, P._regex(label, signed)), [0]).to_pylist()
    return [None if v is None or not -2**63 <= int(v) < 2**63 else int(v) for v in got]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.none(), st.lists(st.sampled_from(PIECES), max_size=8).map("".join)),
                max_size=30),
       st.integers(0, 3), st.booleans())
def test_numbers_are_what_the_regex_finds(names, cut, large):
    arr = pa.array(names, pa.large_string() if large else pa.string()).slice(min(cut, len(names)))
    for label, signed in ((P._OP_ID, False), (P._SEQ, True)):
        assert P._ints(arr, label, signed).to_pylist() == _by_regex(arr, label, signed)


def test_columns_of_real_and_hostile_messages():
    names = ["aten::mm, seq = 5, op_id = 314307, sizes = [[4, 8], [8, 16]]",
             "aten::view, op_id = 314290",
             "step 3",
             None,
             "x, op_id = 99999999999999999999",  # past int64: null, not a failed conversion
             "x, seq = -9223372036854775808, op_id = , op_id = 00000000000000000000042",
             "日本, seq = -, seq = 7, op_id = 1"]
    b = P.add_columns(pa.RecordBatch.from_pydict({"name": pa.array(names, pa.string())}))
    assert b.column("op_id").to_pylist() == [314307, 314290, None, None, None, 42, 1]
    assert b.column("sequence_number").to_pylist() == [5, None, None, None, None, -2**63, 7]
    assert b.column("input_dims").to_pylist() == [[[4, 8], [8, 16]]] + [None] * 6
    none = P.add_columns(pa.RecordBatch.from_pydict({"name": pa.array(["a, seq = 1", None])}))
    assert none.column("sequence_number").to_pylist() == [None, None]  # no op_id: not an op range


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.none(), st.lists(st.sampled_from(PIECES + ["[[1, 2], []]", "[[3]]", "]"]),
                                              max_size=8).map("".join)), max_size=30),
       st.integers(0, 3), st.booleans())
def test_columns_are_what_the_regex_finds(names, cut, large):
    """add_columns skips the per-row search of a label its batch's bytes do not hold; the
    columns must still be what the regular expressions find on every row (labels split across
    two rows included)."""
    arr = pa.array(names, pa.large_string() if large else pa.string()).slice(min(cut, len(names)))
    b = P.add_columns(pa.RecordBatch.from_arrays([arr], names=["name"]))
    # a batch without any op range (no ', op_id = ') is not PyTorch's: all null
    ops = pc.any(pc.match_substring(arr, P._OP_ID)).as_py() is True
    op = _by_regex(arr, P._OP_ID, False)
    assert b.column("op_id").to_pylist() == [v if ops else None for v in op]
    seq = _by_regex(arr, P._SEQ, True)
    assert b.column("sequence_number").to_pylist() == [v if ops else None for v in seq]
    sizes = pc.struct_field(pc.extract_regex(arr, P._SIZES), [0]).to_pylist()
    assert b.column("input_dims").to_pylist() == [P._shapes(t) if ops and t is not None else None
                                                 for t in sizes]


def test_a_label_only_across_two_rows_is_no_number():
    """', se' ending one row and 'q = 7' starting the next: the batch's bytes hold ', seq = ',
    no row does."""
    arr = pa.array(["a, op_id = 1, se", "q = 7, op_id = 2"])
    assert P._SEQ.encode() in P._text(arr) and P._SEQ.encode() not in P._text(arr.slice(1))
    b = P.add_columns(pa.RecordBatch.from_arrays([arr], names=["name"]))
    assert b.column("sequence_number").to_pylist() == [None, None]
    assert b.column("op_id").to_pylist() == [1, 2]
