"""Real public startup logs of GQA and plain-MLA deployments: what the parser reads, and what the planner predicts.

The excerpts live in tests/data/logs/field/ (and two in shared/logs/); each file's header gives its source, the
deployment the log states, and the engine arithmetic spelled out (``expected_*`` lines). The tests below check

(a) that kvplan.runbook.parse reads from each body exactly the figures the log prints (the values in the tables are
    the log's own text, quoted from the line named in the comment), and
(b) that kvplan's planner, fed the deployment the log states and the memory figures the log prints, predicts the
    bytes per token byte-exact and the pool within 0.5 %.

Shared arithmetic:
- SGLang: cell = kv heads per rank × head_dim × layers × 2 (K and V) × dtype bytes; kv heads per rank =
  max(1, kv_heads // attention tp); available = int((avail after weights − pre-load avail × (1 − mem_fraction_static))
  × 2^30) with the printed GiB figures ("GB" in SGLang's log is GiB); pool = available // cell (page 1).
- vLLM: bytes per token = layers × 2 × kv heads per rank × head_dim × dtype bytes (MLA: layers × (512 + 64) × 2);
  num_blocks = available // (block_size × bytes per token); "GPU KV cache size" = num_blocks × block_size (× dcp)
  when max_model_len is a multiple of the block. vLLM 0.19.0 (the llm-d-planner logs) and 0.33.0 (kvplan's rules)
  compute these the same way for a single full-attention or MLA group.

Part (b) of the GQA cases needs the per-layer cache model of issue 11 (kvplan/models/cache.py). What kvplan does not
read or check yet is marked xfail with the reason, one test each.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from kvplan.engines import plan_pool
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from kvplan.runbook.parse import parse_log
from kvplan.units import GiB
from tests.runbook.conftest import LOGS, body, run_doctor, shared

FIELD = LOGS / "field"
HF = Path(__file__).resolve().parents[1] / "data" / "hf"

# KV-relevant fields of models with no verbatim config.json in tests/data/hf. Not published files: the values are the
# ones the cited sources state, written to a temporary config.json for the planner.
QWQ_32B = {
    # Qwen/QwQ-32B as its user pasted the config in vllm-project/vllm#17306 (Qwen2ForCausalLM, 64 layers, 40 heads,
    # 8 kv heads, hidden 5120 -> head_dim 128, 40960 positions)
    "architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2",
    "hidden_size": 5120,
    "intermediate_size": 27648,
    "max_position_embeddings": 40960,
    "num_attention_heads": 40,
    "num_hidden_layers": 64,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05,
    "rope_theta": 1000000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "vocab_size": 152064,
}
DEEPSEEK_V2_LITE = {
    # deepseek-ai/DeepSeek-V2-Lite-Chat as transformers' DeepseekV2Config prints it (27 layers, 16 heads, MLA 512 + 64,
    # no q_lora) and as Megatron-Bridge's DeepSeek-V2-Lite YAML states (num_layers 27, kv_lora_rank 512,
    # qk_pos_emb_head_dim 64)
    "architectures": ["DeepseekV2ForCausalLM"],
    "model_type": "deepseek_v2",
    "first_k_dense_replace": 1,
    "hidden_size": 2048,
    "intermediate_size": 10944,
    "kv_lora_rank": 512,
    "max_position_embeddings": 163840,
    "moe_intermediate_size": 1408,
    "n_routed_experts": 64,
    "n_shared_experts": 2,
    "num_attention_heads": 16,
    "num_experts_per_tok": 6,
    "num_hidden_layers": 27,
    "num_key_value_heads": 16,
    "q_lora_rank": None,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "torch_dtype": "bfloat16",
    "vocab_size": 102400,
}
WRITTEN = {"qwq-32b": QWQ_32B, "deepseek-v2-lite": DEEPSEEK_V2_LITE}


def field(name: str) -> str:
    return body(FIELD / name)


def text_of(log: str) -> str:
    """A field log's body, or a shared one's (skipped where shared/ is absent)."""
    return field(log) if (FIELD / log).exists() else shared(log)


def config_path(model: str, tmp_path: Path) -> str:
    if model in WRITTEN:
        folder = tmp_path / model
        folder.mkdir(exist_ok=True)
        (folder / "config.json").write_text(json.dumps(WRITTEN[model]), encoding="utf-8")
        return str(folder / "config.json")
    return str(HF / model / "config.json")


def within_half_percent(predicted: int, logged: int) -> bool:
    return abs(predicted - logged) * 200 <= logged


# --------------------------------------------------------------------------- (a) the parser reads the log's own text


@dataclass(frozen=True)
class VllmLine:
    log: str
    available: str
    """'Available KV cache memory: X GiB'"""
    kv_tokens: int
    """'GPU KV cache size: N tokens'"""
    max_model_len: int
    concurrency: str
    """'Maximum concurrency for L tokens per request: Cx'"""
    loading: str
    """'Model loading took X GiB' (first rank printed)"""


VLLM_LINES = [
    VllmLine("vllm-llama-3.1-8b-h100-llmd-planner-tp1.log", "58.11", 476_016, 8192, "58.11", "14.99"),
    VllmLine("vllm-llama-3.1-8b-h100-llmd-planner-tp2.log", "63.76", 1_044_688, 8192, "127.53", "7.51"),
    VllmLine("vllm-llama-3.1-8b-h100-llmd-planner-tp4.log", "67.44", 2_209_792, 8192, "269.75", "3.77"),
    VllmLine("vllm-llama-3.1-8b-h100-llmd-planner-tp1-kvfp8.log", "58.11", 952_032, 8192, "116.21", "14.99"),
    VllmLine("vllm-llama-3.3-70b-fp8-h100-llmd-planner-tp2.log", "37.28", 244_304, 8192, "29.82", "33.88"),
    VllmLine("vllm-llama-3.3-70b-fp8-h100-llmd-planner-tp4.log", "54.09", 708_992, 8192, "86.55", "16.96"),
    VllmLine("vllm-mixtral-8x7b-h100-llmd-planner-tp2.log", "28.44", 465_936, 8192, "56.88", "43.51"),
    VllmLine("vllm-qwen3-8b-h100-llmd-planner-tp1.log", "57.5", 418_688, 8192, "51.11", "15.27"),
    VllmLine("vllm-qwen3-30b-a3b-h100-llmd-planner-tp1.log", "15.41", 168_288, 8192, "20.54", "56.88"),
    VllmLine("vllm-deepseek-v2-lite-h100-llmd-planner-tp1.log", "43.61", 1_505_552, 8192, "183.78", "29.43"),
]


@pytest.mark.parametrize("case", VLLM_LINES, ids=lambda c: c.log.removesuffix(".log"))
def test_vllm_field_log_parses_to_its_own_figures(case: VllmLine) -> None:
    text = field(case.log)
    run = parse_log(text, case.log).chosen
    assert run.engine == "vllm" and run.complete
    # the banner line: "... version 0.19.0"
    assert run.version is not None and run.version.value == "0.19.0"
    assert [a.value.text for a in run.available_kv] == [case.available]
    # a printed X.YZ GiB is XYZ × 2^30 // 100 B ("57.5" is round(x, 2) without the trailing 0: 5750 hundredths)
    hundredths = {"57.5": 5750}.get(case.available, int(case.available.replace(".", "")))
    assert run.available_kv[0].value.bytes == hundredths * GiB // 100
    assert run.kv_cache_size is not None and run.kv_cache_size.value.tokens == case.kv_tokens
    assert run.concurrency is not None
    assert (run.concurrency.value.max_model_len, run.concurrency.value.concurrency) == (
        case.max_model_len,
        case.concurrency,
    )
    assert run.model_loading[0].value.text == case.loading
    # the excerpts leave out the profiling-time "Overriding num_gpu_blocks=0 with num_gpu_blocks_override=512" line
    assert run.override is None
    # "GPU KV cache size" at max_model_len 8192 (a multiple of 16) is num_blocks × 16: the concurrency the log prints
    # is that figure / 8192, rounded to 2 decimals
    assert f"{case.kv_tokens / case.max_model_len:.2f}" == case.concurrency


@dataclass(frozen=True)
class SglangLine:
    log: str
    kv: tuple[int, str, str] | None
    """'KV Cache is allocated. #tokens: S, K size: X GB, V size: Y GB'"""
    load_end: tuple[str, str | None]
    """'Load weight end. ... avail mem=X GB[, mem usage=Y GB]'"""
    load_begin: str | None
    summary_tokens: int | None
    mem_fraction_static: str | None
    tp: int | None


SGLANG_LINES = [
    SglangLine(
        "sglang-llama-3.1-8b-h100-sglang-pr-4760.log",
        (442_750, "27.02", "27.02"),
        ("63.48", "15.11"),
        None,
        None,
        None,
        None,
    ),
    SglangLine(
        "sglang-llama-3.1-8b-24gb-maxuhl98-thesis.log",
        (38_141, "2.33", "2.33"),
        ("7.37", "15.02"),
        None,
        38_141,
        None,
        None,
    ),
    SglangLine(
        "sglang-qwen3-235b-a22b-fp8-h100-vllm-issue-21348.log",
        (367_404, "8.23", "8.23"),
        ("", None),
        None,
        None,
        None,
        None,
    ),
    SglangLine(
        "sglang-llama-3.1-8b-h100-sgl-docs-notebook.log",
        None,
        ("63.72", None),
        "78.81",
        None,
        "0.88",
        1,
    ),
    # shared/logs: Qwen QwQ-32B on 4 x L4 at TP4 (the body is read in place)
    SglangLine(
        "sglang-qwq-32b-l4-didier-durand-llms-in-clouds.log",
        (46_611, "1.42", "1.42"),
        ("6.09", "15.54"),
        "21.63",
        46_611,
        "0.85",
        4,
    ),
]


@pytest.mark.parametrize("case", SGLANG_LINES, ids=lambda c: c.log.removesuffix(".log"))
def test_sglang_field_log_parses_to_its_own_figures(case: SglangLine) -> None:
    text = text_of(case.log)
    run = parse_log(text, case.log).chosen
    assert run.engine == "sglang"
    if case.kv is not None:
        tokens, k, v = case.kv
        assert {(a.value.tokens, a.value.k and a.value.k.text, a.value.v and a.value.v.text) for a in run.kv} == {
            (tokens, k, v)
        }
        assert all(a.value.mha for a in run.kv)
    else:
        # this version prints no "KV Cache is allocated" line
        assert run.kv == ()
    avail, usage = case.load_end
    if avail:
        assert {(e.value.avail and e.value.avail.text, e.value.usage and e.value.usage.text) for e in run.load_end} == {
            (avail, usage)
        }
        assert {e.value.model_class for e in run.load_end} <= {"LlamaForCausalLM", "Qwen2ForCausalLM"}
    if case.load_begin is not None:
        assert {b.value.text for b in run.load_begin} == {case.load_begin}
    if case.summary_tokens is not None:
        assert run.summary is not None and run.summary.value.max_total_num_tokens == case.summary_tokens
    if case.mem_fraction_static is not None:
        assert run.args is not None
        assert run.args.value.number("mem_fraction_static") == case.mem_fraction_static
        assert run.args.value.integer("tp_size") == case.tp


def test_sglang_041_summary_line_is_read() -> None:
    # regression (issue 14): SGLang 0.4.1's summary line has no chunked_prefill_size and was not read
    run = parse_log(field("sglang-llama-3.1-8b-h100-sgl-docs-notebook.log"), "docs").chosen
    # "max_total_num_tokens=444500, max_prefill_tokens=16384, max_running_requests=2049, context_len=131072"
    assert run.summary is not None and run.summary.value.max_total_num_tokens == 444_500
    assert run.summary.value.chunked_prefill_size is None and run.summary.value.context_len == 131_072


# --------------------------------------------------------------------------- (b) the planner, fed the log's figures


@dataclass(frozen=True)
class VllmCase:
    log: str
    model: str
    sets: tuple[str, ...]
    bytes_per_token: int
    logged_tokens: int


VLLM_CASES = [
    # 32 layers × 2 × 8 kv heads × 128 × 2 B = 131,072 B/token; 58.11 GiB // (16 × 131,072) = 29,752 blocks
    # -> 476,032 tokens (logged 476,016 = 29,751 blocks, -0.003 %)
    VllmCase("vllm-llama-3.1-8b-h100-llmd-planner-tp1.log", "llama-3.1-8b", ("tp=1",), 131_072, 476_016),
    # 8 kv heads / tp 2 = 4 per rank: 32 × 2 × 4 × 128 × 2 = 65,536; 63.76 GiB // 1,048,576 = 65,290 -> 1,044,640
    VllmCase("vllm-llama-3.1-8b-h100-llmd-planner-tp2.log", "llama-3.1-8b", ("tp=2",), 65_536, 1_044_688),
    # 8 / 4 = 2 per rank: 32 × 2 × 2 × 128 × 2 = 32,768; 67.44 GiB // 524,288 = 138,117 -> 2,209,872
    VllmCase("vllm-llama-3.1-8b-h100-llmd-planner-tp4.log", "llama-3.1-8b", ("tp=4",), 32_768, 2_209_792),
    # fp8 KV: 32 × 2 × 8 × 128 × 1 B = 65,536; 58.11 GiB // 1,048,576 = 59,504 -> 952,064
    VllmCase(
        "vllm-llama-3.1-8b-h100-llmd-planner-tp1-kvfp8.log",
        "llama-3.1-8b",
        ("tp=1", "kv_cache_dtype=fp8"),
        65_536,
        952_032,
    ),
    # Llama-3.3-70B = the llama-3.1-70b attention: 80 × 2 × (8/2 = 4) × 128 × 2 = 163,840; 37.28 GiB // 2,621,440
    # = 15,269 -> 244,304
    VllmCase("vllm-llama-3.3-70b-fp8-h100-llmd-planner-tp2.log", "llama-3.1-70b", ("tp=2",), 163_840, 244_304),
    # 80 × 2 × (8/4 = 2) × 128 × 2 = 81,920; 54.09 GiB // 1,310,720 = 44,310 -> 708,960
    VllmCase("vllm-llama-3.3-70b-fp8-h100-llmd-planner-tp4.log", "llama-3.1-70b", ("tp=4",), 81_920, 708_992),
    # 32 × 2 × (8/2 = 4) × 128 × 2 = 65,536; 28.44 GiB // 1,048,576 = 29,122 -> 465,952
    VllmCase("vllm-mixtral-8x7b-h100-llmd-planner-tp2.log", "mixtral-8x7b", ("tp=2",), 65_536, 465_936),
    # 36 × 2 × 8 × 128 × 2 = 147,456; 57.50 GiB // 2,359,296 = 26,168 -> 418,688
    VllmCase("vllm-qwen3-8b-h100-llmd-planner-tp1.log", "qwen3-8b", ("tp=1",), 147_456, 418_688),
    # 48 × 2 × 4 × 128 × 2 = 98,304; 15.41 GiB // 1,572,864 = 10,519 -> 168,304
    VllmCase("vllm-qwen3-30b-a3b-h100-llmd-planner-tp1.log", "qwen3-30b-a3b", ("tp=1",), 98_304, 168_288),
    # plain MLA (FLASH_ATTN_MLA, block 16): 27 × (512 + 64) × 2 = 31,104; 43.61 GiB // 497,664 = 94,091 -> 1,505,456
    VllmCase(
        "vllm-deepseek-v2-lite-h100-llmd-planner-tp1.log",
        "deepseek-v2-lite",
        ("tp=1",),
        31_104,
        1_505_552,
    ),
    # shared/logs, Kimi-K2-Thinking (the attention of tests/data/hf/kimi-k2) on 8 × H200, FlashMLA block 64:
    # 61 × (512 + 64) × 2 = 70,272 B/token; 46.80 GiB // (64 × 70,272 = 4,497,408) = 11,173 -> 715,072 (= logged)
    VllmCase(
        "vllm-kimi-k2-thinking-h200-vllm-recipes-tp8.log",
        "kimi-k2",
        ("tp=8", "gpu=h200", "page_size=64"),
        70_272,
        715_072,
    ),
    # the same with DCP 8: the latent is sharded over the 8 ranks (bytes per row unchanged) and the logged capacity
    # is num_blocks × 64 × 8: 11,173 × 512 = 5,720,576 vs logged 5,721,088 (11,174 blocks: the 46.80 rounding)
    VllmCase(
        "vllm-kimi-k2-thinking-h200-vllm-recipes-tp8-dcp8.log",
        "kimi-k2",
        ("tp=8", "dcp=8", "gpu=h200", "page_size=64"),
        70_272,
        5_721_088,
    ),
]


@pytest.mark.parametrize("case", VLLM_CASES, ids=lambda c: c.log.removesuffix(".log"))
def test_vllm_field_log_pool_from_its_memory_figures(case: VllmCase, tmp_path: Path) -> None:
    text = text_of(case.log)
    run = parse_log(text, case.log).chosen
    available = run.available_kv[0].value.bytes  # the printed GiB figure, × 2^30
    cfg = config_path(case.model, tmp_path)
    knobs = {"tp": "1", "gpu": "h100-sxm", "kv_cache_dtype": "auto", "page_size": "16"}
    knobs.update(s.split("=", 1) for s in case.sets)
    sets = (
        f"model={cfg}",
        "engine=vllm",
        *(f"{k}={v}" for k, v in knobs.items()),
        "context_length=8192",
        f"kv_cache_memory={available}B",
    )
    plan = plan_pool(load_model(cfg), load_deployment(None, sets))
    assert plan.cell.total_bytes == case.bytes_per_token
    assert within_half_percent(plan.logged_tokens, case.logged_tokens), (plan.logged_tokens, case.logged_tokens)


@dataclass(frozen=True)
class SglangCase:
    log: str
    model: str
    tp: int
    pre_load: str
    """GiB free before the weights ('Load weight begin. avail mem', or avail + usage of 'Load weight end')"""
    after_load: str
    """GiB free after the weights ('Load weight end. avail mem')"""
    mem_fraction_static: str
    bytes_per_token: int
    logged_tokens: int
    gpu: str = "h100-sxm"


SGLANG_CASES = [
    # 8 kv heads × 128 × 32 layers × 2 × 2 B = 131,072; int((63.72 − 78.81 × 0.12) GiB) // 131,072 = 444,520
    # (logged 444,500, -0.0045 %)
    SglangCase(
        "sglang-llama-3.1-8b-h100-sgl-docs-notebook.log", "llama-3.1-8b", 1, "78.81", "63.72", "0.88", 131_072, 444_500
    ),
    # pre-load = 63.48 + 15.11 = 78.59 GiB, mem_fraction_static 0.88 assumed (0.4.x default for tp 1):
    # int((63.48 − 78.59 × 0.12) GiB) // 131,072 = 442,771 (logged 442,750)
    SglangCase(
        "sglang-llama-3.1-8b-h100-sglang-pr-4760.log", "llama-3.1-8b", 1, "78.59", "63.48", "0.88", 131_072, 442_750
    ),
    # shared/logs QwQ-32B at TP4: 8 / 4 = 2 kv heads per rank × 128 × 64 layers × 2 × 2 B = 65,536;
    # int((6.09 − 21.63 × 0.15) GiB) // 65,536 = 46,620 (logged 46,611, -0.02 %)
    SglangCase(
        "sglang-qwq-32b-l4-didier-durand-llms-in-clouds.log",
        "qwq-32b",
        4,
        "21.63",
        "6.09",
        "0.85",
        65_536,
        46_611,
        gpu="l4",
    ),
]


@pytest.mark.parametrize("case", SGLANG_CASES, ids=lambda c: c.log.removesuffix(".log"))
def test_sglang_field_log_pool_from_its_memory_figures(case: SglangCase, tmp_path: Path) -> None:
    text_of(case.log)  # skipped where a shared log is absent
    cfg = config_path(case.model, tmp_path)
    weights = f"{float(case.pre_load) - float(case.after_load):.2f}GiB"
    sets = (
        f"model={cfg}",
        "engine=sglang",
        f"gpu={case.gpu}",
        f"tp={case.tp}",
        "kv_cache_dtype=auto",
        "page_size=1",
        "context_length=131072" if case.model != "qwq-32b" else "context_length=40960",
        f"mem_fraction_static={case.mem_fraction_static}",
        f"pre_load_free={case.pre_load}GiB",
        f"weights_per_gpu={weights}",
    )
    plan = plan_pool(load_model(cfg), load_deployment(None, sets))
    assert plan.cell.total_bytes == case.bytes_per_token
    assert within_half_percent(plan.logged_tokens, case.logged_tokens), (plan.logged_tokens, case.logged_tokens)


@dataclass(frozen=True)
class KSizeCase:
    log: str
    model: str
    tp: int
    bytes_per_token: int
    tokens: int
    k_size: str


K_SIZE_CASES = [
    # logs without the memory figures the pool needs: the bytes per token only, checked against "K size"
    # 32 × 8 × 128 × 2 × 2 = 131,072; K = 38,141 × 65,536 = 2,499,608,576 B = 2.3280 GiB -> "2.33"
    KSizeCase("sglang-llama-3.1-8b-24gb-maxuhl98-thesis.log", "llama-3.1-8b", 1, 131_072, 38_141, "2.33"),
    # 94 layers × (4 kv heads / tp 4 = 1) × 128 × 2 × 2 = 48,128; K = 367,404 × 24,064 = 8,841,209,856 B
    # = 8.2340 GiB -> "8.23"
    KSizeCase(
        "sglang-qwen3-235b-a22b-fp8-h100-vllm-issue-21348.log", "qwen3-235b-a22b-fp8", 4, 48_128, 367_404, "8.23"
    ),
    # 442,750 × 65,536 = 29,016,064,000 B = 27.0236 GiB -> "27.02"
    KSizeCase("sglang-llama-3.1-8b-h100-sglang-pr-4760.log", "llama-3.1-8b", 1, 131_072, 442_750, "27.02"),
]


@pytest.mark.parametrize("case", K_SIZE_CASES, ids=lambda c: c.log.removesuffix(".log"))
def test_sglang_field_log_k_size_is_half_the_cell(case: KSizeCase, tmp_path: Path) -> None:
    run = parse_log(field(case.log), case.log).chosen
    k = run.kv[0].value.k
    assert k is not None and k.text == case.k_size
    cfg = config_path(case.model, tmp_path)
    # the log states bf16 KV (kv_cache_dtype auto); the default deployment kvplan starts from has fp8_e4m3
    sets = (f"model={cfg}", "engine=sglang", "gpu=h100-sxm", f"tp={case.tp}", "page_size=1", "kv_cache_dtype=auto")
    dep = load_deployment(None, sets)
    plan = plan_pool(load_model(cfg), dep)
    assert plan.cell.total_bytes == case.bytes_per_token
    # K is half the cell: the printed K size (2 decimals of GiB) covers tokens × cell / 2
    assert k.covers(case.tokens * plan.cell.total_bytes // 2)


def test_profiling_override_line_is_in_the_log_before_the_pool() -> None:
    # source lines 362 ("Overriding num_gpu_blocks=0 with num_gpu_blocks_override=512") and 387 ("GPU KV cache size:
    # 418,688 tokens"): vLLM 0.19 sizes its profiling run with a dummy 512-block cache; the pool is 26,168 blocks
    text = field("vllm-qwen3-8b-h100-llmd-planner-tp1-profiling-override.log")
    run = parse_log(text, "override").chosen
    assert run.kv_cache_size is not None and run.kv_cache_size.value.tokens == 418_688 == 26_168 * 16
    assert "'num_gpu_blocks_override'" not in text  # no user override among the non-default args


def test_profiling_override_line_is_not_a_user_override() -> None:
    # regression (issue 14): the profiling run's "Overriding num_gpu_blocks=0 with num_gpu_blocks_override=512" was
    # recorded as a user override (and the pool read as 512 blocks)
    run = parse_log(field("vllm-qwen3-8b-h100-llmd-planner-tp1-profiling-override.log"), "override").chosen
    assert run.override is None
    assert run.profiling_override is not None and run.profiling_override.value.blocks == 512
    assert run.kv_cache_size is not None and run.kv_cache_size.value.tokens == 418_688


# --------------------------------------------------------------------------- (b') the doctor, from the log's figures


@dataclass(frozen=True)
class DoctorCase:
    log: str
    model: str
    sets: tuple[str, ...]
    pending: str | None = None


_VLLM_SETS = ("engine=vllm", "gpu_memory_utilization=0.95", "context_length=8192")
DOCTOR_CASES = [
    *(
        DoctorCase(
            c.log,
            c.model,
            (
                *_VLLM_SETS,
                *c.sets,
                *(() if any(s.startswith("kv_cache_dtype=") for s in c.sets) else ("kv_cache_dtype=auto",)),
                *(() if any(s.startswith("gpu=") for s in c.sets) else ("gpu=h100-sxm",)),
                *(() if any(s.startswith("page_size=") for s in c.sets) else ("page_size=16",)),
            ),
        )
        for c in VLLM_CASES
        if "kimi" not in c.log  # test_doctor.py covers the shared Kimi logs with their own deployment
    ),
    DoctorCase(
        "sglang-qwq-32b-l4-didier-durand-llms-in-clouds.log",
        "qwq-32b",
        ("engine=sglang", "gpu=l4", "tp=4", "kv_cache_dtype=auto", "page_size=1", "context_length=40960"),
    ),
    DoctorCase(
        "sglang-llama-3.1-8b-h100-sgl-docs-notebook.log",
        "llama-3.1-8b",
        ("engine=sglang", "gpu=h100-sxm", "tp=1", "kv_cache_dtype=auto", "page_size=1", "context_length=131072"),
    ),  # was pending until issue 14: SGLang 0.4.1's summary line was not read, so the run had no pool line
]


def _doctor_params() -> list[object]:
    out = []
    for c in DOCTOR_CASES:
        marks = [pytest.mark.xfail(strict=True, reason=c.pending)] if c.pending else []
        out.append(pytest.param(c, id=c.log.removesuffix(".log"), marks=marks))
    return out


@pytest.mark.parametrize("case", _doctor_params())
def test_field_log_doctor_pool_from_the_log_memory_figures(case: DoctorCase, tmp_path: Path) -> None:
    # The doctor's (b): the pool the deployment gives with the log's own memory figures (vLLM: 'Available KV cache
    # memory'; SGLang: 'Load weight begin/end' and mem_fraction_static), at both ends of their rounding: the logged
    # pool lies in that window and the mid value is within 0.5 % (the arithmetic is in each file's header)
    cfg = config_path(case.model, tmp_path)
    d = run_doctor(text_of(case.log), sets=(f"model={cfg}", *case.sets), model=cfg)
    c = d.comparison
    assert c is not None and c.memory_from_log
    assert c.low <= c.logged.value <= c.high, (c.low, c.logged.value, c.high)
    assert within_half_percent(c.expected, c.logged.value)


def test_sglang_plain_mla_kv_size_on_mi355x(tmp_path: Path) -> None:
    # sglang-kimi-k2.5-mi355x: Kimi-K2.5's text model has the attention of tests/data/hf/kimi-k2; SGLang 0.5.8 on ROCm,
    # kv_cache_dtype auto -> bf16 MLA: 61 layers × (512 + 64) × 2 B = 70,272 B/token;
    # KV size = 2,454,421 × 70,272 = 172,477,072,512 B = 160.6318 GiB -> "160.63"
    text = field("sglang-kimi-k2.5-mi355x-ajith-sirra-amd-issues.log")
    run = parse_log(text, "kimi-k2.5").chosen
    assert {(a.value.tokens, a.value.kv and a.value.kv.text) for a in run.kv} == {(2_454_421, "160.63")}
    assert len(run.kv) == 8 and not any(a.value.mha for a in run.kv)
    # SGLang budgets from the smallest figure over the 8 ranks: 283.53 GiB before the weights (TP3), 209.96 after
    assert min(b.value.bytes for b in run.load_begin) == 28353 * GiB // 100
    assert min(e.value.avail.bytes for e in run.load_end if e.value.avail is not None) == 20996 * GiB // 100
    assert run.args is not None and run.args.value.number("mem_fraction_static") == "0.8260405859375"
    cfg = str(HF / "kimi-k2" / "config.json")
    sets = (f"model={cfg}", "engine=sglang", "gpu=h200", "tp=8", "kv_cache_dtype=auto", "page_size=1")
    plan = plan_pool(load_model(cfg), load_deployment(None, sets))
    assert plan.cell.total_bytes == 70_272
    kv = run.kv[0].value.kv
    assert kv is not None and kv.covers(2_454_421 * plan.cell.total_bytes)
    # the pool from the log's figures, on the MI355X of the catalog: int((209.96 − 283.53 × (1 − 0.8260405859375))
    # × 2^30) = 172,482,973,901 B // 70,272 = 2,454,504 (logged 2,454,421, -0.0034 %; weights 283.53 − 209.96 = 73.57)
    sets = (
        f"model={cfg}",
        "engine=sglang",
        "gpu=mi355x",
        "tp=8",
        "kv_cache_dtype=auto",
        "page_size=1",
        "context_length=131072",
        "mem_fraction_static=0.8260405859375",
        "pre_load_free=283.53GiB",
        "weights_per_gpu=73.57GiB",
    )
    plan = plan_pool(load_model(cfg), load_deployment(None, sets))
    assert (plan.available_bytes, plan.logged_tokens) == (172_482_973_901, 2_454_504)
    # the doctor from the log alone: the logged 2,454,421 lies in the window of the ±0.005 GiB figures,
    # 2,454,415 .. 2,454,594 (header)
    d = run_doctor(text, sets=(f"model={cfg}", *sets[1:7]), model=cfg)
    c = d.comparison
    assert c is not None and c.memory_from_log
    assert (c.expected, c.low, c.high, c.logged.value) == (2_454_504, 2_454_415, 2_454_594, 2_454_421)
