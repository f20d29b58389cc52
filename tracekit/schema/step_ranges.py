"""tracekit's NVTX naming of training steps and their phases (docs/workloads.md), fixed once here,
in the schema layer, because both sides of it read it: the workloads write these ranges
(tracekit/workloads/annotate.py) and the collectors map them (the Kineto collector tags PyTorch's
user annotations with these names as tracekit's own ranges); queries/_macros.sql's
``tk_step_regex()`` is the same text as :data:`STEP_SQL_REGEX` (a test checks).

- ``step N`` / ``step N (warmup)`` in domain :data:`DOMAIN`: one range per training step, ``N``
  counting from 0 over warm-up and measured steps together; :data:`STEP_RE` parses it;
- :data:`PHASES`: ranges nested in the step range.
"""

from __future__ import annotations

import re

DOMAIN = "tracekit"
PHASES = ("data", "forward", "backward", "optimizer")
STEP_RE = re.compile(r"^step (?P<step>\d+)(?P<warmup> \(warmup\))?$")
# The same pattern for SQL (DuckDB regexp_extract): step number is group 1, warm-up is group 2.
STEP_SQL_REGEX = r"^step (\d+)( \(warmup\))?$"


def step_message(step: int, warmup: bool) -> str:
    """The message of the range that covers training step ``step``."""
    return f"step {step} (warmup)" if warmup else f"step {step}"


def parse_step_message(message: str) -> tuple[int, bool] | None:
    """``(step, warmup)`` for a step range message, None for any other message."""
    m = STEP_RE.match(message)
    return None if m is None else (int(m["step"]), m["warmup"] is not None)
