"""The log parser: the engines' exact lines, real excerpts, and messy logs (ANSI, ranks, wraps, restarts).

Every expected figure is either read off the fixture text (line numbers are found in the text, not copied) or
derived in a comment; SGLang's "GB" are GiB, so a printed 2-decimal figure X.YZ stands for XYZ × 2^30 // 100 bytes.
"""

from __future__ import annotations

import pytest

from kvplan.errors import InputError
from kvplan.runbook.parse import Gib, LogError, kv_pairs, parse_log
from kvplan.units import GiB
from tests.runbook.conftest import fixture, line_of, shared

# --------------------------------------------------------------------------- values


def test_gib_figure_is_exact_to_half_a_unit() -> None:
    g = Gib.parse("46.80")
    assert (g.units, g.decimals) == (4680, 2)
    # 46.80 GiB = 4680 × 2^30 / 100 = 50,251,117,363.2 -> 50,251,117,363 B
    assert g.bytes == 50_251_117_363
    # 46.795 GiB = 50,245,748,654.08 -> 50,245,748,655 (rounded up); 46.805 GiB = 50,256,486,072.32 -> ...072
    assert (g.low_bytes, g.high_bytes) == (50_245_748_655, 50_256_486_072)
    assert g.half_unit_bytes == GiB // 200 == 5_368_709
    assert g.covers(50_251_117_363) and not g.covers(50_256_486_073)


def test_gib_figure_precision() -> None:
    # vLLM's round(x, 2) prints 36.10 as "36.1": still a 2-decimal figure
    assert Gib.parse("36.1").units == 3610 and Gib.parse("36.1").decimals == 2
    # older vLLM printed %.4f: the tolerance is that of 4 decimals
    g = Gib.parse("94.4612")
    assert (g.units, g.decimals) == (944_612, 4)
    assert g.half_unit_bytes == GiB // 20_000


def test_kv_pairs_nesting_and_quotes() -> None:
    text = "a=1, b='x, y', c=Foo(d=2, e=[1, 2]), f={'g': 3}, h=None) trailing, z=9"
    assert kv_pairs(text) == (
        ("a", "1"),
        ("b", "'x, y'"),
        ("c", "Foo(d=2, e=[1, 2])"),
        ("f", "{'g': 3}"),
        ("h", "None"),
    )


# --------------------------------------------------------------------------- real excerpts (shared/logs)


def test_real_sglang_mha_excerpt() -> None:
    text = shared("sglang-qwq-32b-l4-didier-durand-llms-in-clouds.log")
    log = parse_log(text)
    assert len(log.runs) == 1
    run = log.chosen
    assert run.engine == "sglang" and run.complete
    assert run.ranks == ("TP3", "TP0", "TP1", "TP2")
    assert run.args is not None
    a = run.args.value
    assert (a.integer("tp_size"), a.number("mem_fraction_static"), a.text("kv_cache_dtype")) == (4, "0.85", "auto")
    assert a.text("context_length") is None and a.integer("chunked_prefill_size") == 2048
    assert a.text("model_path") == "/home/model/Qwen/QwQ-32B"
    # 4 ranks each: "Load weight begin. avail mem=21.63 GB", "Load weight end ... avail mem=6.09 GB, mem usage=15.54 GB"
    assert [b.value.text for b in run.load_begin] == ["21.63"] * 4
    assert {(e.value.avail.text, e.value.usage.text) for e in run.load_end if e.value.avail and e.value.usage} == {
        ("6.09", "15.54")
    }
    assert run.model_class == "Qwen2ForCausalLM" and run.load_end[0].value.dtype == "torch.bfloat16"
    kv = run.kv[0].value
    assert kv.mha and kv.tokens == 46_611 and kv.kv is None and run.draft_kv == ()
    assert kv.k is not None and kv.v is not None and kv.k.text == kv.v.text == "1.42"
    # the collector's check: 64 layers × 2 KV heads per rank × 128 × 2 B = 32,768 B per token for K;
    # SGLang allocates size + 1 padding row (page 1): 46,612 × 32,768 = 1,527,382,016 B = 1.42249 GiB -> "1.42"
    assert kv.k.covers(46_612 * 32_768)
    assert [p.value.text for p in run.pool_end] == ["2.09"] * 4
    assert run.summary is not None
    s = run.summary.value
    assert (s.max_total_num_tokens, s.chunked_prefill_size, s.max_prefill_tokens) == (46_611, 2048, 16_384)
    assert (s.max_running_requests, s.context_len, s.available_gpu_mem) == (2049, 131_072, None)
    assert run.summary.line == line_of(text, "TP0] max_total_num_tokens")


@pytest.mark.parametrize(
    ("name", "tokens", "dcp"),
    [
        ("vllm-kimi-k2-thinking-h200-vllm-recipes-tp8.log", 715_072, None),
        ("vllm-kimi-k2-thinking-h200-vllm-recipes-tp8-dcp8.log", 5_721_088, 8),
    ],
)
def test_real_vllm_kimi_excerpts(name: str, tokens: int, dcp: int | None) -> None:
    text = shared(name)
    run = parse_log(text).chosen
    assert run.engine == "vllm" and run.complete
    assert [a.value.text for a in run.available_kv] == ["46.80"]
    assert run.available_kv[0].rank == "Worker_TP0"
    assert run.available_kv[0].line == line_of(text, "Available KV cache memory")
    assert run.kv_cache_size is not None
    assert run.kv_cache_size.value.tokens == tokens and run.kv_cache_size.value.max_model_len is None
    assert run.kv_cache_size.rank == "EngineCore_DP0"
    assert (run.dcp_multiplier.value if run.dcp_multiplier else None) == dcp


# --------------------------------------------------------------------------- synthetic fixtures


def test_sglang_0_5_23_fixture() -> None:
    text = fixture("sglang-0.5.23-glm53-match.log")
    log = parse_log(text)
    run = log.chosen
    assert len(log.runs) == 1 and run.engine == "sglang"
    assert run.ranks == tuple(f"TP{r}" for r in range(8))
    assert len(run.load_begin) == len(run.load_end) == len(run.kv) == len(run.pool_end) == 8
    end = run.load_end[0].value
    assert (end.model_class, end.quant, end.avail, end.usage) == (
        "GlmMoeDsaForCausalLM",
        "fp8",
        Gib.parse("44.34"),
        Gib.parse("94.46"),
    )
    kv = run.kv[0].value
    assert (kv.tokens, kv.dtype, kv.kv) == (567_616, "torch.float8_e4m3fn", Gib.parse("28.52"))
    assert run.summary is not None and run.summary.value.max_total_num_tokens == 567_616
    assert run.summary.value.available_gpu_mem == Gib.parse("5.12")
    assert run.page_size is not None and run.page_size.value == 64
    assert run.dsa_backends is not None and run.dsa_backends.value == ("flashmla_kv", "flashmla_kv")
    assert run.args is not None and run.args.value.text("dsa_decode_backend") == "flashmla_kv"
    assert run.args.value.raw("cuda_graph_bs") == "[1, 2, 4, 8, 16, 24, 32]"


def test_sglang_0_5_9_fixture() -> None:
    run = parse_log(fixture("sglang-0.5.9-glm53-indexer-all-layers.log")).chosen
    assert run.kv[0].value.dtype is None and run.kv[0].value.tokens == 584_128
    assert run.load_end[0].value.dtype == "torch.bfloat16" and run.load_end[0].value.quant is None
    assert run.args is not None and run.args.value.has("nsa_decode_backend") and not run.args.value.has("dcp_size")


def test_vllm_fixture() -> None:
    text = fixture("vllm-0.33.0-glm53-max-seq-len.log")
    run = parse_log(text).chosen
    assert run.engine == "vllm" and run.complete
    assert run.version is not None and run.version.value == "0.33.0"
    assert run.architecture is not None and run.model_class == "GlmMoeDsaForCausalLM"
    assert run.args is not None and run.cli_args is not None
    cfg, cli = run.args.value, run.cli_args.value
    assert (cfg.integer("tensor_parallel_size"), cfg.integer("max_seq_len"), cfg.text("kv_cache_dtype")) == (
        8,
        1_048_576,
        "fp8",
    )
    assert cfg.raw("speculative_config") == "None" and cfg.integer("decode_context_parallel_size") == 1
    assert cli.integer("max_model_len") == 1_048_576 and cli.text("model") == "zai-org/GLM-5.3-FP8"
    assert run.block_size is not None and run.block_size.value == 64
    assert run.kv_format is not None and run.kv_format.value == "fp8_ds_mla"
    assert run.max_model_len is not None and run.max_model_len.value == 1_048_576
    assert [m.value.text for m in run.model_loading] == ["94.46"] * 8
    assert [a.value.text for a in run.available_kv] == ["25.94"] * 8
    assert run.max_len_error is not None
    e = run.max_len_error.value
    assert (e.max_model_len, e.needed.text, e.available.text, e.estimated_max_len) == (
        1_048_576,
        "52.68",
        "25.94",
        516_288,
    )
    assert run.max_len_error.line == line_of(text, "ValueError: To serve")
    assert run.kv_cache_size is None and run.kv == ()


def test_messy_fixture_three_starts() -> None:
    text = fixture("sglang-messy-three-starts.log")
    log = parse_log(text)
    assert [r.complete for r in log.runs] == [True, True, False]
    first, second, third = log.runs
    # run 1: ANSI colours inside the "[… TP0]" prefix are stripped; 2 ranks; the traceback after it is harmless
    assert first.ranks == ("TP0", "TP1") and first.kv[0].value.tokens == 330_560
    assert first.summary is not None and first.summary.value.max_total_num_tokens == 330_560
    # run 2: TP0's and TP1's "Load weight end" were glued on one line and every line wrapped at 100 columns
    assert log.chosen is second and log.skipped_after == (third,)
    assert len(second.load_end) == 8 and {e.value.usage for e in second.load_end} == {Gib.parse("94.46")}
    # TP1's record begins mid-line, on the piece of the wrapped glued line that holds its prefix
    assert [e.rank for e in second.load_end[:2]] == ["TP0", "TP1"]
    assert second.load_end[0].line == line_of(text, "12:25:12 TP0] Load weight end")
    assert second.load_end[1].line == line_of(text, "12:25:12 TP1]")
    # "KV siz|e: 28.52 GB" wrapped: joined back without a separator; the colour codes are gone
    assert [k.value.kv for k in second.kv] == [Gib.parse("28.52")] * 8
    assert second.summary is not None
    assert second.summary.value.max_total_num_tokens == 567_616 and second.summary.value.max_prefill_tokens == 16_384
    assert second.first_line == line_of(text, "server_args=", 2)
    # run 3: a dump and two "Load weight begin" lines, cut off
    assert third.first_line == line_of(text, "server_args=", 3) and len(third.load_begin) == 2


def test_garbage_is_exit_2_naming_the_lines_looked_for() -> None:
    with pytest.raises(LogError) as e:
        parse_log(fixture("garbage.log"), "garbage.log")
    assert isinstance(e.value, InputError) and e.value.exit_code == 2
    message = str(e.value)
    assert message.startswith("garbage.log: no engine startup lines recognised")
    for wanted in ("KV Cache is allocated", "max_total_num_tokens=", "Available KV cache memory", "GPU KV cache size"):
        assert wanted in message


# --------------------------------------------------------------------------- messy cases, inline

KV = "KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 567616, KV size: 28.52 GB"
SUMMARY = (
    "max_total_num_tokens=567616, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=2048, "
    "context_len=1048576, available_gpu_mem=5.12 GB"
)


def test_ansi_codes_with_and_without_escape_byte() -> None:
    text = (
        f"\x1b[32m[2026-03-01 12:00:00 TP0]\x1b[0m {KV}\n"
        f"[32m[2026-03-01 12:00:01 TP0][0m {SUMMARY}\n"  # the ESC byte lost in a copy-paste
    )
    run = parse_log(text).chosen
    assert run.kv[0].value.tokens == 567_616 and run.kv[0].rank == "TP0"
    assert run.summary is not None and run.summary.value.max_total_num_tokens == 567_616


def test_container_prefixes() -> None:
    text = (
        f"sglang-1  | [2026-03-01 12:00:00 TP0] {KV}\n"
        "2026-04-19 12:18:49.415 | (Worker_TP0 pid=3) INFO 04-19 10:18:49 [gpu_worker.py:349] Available KV cache "
        "memory: 46.80 GiB\n"
    )
    runs = parse_log(text).runs
    # an engine switch (SGLang -> vLLM) is a new start
    assert [r.engine for r in runs] == ["sglang", "vllm"]
    assert runs[0].kv[0].rank == "TP0" and runs[1].available_kv[0].rank == "Worker_TP0"


def test_wrapped_number_is_joined_and_a_blank_line_ends_a_record() -> None:
    wrapped = (
        "[2026-03-01 12:00:00 TP0] KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 5676\n"
        "16, KV si\n"
        "ze: 28.52 GB\n"
    )
    assert parse_log(wrapped).chosen.kv[0].value.tokens == 567_616
    broken = f"[2026-03-01 12:00:00 TP0] KV Cache is allocated. #tokens: 5676\n\n16, KV size: 28.52 GB\n[x] {SUMMARY}\n"
    run = parse_log(broken).chosen
    assert run.kv == () and run.summary is not None


def test_interleaved_ranks_glued_on_one_line() -> None:
    text = (
        "[2026-03-01 12:00:00 TP3] Load weight begin. avail mem=138.80 GB[2026-03-01 12:00:00 TP1] Load weight "
        "begin. avail mem=138.79 GB\n"
        "(Worker_TP1 pid=5) INFO 03-01 12:00:00 [a.py:1] Model loading took 94.46 GiB memory and 1.0 seconds"
        "(Worker_TP0 pid=4) INFO 03-01 12:00:00 [a.py:1] Model loading took 94.47 GiB memory and 1.0 seconds\n"
    )
    runs = parse_log(text).runs
    assert [(b.rank, b.value.text) for b in runs[0].load_begin] == [("TP3", "138.80"), ("TP1", "138.79")]
    assert [(m.rank, m.value.text) for m in runs[1].model_loading] == [("Worker_TP1", "94.46"), ("Worker_TP0", "94.47")]


def test_restarts_without_a_config_dump() -> None:
    # SGLang: a weight load after the pool lines is a new start
    sg = (
        "[2026-03-01 12:00:00 TP0] Load weight begin. avail mem=138.80 GB\n"
        f"[2026-03-01 12:05:00 TP0] {KV}\n"
        "[2026-03-01 13:00:00 TP0] Load weight begin. avail mem=138.70 GB\n"
        f"[2026-03-01 13:05:00 TP0] {KV.replace('567616', '567552')}\n"
    )
    log = parse_log(sg)
    assert [r.kv[0].value.tokens for r in log.runs] == [567_616, 567_552]
    assert log.chosen.index == 2 and log.chosen.load_begin[0].value.text == "138.70"
    # vLLM: a repeated "Model loading took" after a KV line
    vl = (
        "(Worker_TP0 pid=1) INFO 03-01 12:00:00 [x.py:1] Model loading took 94.46 GiB memory and 1.0 seconds\n"
        "(Worker_TP0 pid=1) INFO 03-01 12:00:01 [x.py:1] Available KV cache memory: 25.94 GiB\n"
        "(EngineCore_DP0 pid=2) INFO 03-01 12:00:02 [x.py:1] GPU KV cache size: 516,352 tokens\n"
        "(Worker_TP0 pid=7) INFO 03-01 13:00:00 [x.py:1] Model loading took 94.46 GiB memory and 1.0 seconds\n"
    )
    log = parse_log(vl)
    assert [r.complete for r in log.runs] == [True, False]
    assert log.chosen.index == 1 and log.skipped_after == (log.runs[1],)
    # the same rank's scheduler summary twice: two starts
    twice = f"[2026-03-01 12:00:00 TP0] {SUMMARY}\n[2026-03-01 12:10:00 TP0] {SUMMARY}\n"
    assert len(parse_log(twice).runs) == 2


def test_draft_pool_line() -> None:
    text = (
        f"[2026-03-01 12:00:00 TP0] {KV}\n"
        "[2026-03-01 12:00:01 TP0] KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 567616, "
        "KV size: 0.42 GB\n"
    )
    run = parse_log(text).chosen
    assert len(run.kv) == 1 and len(run.draft_kv) == 1 and run.draft_kv[0].value.kv == Gib.parse("0.42")


def test_vllm_line_forms() -> None:
    text = (
        "INFO 03-01 12:00:00 [a.py:1] Overriding num_gpu_blocks=8068 with num_gpu_blocks_override=4000\n"
        "INFO 03-01 12:00:00 [a.py:1] GPU KV cache size: 719,936 tokens, Maximum concurrency for 202,752 tokens per "
        "request: 3.55x\n"
        "ERROR 03-01 12:00:00 [a.py:1] ValueError: To serve at least one request with the models's max seq len "
        "(1048576), (52.68 GiB KV cache is needed, which is larger than the available KV cache memory (25.94 GiB). "
        "Try increasing `gpu_memory_utilization`\n"
        "INFO 03-01 12:00:00 [a.py:1] non-default args: {'model': 'm', 'max_num_seqs': 64, 'obj': <object at 0x1>}\n"
    )
    run = parse_log(text).runs[0]
    assert run.override is not None and (run.override.value.profiled_blocks, run.override.value.blocks) == (8068, 4000)
    assert run.kv_cache_size is not None
    k = run.kv_cache_size.value
    assert (k.tokens, k.max_model_len, k.concurrency) == (719_936, 202_752, "3.55")
    assert run.concurrency is None  # the concurrency on the KV line is not counted twice
    # vLLM V1 refuses before it prints 'GPU KV cache size': a refusal after that line is another start (issue 14)
    refused = parse_log(text).runs[1]
    assert refused.max_len_error is not None and refused.max_len_error.value.estimated_max_len is None
    # a dict that literal_eval refuses falls back to a lenient reader
    text2 = "INFO 03-01 12:00:00 [a.py:1] non-default args: {'model': 'm', 'max_num_seqs': 64, 'obj': <object>}\n"
    text2 += "INFO 03-01 12:00:00 [a.py:1] Available KV cache memory: 1.00 GiB\n"
    run2 = parse_log(text2).chosen
    assert run2.cli_args is not None and run2.cli_args.value.integer("max_num_seqs") == 64
