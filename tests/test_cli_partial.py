"""tracekit.cli.partial: a command line builds only the commands it reaches (issue 39), and what
it prints (help, usage errors, exit status) is what the whole app prints."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from tracekit.cli import app
from tracekit.cli.partial import app_for, command_name

NAMES = [command_name(c) for c in app.registered_commands]
PLOT = [command_name(c) for g in app.registered_groups for c in g.typer_instance.registered_commands]
LINES = ([[], ["--help"], ["-h"], ["--debug"], ["-q", "--help", "query"], ["bogus"], ["--bogus"],
          ["quer", "x"], ["query"], ["query", "--bogus", "x"], ["plot"], ["plot", "bogus"],
          ["--debug", "-q", "sql", "--help"], ["--version"], ["-q", "--version", "query"]]
         + [[n, "--help"] for n in NAMES] + [["plot", n, "--help"] for n in PLOT])


def _out(typer_app, argv):
    res = CliRunner().invoke(typer_app, argv, prog_name="tracekit", env={"COLUMNS": "80"})
    return res.exit_code, res.output


@pytest.mark.parametrize("argv", LINES, ids=" ".join)
def test_part_prints_what_the_whole_app_prints(argv):
    assert _out(app_for(app, argv), argv) == _out(app, argv)


def test_a_command_line_builds_only_its_command():
    assert len(NAMES) >= 12 and len(PLOT) >= 8  # the app the parts are cut from
    part = app_for(app, ["--debug", "query", "kernel_summary", "RUN"])
    assert [command_name(c) for c in part.registered_commands] == ["query"]
    assert part.registered_groups == [] and part.registered_callback is app.registered_callback
    part = app_for(app, ["plot", "steps", "RUN"])
    assert part.registered_commands == [] and [g.name for g in part.registered_groups] == ["plot"]
    # the root's help: every command listed, none with its options
    part = app_for(app, ["--help"])
    assert [command_name(c) for c in part.registered_commands] == NAMES
    assert all(c.callback.__name__ == "_listed_only" for c in part.registered_commands)
    assert [g.typer_instance.registered_commands for g in part.registered_groups] == [[]]
    assert app_for(app, ["bogus"]) is app and app_for(app, ["--bogus", "query"]) is app
    assert len(app.registered_commands) == len(NAMES)  # the app itself is left whole


def test_version_prints_the_installed_version(capsys):
    from importlib.metadata import version

    from tracekit.cli import run

    assert run(["--version"]) == 0
    assert capsys.readouterr().out == f"tracekit {version('tracekit')}\n"
