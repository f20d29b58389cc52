"""Text from a trace shown to a person: control characters escaped, labels capped, cuts counted.

Trace text (kernel, process, workload, NVTX domain names) is data. Before it reaches a terminal,
matplotlib (PNG, SVG, PDF) or HTML:

- :func:`visible` shows every control or formatting character as an escape (``\\x1b``,
  ``\\u202e``), so no ESC reaches a terminal, no control character makes an SVG invalid XML and
  no raw byte lands in report.html;
- :func:`label` also cuts a label longer than :data:`LABEL_CHARS` characters (ending in ``…``) and
  counts the cut: a 1 MB process name drawn as a bar label asked matplotlib for a 9,000,772-pixel
  wide image. :func:`take_cuts` returns the count since the last call; the CLI prints one
  warning per command with it.

The stored tables keep the text as the collectors read it (cut only at their 1 MiB limit).
"""

from __future__ import annotations

import threading
import unicodedata

LABEL_CHARS = 200  # a label (axis tick, legend, table cell of a report) longer than this is cut
_SAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Zl", "Zp"})  # escaped by visible()
_lock = threading.Lock()
_cuts = 0


def visible(text: str) -> str:
    """``text`` with every control or formatting character shown as an escape: C0/C1 controls and
    DEL as ``\\xNN`` (``\\n``, ``\\r``, ``\\t`` for those three), format characters such as bidi
    overrides and zero-width spaces, line/paragraph separators and lone surrogates as
    ``\\uNNNN``. Printable text (any script) is returned unchanged."""
    if text.isprintable():
        return text
    out = []
    for ch in text:
        o = ord(ch)
        if ch in "\n\r\t":
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t"}[ch])
        elif o < 0x20 or 0x7F <= o < 0xA0:
            out.append(f"\\x{o:02x}")
        elif unicodedata.category(ch) in _SAFE_CATEGORIES:
            out.append(f"\\u{o:04x}" if o <= 0xFFFF else f"\\U{o:08x}")
        else:
            out.append(ch)
    return "".join(out)


def label(value, limit: int = LABEL_CHARS) -> str:
    """``value`` as a label: :func:`visible`, cut to ``limit`` characters with ``…`` (counted for
    :func:`take_cuts`). None is ''."""
    global _cuts
    if value is None:
        return ""
    s = str(value)
    if len(s) > limit:  # cut before escaping: a 1 MB name is not escaped whole
        s = s[: limit - 1]
        with _lock:
            _cuts += 1
        return visible(s)[: limit - 1] + "…"
    return visible(s)


def html_text(value) -> str:
    """Trace text for HTML: :func:`visible`, then HTML-escaped (``<``, ``&``, quotes)."""
    import html  # 1.3 ms, and every command imports this module (issue 39)

    return html.escape(visible("" if value is None else str(value)))


def take_cuts() -> int:
    """Labels cut by :func:`label` since the last call (and reset the count)."""
    global _cuts
    with _lock:
        n, _cuts = _cuts, 0
    return n


def cut_warning(n: int) -> str:
    """The warning line for ``n`` labels cut."""
    return (f"{n} label(s) from the trace were too long to show and were cut (they end in …); "
            "the run folders' tables keep the full text")
