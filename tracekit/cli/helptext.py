"""Help texts that read at any width: every command's docstring reflowed into paragraphs.

typer keeps a docstring's line breaks inside a paragraph, so at 80 columns a sentence broke where
the source line ended ("... zero or negative durations," / "duplicate rows ..."). :func:`reflow`
joins the lines of each paragraph (paragraphs are separated by blank lines; a line starting a
list item, ``- ``, starts a new one) and lets the terminal wrap them.
"""

from __future__ import annotations

import inspect
import re

_ITEM = re.compile(r"^\s*(- |\* |\d+\. )")


def paragraphs(text: str) -> str:
    """``text`` with the lines of each paragraph joined by spaces; blank lines kept between."""
    out = []
    for para in re.split(r"\n\s*\n", inspect.cleandoc(text)):
        lines, cur = [], ""
        for line in para.splitlines():
            if _ITEM.match(line) and cur:
                lines.append(cur)
                cur = line.strip()
            else:
                cur = f"{cur} {line.strip()}" if cur else line.strip()
        if cur:
            lines.append(cur)
        out.append("\n\n".join(lines))
    return "\n\n".join(p for p in out if p)


def first_sentence(text: str) -> str:
    """The first sentence of ``text``, whole: the command list of ``tracekit --help`` (click's plain
    help cuts it at the terminal width with "..." unless it is the command's short help)."""
    from click.utils import make_default_short_help

    return make_default_short_help(text, max_length=10_000)


def reflow(app) -> None:
    """Set the help of every command of ``app`` and its sub-apps from its reflowed docstring, and
    its short help (the command list) from that help's first sentence."""
    for cmd in app.registered_commands:
        text = cmd.help or (cmd.callback.__doc__ if cmd.callback else None)
        if text:
            cmd.help = paragraphs(text)
            cmd.short_help = cmd.short_help or first_sentence(cmd.help)
    for group in app.registered_groups:
        if group.typer_instance is not None:
            info = group.typer_instance.info
            if info.help and not group.short_help:
                group.short_help = first_sentence(paragraphs(info.help))
            reflow(group.typer_instance)
