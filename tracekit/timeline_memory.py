"""Moved to :mod:`tracekit.timeline.memory` (the timeline's package); this name stays for code that
imports it from here."""

from tracekit.timeline.memory import *  # noqa: F401,F403
