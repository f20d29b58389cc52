"""The part of the CLI a command line uses, built alone (issue 39).

typer turns every registered command into a click command (each option's type read from the
function's signature) before it parses the command line: about 10 ms for tracekit's twenty
commands, a tenth of ``tracekit --help``. :func:`app_for` gives :func:`tracekit.cli.run` an app
with only what the arguments reach:

- ``tracekit CMD ...`` (after the root's flags): the root and ``CMD`` alone (``plot``: the plot
  group with its commands);
- the root's help (``tracekit``, ``tracekit --help``, ``tracekit --debug``): every command as a
  stand-in with its name and short help, and no options (the list is all the root's help shows);
- anything else (an unknown command or option): the whole app, for its error and suggestions.

The help, options and errors of each command are those of the whole app: the same command
objects, built by typer as before (``tests/test_cli_partial.py`` compares them).
"""

from __future__ import annotations

import copy

ROOT_FLAGS = frozenset({"--debug", "-q", "--quiet", "--version"})
HELP_FLAGS = frozenset({"-h", "--help"})


def command_name(info) -> str:
    """The name a registered command has on the command line (typer's rule: the function's
    name with ``_`` as ``-``, unless given)."""
    return info.name or info.callback.__name__.lower().replace("_", "-")


def _listed_only() -> None:
    """Stand-in callback: the root's help lists a command; it never runs."""


def _stand_in(info):
    c = copy.copy(info)
    c.name, c.callback = command_name(info), _listed_only
    return c


def _with(app, commands: list, groups: list):
    part = copy.copy(app)
    part.registered_commands, part.registered_groups = commands, groups
    return part


def app_for(app, argv: list[str]):
    """``app`` (a typer app), or a copy holding only the part ``argv`` reaches (module docstring)."""
    i = 0
    while i < len(argv) and argv[i] in ROOT_FLAGS | HELP_FLAGS:
        i += 1
    if HELP_FLAGS & set(argv[:i]) or i == len(argv):  # the root's help or usage error only
        groups = [copy.copy(g) for g in app.registered_groups]
        for g in groups:
            g.typer_instance = _with(g.typer_instance, [], [])
        return _with(app, [_stand_in(c) for c in app.registered_commands], groups)
    word = argv[i]
    commands = [c for c in app.registered_commands if command_name(c) == word]
    groups = [g for g in app.registered_groups if g.name == word]
    if len(commands) + len(groups) != 1:
        return app
    return _with(app, commands, groups)
