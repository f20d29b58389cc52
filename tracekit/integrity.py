"""Moved to :mod:`tracekit.runfolder.integrity` (the run folder's package); this name stays for code that
imports it from here."""

from tracekit.runfolder.integrity import *  # noqa: F401,F403
