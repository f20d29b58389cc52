"""Hostile what-if scenarios and filter patterns (issue 37, items 5, 6, 8): regular expressions
run by RE2 (linear time) with RE2's one-line refusals, a way to write ``+``, and factors whose
products would leave int64 refused in one line, exit 2, without a NumPy warning."""

from __future__ import annotations

import time
import warnings

import pytest
from helpers.whatif_run import tiny_run

from tests.conftest import one_error_line
from tracekit.cli import run as cli
from tracekit.query import Engine
from tracekit.whatif import whatif

LONG = "a" * 40 + "_k2"


@pytest.fixture
def plus_run(run_factory):
    """The hand-computed what-if run (tests/helpers/whatif_run.py), its kernels named
    ``gemm+bias_k1`` (400 ns) and 40 a's (350 ns): baseline 1000 ns, the first kernel halved 800 ns."""
    return tiny_run(run_factory, kernels=("gemm+bias_k1", LONG))


def _pred(run, scenario):
    with Engine([run]) as e:
        return whatif(e, [scenario]).column("predicted_ns").to_pylist()


def test_kernel_regex_runs_in_linear_time(plus_run):
    """Item 5: Python's re took more than 120 s on (.*a){20}x; RE2 answers at once (no match:
    the scenario cannot act, n/a: no prediction, issue 34)."""
    t = time.monotonic()
    assert _pred(plus_run, "kernels:(.*a){20}x=0.5") == [None]
    assert time.monotonic() - t < 20
    assert _pred(plus_run, "kernels:^a{40}_k2$=0") == [870 - 350 + 30 + 100]  # K2 gone: sync at 550


def test_plus_in_a_kernel_regex_is_written_backslash_plus(plus_run):
    from tracekit.whatif.limits import name_hits, split

    assert split(r"kernels:gemm\+bias=0.5+comm=0") == [r"kernels:gemm\+bias=0.5", "comm=0"]
    assert list(name_hits(["gemm+bias_k1", "gemmbias", "x"], r"gemm\+bias")) == [True, False, False]
    assert _pred(plus_run, r"kernels:gemm\+bias=0.5") == [800]
    assert _pred(plus_run, r"kernels:m{1,}\+b=0.5+host=1") == [800]  # {1,}: one or more


def test_regex_re2_refuses_is_one_line_exit_2(plus_run, capsys):
    for pattern, why in (("(?=gemm)", "invalid perl operator"), (r"(a)\1", "invalid escape sequence")):
        assert cli(["whatif", str(plus_run), "-s", f"kernels:{pattern}=0.5"]) == 2
        one_error_line(capsys, why, "RE2 syntax", "write a + as")
    assert cli(["whatif", str(plus_run), "-s", "kernels:(=0.5"]) == 2
    one_error_line(capsys, "'('", "missing )")


@pytest.mark.parametrize("scenario", ["kernels:.=1e308", "host=1e308", "kernels:.=1e16", "host=1+kernels:.=4e15"])
def test_factors_past_int64_are_refused(plus_run, capsys, scenario):
    """Item 6: kernels:.=1e308 predicted -9.2e18 ns, host=1e308 0 ns, each with NumPy
    RuntimeWarnings; 1e13 exited 1 OverflowError. 1e16 x 400 ns passes 2^61 ns; 4e15 keeps each
    kernel under it (1.6e18, 1.4e18 ns) but not their sum."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert cli(["whatif", str(plus_run), "-s", scenario]) == 2
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)], caught
    one_error_line(capsys, "past 2^61 ns", "use a smaller factor")


def test_large_factor_within_the_bound_is_exact(plus_run):
    # K1 400 ns x 1e12 = 4e14 ns: K2 starts 115 + 4e14 + 5, ends 350 ns later, sync +30, host +100
    assert _pred(plus_run, "kernels:gemm=1e12") == [115 + 400 * 10**12 + 5 + 350 + 30 + 100]


def test_nvtx_pattern_re2_refuses_is_one_line_exit_2(plus_run, capsys):
    """Item 8: Python's re accepted (?=a), RE2 refused it later: exit 1 InvalidInputException."""
    assert cli(["query", "kernel_summary", str(plus_run), "--nvtx", "(?=a)"]) == 2
    one_error_line(capsys, "--nvtx '(?=a)'", "RE2 syntax", "invalid perl operator")


@pytest.mark.parametrize("at", [1, 3])
def test_store_folder_removed_mid_run_is_one_line_exit_2(plus_run, capsys, monkeypatch, at):
    """Item 7: the graph's arrays on disk, their folder removed before the store's first (or
    third) file: was exit 1 `OSError: [Errno 2] ... 00001.bin`."""
    import shutil

    from tracekit.whatif import store

    monkeypatch.setenv(store.DISK_NODES_ENV, "0")
    real = store.Store._new_file
    removed = []

    def new_file(self):
        if self._count + 1 == at:
            shutil.rmtree(self.path)
            removed.append(self.path)
        return real(self)

    monkeypatch.setattr(store.Store, "_new_file", new_file)
    assert cli(["whatif", str(plus_run), "-s", "baseline"]) == 2
    one_error_line(capsys, removed[0], "was removed while tracekit ran", "run again")
