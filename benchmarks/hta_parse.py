"""Parse one Kineto trace with HTA (traceinsight): the Kineto baseline of benchmarks/run.py.

Usage: PY hta_parse.py TRACE.json   (PY: the Python of benchmarks/.venv-hta)
"""

import sys
import tempfile
from pathlib import Path

from hta.trace_analysis import TraceAnalysis

trace = Path(sys.argv[1]).resolve()
with tempfile.TemporaryDirectory() as d:
    (Path(d) / "rank0.json").symlink_to(trace)
    ta = TraceAnalysis(trace_dir=d)
    df = ta.t.get_trace(0)
    print(len(df))
