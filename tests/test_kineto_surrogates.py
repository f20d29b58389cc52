"""Lone UTF-16 surrogate escapes in Kineto JSON (collectors/kineto/surrogates.py): replaced by
U+FFFD and counted, pairs and escaped backslashes kept, whatever the chunk boundaries."""

from __future__ import annotations

import gzip
import json

import pytest
from conftest import FIXTURES

from tracekit.collectors.kineto.surrogates import SurrogateFixer

TEXT = (rb'{"a":"\udfff","b":"\ud83d\ude00","c":"\\udfff","d":"\\\udfff","e":"x\ud800",'
        rb'"f":"\ud800\ud800\udc00","g":"\uDBFF\uDFFF\uDC00","h":"\u00e9\\\\","i":"\\"}')
# lone: a (low), d (after an escaped backslash), e (high at the end), f's first high, g's last low
WANT = {"a": "\ufffd", "b": "\U0001f600", "c": "\\udfff", "d": "\\\ufffd", "e": "x\ufffd",
        "f": "\ufffd\U00010000", "g": "\U0010ffff\ufffd", "h": "é\\\\", "i": "\\"}


def _fix(text: bytes, size: int) -> tuple[bytes, int]:
    f = SurrogateFixer()
    out = b"".join(f.feed(text[i:i + size]) for i in range(0, len(text), size)) + f.flush()
    return out, f.replaced


@pytest.mark.parametrize("size", [*range(1, 30), 64, 1 << 16])
def test_same_result_whatever_the_chunks(size):
    out, n = _fix(TEXT, size)
    assert json.loads(out) == WANT
    assert n == 5
    assert len(out) == len(TEXT)  # \ufffd is as long as the escape it replaces


def test_a_real_trace_passes_byte_for_byte():
    data = gzip.decompress((FIXTURES / "kineto" / "kineto_a100_alexnet.json.gz").read_bytes())
    for size in (7, 4096, 1 << 16):
        assert _fix(data, size) == (data, 0)


def test_text_of_backslashes_only():
    text = b'"' + b"\\\\" * 40 + b'"'
    assert _fix(text, 5) == (text, 0)
