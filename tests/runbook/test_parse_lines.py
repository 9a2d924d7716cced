"""The line tables of kvplan.runbook.parse (issue 14 item 1): every engine line the parser reads, with the versions
that print it and an example, and the structure rules (process/rank grouping, comment prefaces, quoted lines,
logs pasted without prefixes, the profiling-time override).

An example whose ``source`` is a log in the repo must be in that log verbatim (a real line, never invented); the
rows whose source is ``format:`` are the engine's format string (no public log of that form in the repo yet).
"""

from __future__ import annotations

import re

import pytest

from kvplan.runbook import parse
from kvplan.runbook.parse import SGLANG_LINES, VLLM_LINES, LineForm, parse_log, records
from kvplan.runbook.parse import events as parse_events
from tests.runbook.conftest import LOGS, SHARED_LOGS, line_of, parse_patterns

ROWS = [("sglang", r) for r in SGLANG_LINES] + [("vllm", r) for r in VLLM_LINES]


def _id(item: tuple[str, LineForm]) -> str:
    engine, row = item
    return f"{engine}-{row.kind}-{row.versions.split(' ')[0]}"


@pytest.mark.parametrize("item", ROWS, ids=[_id(i) for i in ROWS])
def test_each_row_reads_its_example(item: tuple[str, LineForm]) -> None:
    engine, row = item
    pattern = row.pattern
    assert isinstance(pattern, re.Pattern) and pattern.search(row.example) is not None
    events = [e for rec in records._records([row.example], records._LineCount()) for e in parse_events._events(rec)]
    assert (row.kind, engine) in {(e.kind, e.engine) for e in events}


@pytest.mark.parametrize("item", [i for i in ROWS if not i[1].source.startswith("format:")], ids=_id)
def test_each_real_example_is_in_its_log_verbatim(item: tuple[str, LineForm]) -> None:
    _, row = item
    path = LOGS / row.source
    if not path.is_file():
        path = SHARED_LOGS / row.source
    assert path.is_file(), row.source
    assert row.example in path.read_text(encoding="utf-8"), f"{row.example!r} not in {row.source}"


def test_every_event_pattern_is_in_a_table() -> None:
    # the patterns _events reads lines with (helpers that read inside a matched line are not rows of their own)
    helpers = {"_ANSI", "_START", "_CONTAINER", "_ARG_INT", "_ARG_NUMBER", "_DICT_ITEM", "_LOAD_AVAIL", "_LOAD_USAGE",
               "_LOAD_TYPE", "_LOAD_DTYPE", "_LOAD_QUANT", "_VL_V0_FIELD", "_VL_V0_DEVICE", "_MESSAGE_START",
               "_SG_BASELINE", "_VL_BLOCK", "_VL_FORMAT", "_VL_OVERRIDE", "_VL_DCP", "_VL_MAX_LEN", "_VL_ARCH",
               "_VL_NO_MEMORY"}  # fmt: skip
    in_rows = {r.pattern for _, r in ROWS}
    names = {name for name, p in parse_patterns().items() if p not in in_rows}
    assert names <= helpers


def test_tables_cover_every_generation() -> None:
    # issue 14: SGLang 0.3 -> 0.5.x, vLLM V0 0.5 -> 0.8, V1 0.9 -> 0.33; each generation's pool line is a row
    sg = {r.kind for r in SGLANG_LINES}
    vl = {r.kind for r in VLLM_LINES}
    assert {"args", "load_begin", "load_end", "kv", "kv_sizes", "pool_end", "summary", "negative_profile"} <= sg
    assert {"v0_blocks", "v0_profile", "v0_budget", "v0_terms", "v0_maxlen_error", "engine_config"} <= vl
    assert {"available", "kv_size", "maxlen_error", "profiling_override", "version"} <= vl


# --------------------------------------------------------------------------- structure


def test_header_comment_lines_are_skipped_and_quoted_lines_are_not_events() -> None:
    # regression (issue 14): a fixture's '#' header was folded into line 1 and the engine line quoted in it
    # ('Overriding num_gpu_blocks=0 …' in the source_detail line) counted as an event: two runs instead of one
    path = LOGS / "field" / "vllm-qwen3-8b-h100-llmd-planner-tp1-profiling-override.log"
    text = path.read_text(encoding="utf-8")
    log = parse_log(text, "override")
    assert len(log.runs) == 1
    assert log.chosen.first_line == line_of(text, "▄▄ ▄█ █")  # the first body line: the banner


def test_quoted_line_inside_another_is_not_an_event() -> None:
    text = (
        "[2026-03-01 12:00:00 TP0] KV Cache is allocated. #tokens: 1000, KV size: 1.00 GB\n"
        "[2026-03-01 12:00:01] user note: 'KV Cache is allocated. #tokens: 5, KV size: 0.01 GB' was the old one\n"
    )
    run = parse_log(text).chosen
    assert [k.value.tokens for k in run.kv] == [1000] and run.draft_kv == ()


def test_v1_banner_is_the_version() -> None:
    run = parse_log(
        "(APIServer pid=1) INFO 04-22 01:04:39 [entrypoints/utils.py:299]  ▄▄ ▄█ █     █     █ ▀▄▀ █  version 0.19.0\n"
        "(EngineCore pid=243) INFO 04-22 01:05:31 [v1/worker/gpu_worker.py:436] Available KV cache memory: 57.5 GiB\n"
    ).chosen
    assert run.version is not None and run.version.value == "0.19.0"


def test_per_worker_lines_of_one_v0_start_are_one_start() -> None:
    # regression (issue 14): V0 workers share a process name ('VllmWorkerProcess'); their repeated 'Loading model
    # weights took' lines (vllm-project/vllm#12664, two ranks, verbatim) were read as separate starts
    text = (
        "INFO 02-02 18:01:24 model_runner.py:1116] Loading model weights took 30.7098 GB\n"
        "(VllmWorkerProcess pid=106022) INFO 02-02 18:01:24 model_runner.py:1116] "
        "Loading model weights took 30.7098 GB\n"
        "(VllmWorkerProcess pid=106023) INFO 02-02 18:01:24 model_runner.py:1116] "
        "Loading model weights took 30.7098 GB\n"
        "INFO 02-02 18:01:30 gpu_executor.py:113] # GPU blocks: 1000, # CPU blocks: 2048\n"
    )
    log = parse_log(text)
    assert len(log.runs) == 1
    assert [m.rank for m in log.chosen.model_loading] == [
        None, "VllmWorkerProcess pid=106022", "VllmWorkerProcess pid=106023"
    ]  # fmt: skip


def test_v1_per_rank_workers_are_one_start() -> None:
    lines = [f"(Worker_TP{r} pid={100 + r}) INFO 03-01 12:00:00 [gpu_worker.py:1] Model loading took 10.5 GiB memory"
             for r in range(8)]  # fmt: skip
    lines += [f"(Worker_TP{r} pid={100 + r}) INFO 03-01 12:00:09 [gpu_worker.py:2] Available KV cache memory: 50.0 GiB"
              for r in range(8)]  # fmt: skip
    lines.append("(EngineCore_DP0 pid=99) INFO 03-01 12:00:10 [kv_cache_utils.py:3] GPU KV cache size: 1,000 tokens")
    log = parse_log("\n".join(lines))
    assert len(log.runs) == 1 and len(log.chosen.available_kv) == 8


def test_sglang_dp_tp_ep_ranks_are_one_start() -> None:
    lines = [f"[2026-03-01 12:00:00 DP{r // 4} TP{r} EP{r}] Load weight begin. avail mem=138.80 GB" for r in range(8)]
    lines += [f"[2026-03-01 12:00:09 DP{r // 4} TP{r} EP{r}] KV Cache is allocated. #tokens: 64, KV size: 1.00 GB"
              for r in range(8)]  # fmt: skip
    log = parse_log("\n".join(lines))
    assert len(log.runs) == 1 and log.chosen.ranks[:2] == ("DP0 TP0 EP0", "DP0 TP1 EP1")


def test_v0_log_without_prefixes_is_read_line_by_line() -> None:
    # regression: lines pasted without prefixes were joined as terminal wraps into one record (the V0 blocks line
    # read as '…0.90GPU blocks')
    path = LOGS / "doctor-vllm-v0-llama-3.1-8b-rtx3090-issue-10517.log"
    text = path.read_text(encoding="utf-8")
    log = parse_log(text)
    assert len(log.runs) == 2
    first, second = log.runs
    assert first.v0_blocks is not None and first.v0_blocks.value.gpu_blocks == 1952
    assert first.v0_blocks.line == line_of(text, "GPU blocks: 1952")
    assert second.v0_blocks is not None and second.v0_blocks.value.gpu_blocks == 1478
    assert second.v0_max_len_error is not None
    assert (second.v0_max_len_error.value.max_model_len, second.v0_max_len_error.value.kv_tokens) == (29_000, 23_648)
    mem = second.v0_memory
    assert mem is not None and mem.value.kv is not None and mem.value.kv.text == "2.89"
    assert mem.value.total is not None and mem.value.total.text == "23.58" and mem.value.utilization == "0.90"
    assert log.chosen is second


def test_v0_065_memory_lines_merge() -> None:
    path = LOGS / "field" / "vllm-v0-llama-2-7b-lora-h100-gateway-api-pr-550.log"
    run = parse_log(path.read_text(encoding="utf-8")).chosen
    assert run.v0_blocks is not None and run.v0_blocks.value == parse.V0Blocks(7191, 512, "cuda")
    m = run.v0_memory
    assert m is not None
    got = {k: (v.text if isinstance(v, parse.Gib) else v) for k, v in vars(m.value).items()}
    assert got == {"total": "79.19", "utilization": "0.90", "weights": "12.55", "non_torch": "0.16", "peak": "2.38",
                   "kv": "56.18"}  # fmt: skip


def test_v0_engine_line_is_v0_and_v1_line_is_v1() -> None:
    v0 = parse_log((LOGS / "field" / "vllm-v0-rho-1b-h200-grpocredit-0.6.4.log").read_text(encoding="utf-8")).chosen
    assert v0.generation == "V0" and v0.version is not None and v0.version.value == "0.6.4.post1"
    path = LOGS / "field" / "vllm-qwen3-8b-h100-llmd-planner-tp1.log"
    v1 = parse_log(path.read_text(encoding="utf-8")).chosen
    assert v1.generation == "V1"


def test_sglang_041_kv_line_without_tokens_takes_the_summary_rows() -> None:
    path = LOGS / "doctor-sglang-0.4.1-llama-3.1-8b-h100-docs-clipping.log"
    run = parse_log(path.read_text(encoding="utf-8")).chosen
    assert len(run.kv) == 1
    k = run.kv[0].value
    # the line prints no #tokens; the rows are the summary's max_total_num_tokens=444500 (no dcp in 0.4.1)
    assert k.tokens == 444_500 and k.k is not None and k.k.text == "27.13" and k.mha


def test_negative_available_memory_is_a_failed_start() -> None:
    # vllm-project/vllm-ascend#9372 (verbatim): the weights left no memory
    run = parse_log("Loading model weights took 27.5376 GB\nAvailable KV cache memory: -0.87 GiB\n").chosen
    assert run.available_kv == () and run.complete and "-0.87 GiB" in run.errors[0].value


def test_k9s_frame_is_stripped() -> None:
    path = LOGS / "field" / "vllm-v0-llama-2-7b-lora-h100-gateway-api-pr-550.log"
    assert parse.clean_line("│ INFO 03-21 20:15:46 [executor_base.py:111] # cuda blocks: 7191").startswith("INFO")
    assert path.is_file()


def test_sglang_negative_profile_warning() -> None:
    run = parse_log("[2026-03-01 12:00:09 TP0] max_total_num_tokens=-2048 is negative\n").chosen
    # the format string stands in for a real line here (no public log of it found): a failed start, not nothing
    assert run.negative_profile is not None and run.complete
