"""The what-if scenario registry (tracekit.whatif.scenarios.SCENARIOS): one entry per scenario,
from which `whatif --help` and docs/whatif.md's list are made; each -s parsed once."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.whatif_run import tiny_run as build_tiny_run

from tracekit.cli import run as cli
from tracekit.errors import InputError
from tracekit.query import Engine
from tracekit.whatif import scenarios, whatif
from tracekit.whatif.registry import Change, Scenario

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def tiny_run(run_factory):
    """The hand-computed what-if run (tests/helpers/whatif_run.py): two launches, a sync, a 1000 ns step range."""
    return build_tiny_run(run_factory)


def test_docs_list_every_scenario_from_the_registry():
    doc = (ROOT / "docs" / "whatif.md").read_text()
    begin = doc.index("-->\n", doc.index("<!-- scenarios: generated")) + 4
    end = doc.index("<!-- scenarios: end -->")
    assert doc[begin:end] == scenarios.markdown(), \
        "docs/whatif.md's scenario list is stale: paste tracekit.whatif.scenarios.markdown()"
    assert [line.split("`")[1] for line in doc[begin:end].splitlines()] == \
        ["baseline", "no-straggler", "comm=F", "launch=0", "kernels:REGEX=F", "host=F"]


def test_help_and_errors_name_every_scenario(monkeypatch, capsys):
    """whatif --help at 80 columns lists every scenario on a line of its own (before: squeezed
    into the option's 22-character column)."""
    monkeypatch.setenv("COLUMNS", "80")
    assert cli(["whatif", "--help"]) == 0
    lines = [line.strip() for line in capsys.readouterr().out.splitlines()]
    for s in scenarios.SCENARIOS:
        assert f"{s.syntax}: {s.help}" in lines
    with pytest.raises(InputError, match=r"unknown scenario 'x': use baseline, no-straggler, comm=F, "
                                         r"launch=0, kernels:REGEX=F or host=F \(combine with \+\)"):
        scenarios.parse("comm=0.5+x")
    with pytest.raises(InputError, match="only launch=0 is defined"):
        scenarios.parse("launch=0.5")
    assert scenarios.parse("kernels:a=b=0.5+host=2") == [Change("kernels", 0.5, "a=b"), Change("host", 2.0)]


def test_a_new_scenario_is_one_entry(tiny_run, monkeypatch):
    """An entry appended to the registry parses, applies and describes with no other change."""
    def halve_all(g, c, st):
        st.d1[:] = st.d1 // 2
    new = Scenario("halve", "halve", "every duration / 2", "every node's own time / 2.",
                   lambda part, spec: Change("halve") if part == "halve" else None, halve_all,
                   lambda g, c: ["halve: every node"])
    monkeypatch.setattr(scenarios, "SCENARIOS", (*scenarios.SCENARIOS, new))
    assert "  halve: every duration / 2" in scenarios.help_epilog()
    with Engine([tiny_run]) as e:
        t = whatif(e, ["baseline", "halve+host=1"])
    assert t.column("predicted_ns").to_pylist()[0] == 1000
    assert t.column("predicted_ns").to_pylist()[1] < 1000


def test_each_scenario_is_parsed_once(tiny_run, monkeypatch, capsys):
    calls = []
    real = scenarios.parse
    monkeypatch.setattr(scenarios, "parse", lambda spec: calls.append(spec) or real(spec))
    assert cli(["whatif", str(tiny_run), "-s", "host=0.5", "-s", "launch=0", "-f", "csv"]) == 0
    assert calls == ["host=0.5", "launch=0"]
    assert "host=0.5" in capsys.readouterr().out
