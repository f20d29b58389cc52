"""Help that reads at 80 columns (issue 28): no sentence broken where its source line ended, every
positional argument explained, `tracekit workloads` one line per workload."""

from __future__ import annotations

import re

import pytest
import typer
from rich.cells import cell_len

from tracekit.cli import app
from tracekit.cli import run as cli
from tracekit.cli.helptext import paragraphs


def _commands(cmd, path):
    subs = getattr(cmd, "commands", None)
    if subs:
        for name, sub in subs.items():
            yield from _commands(sub, [*path, name])
    else:
        yield path, cmd


def test_every_positional_argument_has_help():
    missing = [(" ".join(p), a.name) for p, c in _commands(typer.main.get_command(app), ["tracekit"])
               for a in c.params if a.param_type_name == "argument" and not getattr(a, "help", None)]
    assert missing == []


def test_paragraphs_are_joined_and_list_items_kept():
    doc = """First line.

    The warnings the conversion records (rows with zero or
    negative durations, duplicate rows) print on stderr.

    - one item
      continued
    - two"""
    assert paragraphs(doc) == ("First line.\n\nThe warnings the conversion records (rows with zero or "
                               "negative durations, duplicate rows) print on stderr.\n\n"
                               "- one item continued\n\n- two")


@pytest.mark.parametrize("command", ["convert", "query", "study", "compare"])
def test_help_paragraphs_end_in_full_sentences(command, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert cli([command, "--help"]) == 0
    out = capsys.readouterr().out
    desc = re.split(r"^(?:Arguments|Options):$", out, flags=re.M)[0]  # above the option lists
    desc = desc.split("\n\n", 1)[1]  # the usage line(s) aside
    lines = [x.strip() for x in desc.splitlines() if x.strip()]
    paras, cur = [], []
    for raw in desc.splitlines() + [""]:
        if raw.strip():
            cur.append(raw.strip())
        elif cur:
            paras.append(" ".join(cur))
            cur = []
    assert lines and all(p.rstrip().endswith((".", ")", ":")) for p in paras if p), paras
    # a paragraph's lines are full width: none but the last ends short of half the width
    for raw_para in re.split(r"\n\s*\n", desc):
        rows = [x.rstrip() for x in raw_para.splitlines() if x.strip()]
        for row in rows[:-1]:
            assert cell_len(row) > 40, (command, row)


def test_workloads_table_fits_80_columns(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert cli(["workloads"]) == 0
    lines = capsys.readouterr().out.rstrip("\n").split("\n")
    assert max(cell_len(x) for x in lines) <= 80
    assert lines[0].split()[:4] == ["workload", "suite", "task", "batch"]
    rows = [x for x in lines[2:] if x and not x.startswith(("batch:", "shapes", "tracekit."))]
    assert len(rows) == 14 and rows[0].startswith("resnet50 ") and "4/256" in rows[0]
