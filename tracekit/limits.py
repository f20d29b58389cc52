"""Default limits that the library applies and the CLI shows in its help, in a module that
imports nothing: building ``tracekit timeline --help`` (and so every command's start) reads them
without importing the library that uses them (issue 39)."""

DEFAULT_MAX_EVENTS = 2_000_000  # ~550 MB of JSON; with ~10 args an event, inside Perfetto UI's ~2 GB tab
"""Events ``tracekit timeline`` writes at most by default (``--max-events``; 0 = no limit)."""
