"""Moved to :mod:`tracekit.runfolder.checksums` (the run folder's package); this name stays for code that
imports it from here."""

from tracekit.runfolder.checksums import *  # noqa: F401,F403
