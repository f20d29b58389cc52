"""MLPerf tables: the entries of MLPerf training result logs and one row per training run
(collectors/mllog, docs/mlperf.md)."""

from __future__ import annotations

from tracekit.schema.core import F64, I32, I64, STR, Table
from tracekit.schema.core import Column as C

i32, i64, f64, s = I32, I64, F64, STR

_FILE = C("file", s, "text", "The result file, as given to tracekit convert (or found under the "
          "folder given); joins mlperf_events to mlperf_runs.", required=True)

MLPERF_EVENTS = Table(
    "mlperf_events",
    "One row per MLPerf log entry of a training result file, in file order: the `:::MLL <time> "
    "<key>: {json}` lines of rounds 0.5/0.6 and the `:::MLLOG {json}` lines of 0.7 onward (found "
    "anywhere in a line, after a rank prefix or other output, as MLPerf's parser does). The "
    "program's other output is not a row. A line with the token that does not parse is skipped "
    "and counted (manifest sources.mllog.skipped, and a warning).",
    (
        _FILE,
        C("line", i64, "count", "Line number in the file (1-based).", required=True),
        C("time_ns", i64, "ns", "When the entry was logged, Unix epoch: 0.5/0.6 the seconds "
          "written (exactly, e.g. 1560881731.835 s), 0.7+ time_ms x 1e6.", required=True),
        C("key", s, "text", "The entry's key (run_start, eval_accuracy, epoch_start, ...).",
          required=True),
        C("value", s, "text", "The entry's value as compact JSON (NULL for a null value); "
          "read it with DuckDB's json functions."),
        C("value_num", f64, "value", "The value when it is a number, else NULL (unit: the key's)."),
        C("metadata", s, "text", "The entry's metadata object as compact JSON (file, lineno, "
          "epoch_num, status, samples_count, ...); NULL when empty."),
        C("event_type", s, "enum", "'POINT_IN_TIME', 'INTERVAL_START' or 'INTERVAL_END': 0.7+ "
          "as logged (NULL if another value); 0.5/0.6 lines carry none: keys ending in _start "
          "are INTERVAL_START, _stop INTERVAL_END, others POINT_IN_TIME."),
        C("epoch_num", f64, "count", "metadata.epoch_num when numeric (epochs may be fractional, "
          "e.g. GNN's 0.85), else NULL."),
        C("samples_count", f64, "count", "metadata.samples_count when numeric (samples trained "
          "so far), else NULL."),
        C("format", s, "enum", "'MLL' (0.5/0.6 line) or 'MLLOG' (0.7+ line).", required=True),
    ),
    group="mlperf",
)

MLPERF_RUNS = Table(
    "mlperf_runs",
    "One row per MLPerf training result file (one run to the quality target). The submission "
    "comes from the file's place in a results tree (`training_results_vX.Y/SUBMITTER/results/"
    "SYSTEM/BENCHMARK/result_N.txt`) and the system description `SUBMITTER/systems/SYSTEM.json` "
    "(0.6: its `entry` literal), else from the log's `:::SYSJSON` line or `submission_*` entries. "
    "The run's values are from its mlperf_events up to run_stop.",
    (
        _FILE,
        C("round", s, "text", "MLPerf round ('0.6', '4.0') from the folder training_results_vX.Y "
          "above the file; NULL when the file is not in such a tree."),
        C("submitter", s, "text", "SUBMITTER folder, else the log's submission_org."),
        C("division", s, "enum", "'closed' or 'open' (description, else submission_division)."),
        C("availability", s, "enum", "'onprem', 'cloud', 'available', 'preview' or 'research' "
          "(the description's status, else submission_status)."),
        C("system", s, "text", "SYSTEM folder = the description file's name without .json "
          "(e.g. dgx1_n130_ngc19.05_mxnet), else the log's submission_platform."),
        C("system_name", s, "text", "The description's own system_name (0.6: its hardware)."),
        C("platform", s, "text", "The log's submission_platform (e.g. '130xDGX-1 with V100')."),
        C("benchmark", s, "text", "BENCHMARK folder, else the log's submission_benchmark."),
        C("result_index", i32, "id", "N of result_N.txt; NULL for another name."),
        C("framework", s, "text", "The description's framework."),
        C("number_of_nodes", i32, "count", "Nodes (description: number_of_nodes; 0.6: "
          "nodes.num_nodes)."),
        C("accelerators_per_node", i32, "count", "Accelerators per node (accelerators_per_node; "
          "0.6: nodes.num_accelerators)."),
        C("accelerators", i32, "count", "number_of_nodes x accelerators_per_node; NULL when "
          "either is unknown."),
        C("accelerator_model", s, "text", "accelerator_model_name (0.6: nodes.accelerator), "
          "e.g. 'Tesla V100-SXM2-16GB'."),
        C("system_source", s, "enum", "Where the system came from: 'systems_file', 'sysjson' "
          "(the log's :::SYSJSON line), 'submission_entry' (0.6 log), NULL: none."),
        C("global_batch_size", f64, "count", "The last global_batch_size entry's value."),
        C("run_start_ns", i64, "ns", "time_ns of the first run_start entry (Unix epoch)."),
        C("run_stop_ns", i64, "ns", "time_ns of the first run_stop entry after it."),
        C("time_to_train_s", f64, "s", "(run_stop_ns - run_start_ns) / 1e9, seconds: MLPerf's "
          "time to train, the run's score; NULL without run_start or run_stop."),
        C("status", s, "enum", "run_stop's metadata.status: 'success' (reached the target) or "
          "'aborted'; NULL without run_stop."),
        C("epoch_num", f64, "count", "The last epoch_num logged up to run_stop: epochs to the "
          "target (0.6 ResNet: the last evaluated epoch)."),
        C("samples_count", f64, "count", "The last samples_count logged up to run_stop: samples "
          "to the target, for benchmarks that count samples (LLM fine-tuning)."),
        C("train_samples", f64, "count", "The train_samples entry's value (0.7+: samples per "
          "epoch of the training set)."),
        C("eval_accuracy", f64, "value", "The last eval_accuracy value up to run_stop (the "
          "benchmark's quality metric: top-1, mAP, or a loss for llama2_70b_lora)."),
        C("quality_target", f64, "value", "The benchmark's quality target in that round (MLPerf "
          "Training rules; the logs do not state it); NULL for a round or benchmark not known."),
        C("target_direction", s, "enum", "'higher' (accuracy >= target) or 'lower' (a loss "
          "<= target) is better."),
        C("scaling_factor", f64, "value", "scaling.json's scaling_factor beside the result files "
          "(4.0+: the score is multiplied by it); NULL when there is none."),
        C("events", i64, "count", "mlperf_events rows of the file.", required=True),
        C("bad_lines", i64, "count", "Lines with the MLPerf token that did not parse.",
          required=True),
    ),
    group="mlperf",
)

TABLES = (MLPERF_EVENTS, MLPERF_RUNS)
