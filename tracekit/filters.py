"""Moved to :mod:`tracekit.query.filters` (the filters narrow the query core's views); this name
stays for code that imports it from here."""

from tracekit.query.filters import *  # noqa: F401,F403
