"""MLPerf training result logs (collectors/mllog, queries/mlperf/): the shared fixtures of
MLCommons' training_results_v0.6 and v4.0 repositories, checked against the raw lines read
here with a separate parser, hand arithmetic and mlperf_logging's own result summarizer."""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest
from conftest import FIXTURES

from tracekit.cli import run as cli
from tracekit.convert import convert
from tracekit.query import Engine

MLLOG = FIXTURES / "mllog"
V06 = MLLOG / "training_results_v0.6" / "NVIDIA"
V40 = MLLOG / "training_results_v4.0" / "NVIDIA"
RESNET_1 = V06 / "results" / "dgx1_ngc19.05_mxnet" / "resnet"
RESNET_130 = V06 / "results" / "dgx1_n130_ngc19.05_mxnet" / "resnet"
GNN_64 = V40 / "results" / "eos_n64_ngc24.04_dgl" / "gnn"


@pytest.fixture(scope="module")
def mlrun(tmp_path_factory) -> Path:
    """Both rounds' trees, given as one folder: one run folder."""
    return convert([MLLOG], tmp_path_factory.mktemp("mllog") / "run")


def _raw_start_stop_s(path: Path) -> tuple[Decimal, Decimal]:
    """run_start and run_stop of a result file in seconds, read from the raw text."""
    text = path.read_text(encoding="latin-1")
    times = {}
    for key in ("run_start", "run_stop"):
        m = re.search(r":::MLL (\d+\.\d+) " + key + r":", text)
        if m:
            times[key] = Decimal(m.group(1))
        else:
            m = re.search(r':::MLLOG \{[^\n]*"time_ms": (\d+)[^\n]*"key": "' + key + '"', text)
            times[key] = Decimal(m.group(1)) / 1000
    return times["run_start"], times["run_stop"]


def _olympic(values: list) -> Decimal:
    kept = sorted(values)[1:-1]
    return sum(kept) / len(kept)


def test_every_log_line_is_an_event_with_its_exact_time(mlrun):
    for path in (RESNET_130 / "result_0.txt", GNN_64 / "result_3.txt"):
        raw = [ln for ln in path.read_text(encoding="latin-1").splitlines() if ":::MLL" in ln]
        with Engine([mlrun]) as eng:
            got = eng.sql(f"SELECT key, time_ns FROM mlperf_events WHERE file = '{path}' ORDER BY line").to_pylist()
        assert len(got) == len(raw) > 700
        start, stop = _raw_start_stop_s(path)
        assert [r["time_ns"] for r in got if r["key"] == "run_start"] == [int(start * 10**9)]
        assert [r["time_ns"] for r in got if r["key"] == "run_stop"] == [int(stop * 10**9)]


def test_runs_carry_the_submission_and_the_system(mlrun):
    with Engine([mlrun]) as eng:
        rows = {(r["system"], r["result_index"]): r for r in eng.sql("SELECT * FROM mlperf_runs").to_pylist()}
    assert len(rows) == 8 * 5 + 6 * 10
    r = rows[("dgx1_n130_ngc19.05_mxnet", 0)]
    start, stop = _raw_start_stop_s(RESNET_130 / "result_0.txt")
    assert (r["round"], r["submitter"], r["benchmark"], r["division"]) == ("0.6", "NVIDIA", "resnet", "closed")
    # the 0.6 description: 'num_nodes': '130', 'num_accelerators': '8' in its entry literal
    assert (r["number_of_nodes"], r["accelerators"], r["accelerator_model"]) == (130, 1040, "Tesla V100-SXM2-16GB")
    assert r["time_to_train_s"] == float(stop - start) == 101.557
    assert (r["status"], r["global_batch_size"], r["system_source"]) == ("success", 54080, "systems_file")
    assert r["eval_accuracy"] >= r["quality_target"] == 0.759
    g = rows[("eos_n64_ngc24.04_dgl", 3)]
    assert (g["round"], g["system_name"], g["accelerators"], g["accelerator_model"]) == \
        ("4.0", "Eos_n64", 512, "NVIDIA H100-SXM5-80GB")
    assert g["scaling_factor"] is None
    assert rows[("eos_ngc24.04_dgl", 0)]["scaling_factor"] == 1.003734827264239


def test_v06_score_is_the_olympic_mean_of_the_raw_times(mlrun):
    with Engine([mlrun]) as eng:
        score = {(r["system"], r["benchmark"]): r for r in eng.query("mlperf_score").to_pylist()}
    for folder in sorted((V06 / "results").glob("*/*")):
        times = [(lambda a, b: (b - a) / 60)(*_raw_start_stop_s(p)) for p in folder.glob("result_*.txt")]
        row = score[(folder.parent.name, folder.name)]
        assert row["runs"] == 5
        assert row["score_min"] == pytest.approx(float(_olympic(times)), rel=1e-12)
    # the published v0.6 result: ResNet-50 on one DGX-1, 115.22 minutes
    assert round(score[("dgx1_ngc19.05_mxnet", "resnet")]["score_min"], 3) == 115.221


def test_scaling_efficiency_of_the_v06_systems(mlrun):
    with Engine([mlrun]) as eng:
        rows = {r["system"]: r for r in eng.query("mlperf_scaling").to_pylist()}
    r = rows["dgx1_n130_ngc19.05_mxnet"]
    assert r["baseline_system"] == "dgx1_ngc19.05_mxnet"
    assert round(r["speedup"]) == 68 and round(r["scaling_efficiency"], 2) == 0.52
    assert r["scaling_efficiency"] == pytest.approx(r["speedup"] / 130, rel=1e-12)
    ssd = rows["dgx1_n30_ngc19.05_pytorch"]
    assert (round(ssd["speedup"], 1), round(ssd["scaling_efficiency"], 2)) == (8.4, 0.28)
    assert rows["dgx1_ngc19.05_mxnet"]["speedup"] == 1.0


@pytest.mark.slow
def test_v40_score_equals_mlperf_logging_result_summarizer(mlrun, tmp_path):
    pytest.importorskip("mlperf_logging")
    tree = tmp_path / "training_results_v4.0"
    shutil.copytree(MLLOG / "training_results_v4.0", tree)  # it writes a summary.json beside
    out = tmp_path / "summary.csv"
    proc = subprocess.run([sys.executable, "-m", "mlperf_logging.result_summarizer", str(tree / "NVIDIA"),
                           "training", "4.0.0", "--quiet", "-csv", str(out)],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    theirs = {}
    for row in csv.DictReader(out.open()):
        system = Path(row["details_url"]).stem
        for bench in ("gnn", "llama2_70b_lora"):
            if row[bench]:
                theirs[(system, bench)] = float(row[bench])
    with Engine([mlrun]) as eng:
        ours = {(r["system"], r["benchmark"]): r["score_min"]
                for r in eng.query("mlperf_score").to_pylist() if r["round"] == "4.0"}
    assert len(theirs) == 6 and ours.keys() == theirs.keys()
    for key, score in theirs.items():
        assert ours[key] == pytest.approx(score, rel=1e-9), key


def _cut_lines(src: Path, dst: Path, every: int) -> int:
    """``src`` with every ``every``-th :::MLLOG line cut in the middle of its JSON; returns how many."""
    out, n, cut = [], 0, 0
    for ln in src.read_text(encoding="utf-8").splitlines(keepends=True):
        if ln.startswith(":::MLLOG"):
            n += 1
            if n % every == 0:
                ln, cut = ln[: len(ln) // 2] + "\n", cut + 1
        out.append(ln)
    dst.write_text("".join(out), encoding="utf-8")
    return cut


def test_bad_lines_are_counted_and_warned(tmp_path, capsys):
    src = GNN_64 / "result_0.txt"
    bad = tmp_path / "result_0.txt"
    cut = _cut_lines(src, bad, 50)
    assert cut == 14
    rc = cli(["convert", str(bad), "-o", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert rc == 0 and f"{cut} MLPerf log line(s) not read: {cut} :::MLLOG bad JSON" in err, err
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["sources"]["mllog"]["skipped"] == {str(bad): {":::MLLOG bad JSON": cut}}
    total = sum(":::MLLOG" in ln for ln in src.read_text().splitlines())
    with Engine([tmp_path / "run"]) as eng:
        assert eng.sql("SELECT count(*) AS n FROM mlperf_events").to_pylist()[0]["n"] == total - cut
        run = eng.sql("SELECT bad_lines, round, system FROM mlperf_runs").to_pylist()[0]
    # outside a results tree: no round or folder, the system from the log's own :::SYSJSON line
    assert run == {"bad_lines": cut, "round": None, "system": "64xNVIDIA DGX H100"}


@pytest.mark.parametrize("text, needle", [
    ("hello\nno log here\n", "not a format tracekit reads"),
    (":::MLLOG {not json\n:::MLL 12 key no json\n", "not an MLPerf result log: no :::MLLOG or :::MLL line that parses"),
])
def test_not_an_mlperf_log_is_refused_in_one_line(tmp_path, capsys, text, needle):
    p = tmp_path / "result_0.txt"
    p.write_text(text)
    rc = cli(["convert", str(p), "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and str(p) in err and len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err and not (tmp_path / "out").exists()


@pytest.mark.slow
def test_study_shows_mlperf_scaling_only_with_result_logs(mlrun, tmp_path):
    from tracekit.study import build_study
    from tracekit.study.report import render_html

    study, out = build_study([mlrun], tmp_path / "study")
    t = study.tables["mlperf_scaling"]
    row = t[t.system == "dgx1_n130_ngc19.05_mxnet"].iloc[0]
    assert (row.baseline_system, row.accelerators, row.runs) == ("dgx1_ngc19.05_mxnet", 1040, mlrun.name)
    assert round(row.scaling_efficiency, 2) == 0.52 and len(t) == 14
    html = (out / "report.html").read_text()
    assert "id='mlperf_scaling'" in html and "mlperf_scaling.csv, mlperf_scaling.parquet — 14 row(s)" in html
    assert (out / "mlperf_scaling.csv").read_text().count("\n") == 15
    study.tables["mlperf_scaling"] = t.iloc[:0]  # a study of profiles only: no MLPerf section
    assert "mlperf_scaling" not in render_html(study, {}, "t")


def test_runner_log_is_mlperf_logging_lines(tmp_path):
    """The runner's MLLOG (tracekit/workloads/mlperflog.py), written by mlperf_logging.mllog and
    read back by the collector: keys in MLPerf's order, time to train, status from the losses."""
    pytest.importorskip("mlperf_logging")
    from tracekit.collectors.mllog.parse import read_log
    from tracekit.workloads.mlperflog import open_log, run_tables

    for losses, status in (([2.0, 1.5, 1.0], "success"), ([2.0, float("nan"), 1.0], "aborted")):
        path = tmp_path / f"{status}.txt"
        log = open_log(str(path), rank=0)
        log.begin("resnet50", 2, "cpu")
        log.run_start(16)
        log.run_stop([300_000_000, 100_000_000, 100_000_000], 1, 16, losses)
        cols, bad, _, other = read_log(path)
        assert not bad and other == 0
        assert cols["key"] == ["submission_benchmark", "submission_org", "submission_division",
                               "submission_status", "submission_platform", "init_start",
                               "global_batch_size", "init_stop", "run_start", "block_start", "epoch_start",
                               "epoch_stop", "block_stop", "train_samples", "tracked_stats", "run_stop"]
        assert json.loads(cols["value"][0]) == "resnet" and json.loads(cols["value"][4]) == "2xcpu"
        stats = json.loads(cols["value"][14])
        assert stats == {"throughput": 16 * 2 / 0.2, "step_ms": 100.0}
        manifest = {"collect": {}}
        runs = run_tables(path, manifest)["mlperf_runs"].to_pylist()[0]
        assert (runs["file"], runs["status"], runs["train_samples"], runs["global_batch_size"]) == \
            ("mllog.txt", status, 48, 16)
        assert runs["time_to_train_s"] == (cols["time_ns"][15] - cols["time_ns"][8]) / 1e9
        assert manifest["collect"]["mllog"]["files"] == 1
    assert open_log(str(tmp_path / "rank1.txt"), rank=1).run_start(16) is None
    assert not (tmp_path / "rank1.txt").exists()


@pytest.mark.slow
def test_collected_run_carries_its_mlperf_log(tmp_path):
    """tracekit collect: the runner's MLLOG in the run folder (mlperf_runs' time to train covers
    the runner's own step times), and mlperf_logging's compliance checker refuses only the rules
    docs/mlperf.md names (no evaluation, page cache not cleared)."""
    pytest.importorskip("mlperf_logging")
    pytest.importorskip("torch")
    out = tmp_path / "r"
    rc = cli(["collect", "resnet50", "-o", str(out), "--profiler", "torch", "--steps", "1",
              "--warmup-steps", "1", "--keep-raw"])
    assert rc == 0
    result = json.loads((out / "raw" / "result-0.json").read_text())
    with Engine([out]) as eng:
        run = eng.sql("SELECT * FROM mlperf_runs").to_pylist()[0]
        budget = eng.query("mlperf_step_budget").to_pylist()
        measured = [r["wall_ns"] for r in eng.query("step_summary").to_pylist() if not r["warmup"]]
    # the log's steps (warm-up included) times the profile's mean measured step
    assert len(budget) == 1 and budget[0]["log_steps"] == result["steps"] + result["warmup_steps"] == 2
    assert budget[0]["profiled_step_ns"] == pytest.approx(sum(measured) / len(measured), rel=1e-12)
    assert budget[0]["step_share"] == pytest.approx(2 * budget[0]["profiled_step_ns"] / 1e9 / run["time_to_train_s"])
    assert (run["benchmark"], run["status"], run["train_samples"]) == ("resnet", "success", 2 * result["batch_size"])
    assert sum(result["step_wall_ns"]) / 1e9 < run["time_to_train_s"] < 600
    proc = subprocess.run([sys.executable, "-m", "mlperf_logging.compliance_checker", "--usage", "training",
                           "--ruleset", "4.0.0", str(out / "raw" / "mllog.txt")],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300, check=False)
    refused = set(re.findall(r"occurrence of '(\w+)' but found 0", proc.stdout + proc.stderr))
    assert refused == {"cache_clear", "eval_samples", "eval_accuracy"}, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr


def test_hostile_lines_are_counted_never_a_traceback(tmp_path, capsys):
    p = tmp_path / "result_0.txt"
    p.write_text("\n".join([
        ":::MLLOG " + "[" * 100_000 + "]" * 100_000,  # nested past Python's recursion limit
        ':::MLLOG {"time_ms": NaN, "key": "run_start"}',
        ':::MLLOG {"time_ms": 1e400, "key": "run_start"}',
        ":::MLL 1.5 run_start: " + "{" * 50_000,
        ':::MLL 99999999999999999999 run_start: {"value": null}',
        ':::MLLOG {"time_ms": 1714041354271, "key": "run_start", "value": NaN, "metadata": {"status": [1]}}',
        ':::MLLOG {"time_ms": 1714041354272.5, "key": "run_stop", "value": 1e308, "metadata": {"status": {"a": 1}}}',
        '\x00\x1b[31m:::MLLOG {"time_ms": 1714041354273, "key": "\\u001b[31mred", "value": [Infinity]}',
        ':::SYSJSON {"system_name": {"a": 1}, "number_of_nodes": [2], "accelerators_per_node": "8", "division": 5}',
    ]) + "\n")
    assert cli(["convert", str(p), "-o", str(tmp_path / "run")]) == 0
    err = capsys.readouterr().err
    assert "5 MLPerf log line(s) not read: 1 :::MLL bad JSON, 1 :::MLL time out of range, " \
           "1 :::MLLOG bad JSON, 2 :::MLLOG no time_ms" in err and "Traceback" not in err
    with Engine([tmp_path / "run"]) as eng:
        ev = eng.sql("SELECT key, time_ns, value, value_num, json_valid(value) AS ok FROM mlperf_events "
                     "ORDER BY line").to_pylist()
        run = eng.sql("SELECT time_to_train_s, status, system_name, accelerators, division, system_source "
                      "FROM mlperf_runs").to_pylist()[0]
    assert [(e["key"], e["time_ns"], e["value_num"], e["ok"]) for e in ev] == [
        ("run_start", 1714041354271000000, None, True), ("run_stop", 1714041354272500000, 1e308, True),
        ("\x1b[31mred", 1714041354273000000, None, True)]
    assert [e["value"] for e in ev] == ['"nan"', "1e+308", '"[inf]"']
    # a status or a description field of the wrong type is none
    assert run == {"time_to_train_s": 0.0015, "status": None, "system_name": None, "accelerators": None,
                   "division": None, "system_source": "sysjson"}


def test_a_failed_run_is_one_of_the_dropped_slowest(tmp_path):
    """MLPerf's rule (mlperf_logging's summarizer): a run that did not converge counts among the
    dropped slowest; a second one (more than one of ten) leaves no score."""
    src = V40 / "results" / "eos_ngc24.04_dgl" / "gnn"
    tree = tmp_path / "training_results_v4.0" / "NVIDIA"
    folder = tree / "results" / "eos_ngc24.04_dgl" / "gnn"
    shutil.copytree(src, folder)
    shutil.copytree(V40 / "systems", tree / "systems")
    scores = {}
    for failed in (1, 2):
        for i in range(failed):
            p = folder / f"result_{i}.txt"
            p.write_text(re.sub(r'("key": "run_stop".*"status": )"success"', r'\1"aborted"', p.read_text()))
        run = convert([tmp_path / "training_results_v4.0"], tmp_path / f"run{failed}")
        with Engine([run]) as eng:
            scores[failed] = eng.query("mlperf_score").to_pylist()[0]
    ok = sorted(float(b - a) / 60 for a, b in (_raw_start_stop_s(folder / f"result_{i}.txt") for i in range(1, 10)))
    assert scores[1]["runs"] == 10
    assert scores[1]["score_min"] == pytest.approx(sum(ok[1:]) / 8 * 1.003734827264239, rel=1e-12)
    assert scores[2]["score_min"] is None


def test_a_folder_without_result_files_is_refused(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert cli(["convert", str(tmp_path / "empty"), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "is a directory, not a profiler output file" in err and "holds no result_*.txt" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


@pytest.mark.slow
def test_logs_beside_a_jobs_ranks_keep_the_job(tmp_path):
    """Kineto traces of two ranks and an MLPerf log: the ranks stay one job (one rank each) and
    the log's tables go in beside them. The ranks are copies of the small CPU-only rank's trace
    (the NCCL trace's 760 kB per rank took twice the time and asserted nothing more)."""
    from jobgen import make_job

    job = make_job(tmp_path / "job", ranks=2, seed=1, source=FIXTURES / "kineto" / "kineto_cpu_only_rank.json.gz")
    log = tmp_path / "result_0.txt"
    shutil.copyfile(GNN_64 / "result_0.txt", log)
    run = convert([*job.paths, log], tmp_path / "run")
    manifest = json.loads((run / "manifest.json").read_text())
    assert [r["rank"] for r in manifest["ranks"]] == [0, 1]
    assert manifest["tables"]["mlperf_runs"]["rows"] == 1 and "mllog" in manifest["sources"]
    assert str(log) in {i["path"] for i in manifest["inputs"]}
