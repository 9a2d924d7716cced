"""The line tables: every engine line the parser reads, with the versions that print it, a real example and the
fact it builds. Adding a line is one row here plus its fact (a reader in ``facts``, a value in ``values``)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import kvplan.runbook.parse.facts as F
import kvplan.runbook.parse.patterns as P
from kvplan.runbook.long_context import env_read, length_read

# --------------------------------------------------------------------------- the line tables


@dataclass(frozen=True)
class LineForm:
    """One engine line the parser reads: the event it yields, the compiled pattern that reads it (from
    ``patterns``: a typo is an import error, not a string), the engine versions that print it, an example and
    the reader that builds its facts. ``source`` names the log in tests/data/logs/ (or ../shared/logs/) whose text
    holds ``example`` verbatim; ``format:`` + a path means no public log of that form is in the repo yet and the
    example is the engine's format string filled in. Rows of one engine that share a pattern share its reader (it
    runs once a match); ``once``: only the record's first match is read."""

    kind: str
    pattern: re.Pattern[str]
    versions: str
    example: str
    source: str
    fact: F.Read
    once: bool = False


# readers that several rows share (one object each: a pattern is read once however many forms it has)
_LOAD_BEGIN = F.one("load_begin", F.gib)
_LOAD_END = F.one("load_end", F.load_end)
_POOL_END = F.one("pool_end", F.gib)
_SUMMARY = F.one("summary", F.summary)
_PAGE = F.one("page", F.integer)
_DSA_DTYPE = F.one("dsa_dtype", F.word)
_DSA_BACKENDS = F.one("dsa_backends", lambda m: (m.group(1), m.group(2)))
_SG_ERROR = F.one("error", F.whole)
_SG_FAILED = F.failed("sglang")
_SG_NEGATIVE = F.one("negative_profile", F.whole)
_TOTAL = F.one("total_tokens", F.integer)
_MAMBA = F.one("mamba", F.mamba)
_SWA_SIZES = F.one("swa_sizes", F.swa_sizes)
_SWA_POOL = F.one("swa_pool", F.swa_pool)
_SG_LONG = length_read("sglang")
_VERSION = F.one("version", F.word)
_ENGINE = F.one("engine_config", F.engine_config)
_LOADING = F.one("model_loading", F.gib)
_V0_ROW = F.one("v0_row", F.v0_row)
_V0_BUDGET = F.one("v0_budget", F.v0_budget)
_V0_MAXLEN = F.one("v0_maxlen_error", F.v0_maxlen)
_HYBRID_BLOCK = F.one("hybrid_block", F.integer)
_MAMBA_PADDING = F.one("mamba_padding", F.word)
_KV_SIZE = F.one("kv_size", F.kv_size)
_CONCURRENCY = F.one("concurrency", F.concurrency)
_MAXLEN_ERROR = F.one("maxlen_error", F.maxlen_error)
_VL_FAILED = F.failed("vllm")
_VL_LONG = length_read("vllm")

_F = "field/"
SGLANG_LINES: tuple[LineForm, ...] = (
    LineForm("args", P._SG_ARGS, "0.3 - 0.5.x",
             "[2026-02-26 16:30:34] server_args=ServerArgs(model_path='moonshotai/Kimi-K2.5', ",
             _F + "sglang-kimi-k2.5-mi355x-ajith-sirra-amd-issues.log",
             F.sg_args),
    LineForm("baseline", P._SG_BASELINE, "0.5.23 (after distributed init, before the weights load)",
             "Memory baseline taken. mem usage=1.25 GB",
             "format: shared/reference/sglang-0.5.23.md §2.1 (srt/distributed/bootstrap.py)",
             F.one("baseline", F.gib)),
    LineForm("load_begin", P._SG_LOAD_BEGIN, "0.3 - 0.5.x",
             "[2026-02-26 16:31:00 TP7] Load weight begin. avail mem=283.68 GB",
             _F + "sglang-kimi-k2.5-mi355x-ajith-sirra-amd-issues.log",
             _LOAD_BEGIN),
    LineForm("load_end", P._SG_LOAD_END, "0.3 - 0.4.x (type, dtype, avail mem)",
             "[2025-01-09 21:45:17 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, "
             "avail mem=63.72 GB",
             _F + "sglang-llama-3.1-8b-h100-sgl-docs-notebook.log",
             _LOAD_END),
    LineForm("load_end", P._SG_LOAD_END, "0.4.x - 0.5.x (elapsed, mem usage)",
             "[2026-02-26 16:41:05 TP1] Load weight end. elapsed=605.50 s, type=KimiK25ForConditionalGeneration, "
             "dtype=torch.bfloat16, avail mem=210.38 GB, mem usage=73.58 GB.",
             _F + "sglang-kimi-k2.5-mi355x-ajith-sirra-amd-issues.log",
             _LOAD_END),
    LineForm("load_end", P._SG_LOAD_END, "0.5.x with a quantized checkpoint (quant=, fmt=)",
             "Load weight end. elapsed=312.45 s, type=GlmMoeDsaForCausalLM, quant=fp8, fmt=e4m3, avail mem=44.34 GB, "
             "mem usage=94.46 GB.",
             "format: shared/reference/sglang-0.5.23.md §6 (model_runner.py load_model)",
             _LOAD_END),
    LineForm("kv_sizes", P._SG_KV, "0.4.1 (K/V sizes, no #tokens; rows from the summary line)",
             "[2025-01-23 19:35:20 TP0] KV Cache is allocated. K size: 27.13 GB, V size: 27.13 GB.",
             "doctor-sglang-0.4.1-llama-3.1-8b-h100-docs-clipping.log",
             F.sg_kv),
    LineForm("kv", P._SG_KV, "0.4.2 - 0.5.x, MHA/GQA (#tokens, K size, V size)",
             "KV Cache is allocated. #tokens: 367404, K size: 8.23 GB, V size: 8.23 GB",
             _F + "sglang-qwen3-235b-a22b-fp8-h100-vllm-issue-21348.log",
             F.sg_kv),
    LineForm("kv", P._SG_KV, "0.4.x - 0.5.9, MLA/DSA (#tokens, KV size)",
             "[2026-02-26 16:41:18 TP6] KV Cache is allocated. #tokens: 2454421, KV size: 160.63 GB",
             _F + "sglang-kimi-k2.5-mi355x-ajith-sirra-amd-issues.log",
             F.sg_kv),
    LineForm("kv", P._SG_KV, "0.5.10 - 0.5.23, MLA/DSA (dtype: first)",
             "KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 1462784, KV size: 54.52 GB",
             "format: shared/reference/sglang-0.5.23.md §6 (memory_pool.py MLATokenToKVPool)",
             F.sg_kv),
    LineForm("pool_end", P._SG_POOL_END, "0.3 - 0.5.x",
             "[2025-10-07 22:29:11 DP0 TP0] Memory pool end. avail mem=15.38 GB",
             _F + "sglang-deepseek-v3.2-exp-b200-sglang-pr-11309-main.log",
             _POOL_END),
    LineForm("summary", P._SG_SUMMARY, "0.4.1 (no chunked_prefill_size)",
             "[2025-01-09 21:45:23 TP0] max_total_num_tokens=444500, max_prefill_tokens=16384, "
             "max_running_requests=2049, context_len=131072",
             _F + "sglang-llama-3.1-8b-h100-sgl-docs-notebook.log",
             _SUMMARY),
    LineForm("summary", P._SG_SUMMARY, "0.4.2 - 0.5.x (chunked_prefill_size; available_gpu_mem from 0.4.7)",
             "[2025-07-14 05:49:02] max_total_num_tokens=38141, chunked_prefill_size=2048, max_prefill_tokens=16384, "
             "max_running_requests=2048, context_len=131072, available_gpu_mem=0.83 GB",
             _F + "sglang-llama-3.1-8b-24gb-maxuhl98-thesis.log",
             _SUMMARY),
    LineForm("page", P._SG_PAGE, "0.5.3 - 0.5.23 (DSA; also the deepseek-v4 builds)",
             "[2026-05-01 15:16:08] WARNING server_args.py:1261: Setting page size to 64 for DeepSeek DSA.",
             "doctor-sglang-dsv4-build-deepseek-v3.2-dsa-lines-ktransformers-1969.log",
             _PAGE),
    LineForm("dsa_dtype", P._SG_KV_DTYPE, "0.5.3 - 0.5.23 (DSA: fp8 on SM100, bfloat16 on SM8x/SM90)",
             "Setting KV cache dtype to bfloat16 for DeepSeek DSA on SM8 device.",
             "doctor-sglang-dsv4-build-deepseek-v3.2-dsa-lines-ktransformers-1969.log",
             _DSA_DTYPE),
    LineForm("dsa_backends", P._SG_BACKENDS, "0.5.3 - 0.5.23 (NSA until 0.5.9)",
             "Set NSA backends for bfloat16 KV Cache: prefill=flashmla_sparse, decode=fa3.",
             "doctor-sglang-dsv4-build-deepseek-v3.2-dsa-lines-ktransformers-1969.log",
             _DSA_BACKENDS),
    LineForm("error", P._SG_ERROR, "0.1 - 0.5.x (a failed start)",
             "Not enough memory. Please try to increase --mem-fraction-static. Current value: "
             "self.server_args.mem_fraction_static=0.8",
             "format: python/sglang/srt/model_executor/model_runner_kv_cache_mixin.py init_memory",
             _SG_ERROR),
    LineForm("negative_profile", P.SG_PROFILED, "0.4.x - 0.5.x (a --max-total-tokens above a profiled pool <= 0)",
             "max_total_tokens=131072 is larger than the profiled value -561981. Use the profiled value instead.",
             "doctor-sglang-0.4.8-negative-profiled-value-deepseek-r1-mi300x-issue-7691.log",
             F.sg_profiled),
    LineForm("error", P.SG_FAILED, "0.3 - 0.5.x (a start that died, e.g. in CUDA-graph capture after the pool)",
             "Scheduler hit an exception: Traceback (most recent call last):",
             "doctor-sglang-qwen3-cuda-graph-capture-exception-after-pool-issue-7227.log",
             _SG_FAILED),
    LineForm("total_tokens", P._SG_TOTAL, "0.3.x bench_latency (the pool alone on a line; records '[HH:MM:SS TP0]')",
             "max_total_num_tokens=1256440", "doctor-sglang-0.3-llama-3-8b-mi300x-rocm-bench-latency-augmxnt.log",
             _TOTAL),
    LineForm("mamba", P._SG_MAMBA, "0.5.x, linear-attention hybrids (Qwen3-Next, Qwen3.5, Kimi-Linear)",
             "[2026-02-27 17:10:28 TP0] Mamba Cache is allocated. max_mamba_cache_size: 82, conv_state size: 0.13GB, "
             "ssm_state size: 7.29GB",
             "doctor-sglang-hybrid-gdn-qwen3.5-moe-tp2-ktransformers-1870.log",
             _MAMBA),
    LineForm("swa_sizes", P._SG_SWA_SIZES, "0.5.x, sliding-window hybrids (gpt-oss, MiMo-V2-Flash)",
             "[2026-01-31 13:50:39 TP2] Use sliding window memory pool. full_layer_tokens=375360, "
             "swa_layer_tokens=300288",
             "doctor-sglang-hybrid-swa-pool-sizes-mimo-v2-flash-sglang-pr-18039.log",
             _SWA_SIZES),
    LineForm("swa_pool", P._SG_SWA_POOL, "0.5.x, sliding-window hybrids (after the pool's two K/V lines a rank)",
             "[2025-12-19 07:42:57 TP2] SWAKVPool mem usage: 77.63 GB, swa size: 1496958, full size: 1496958",
             "doctor-sglang-hybrid-swa-mimo-v2-flash-tp4-sglang-pr-15464.log",
             _SWA_POOL),
    LineForm("negative_profile", P._SG_NEGATIVE, "0.5.x (a warning before the failed start)",
             "max_total_num_tokens=-1234 is negative",
             "format: the issue's wording (no public log of it found: a start whose weights leave no room)",
             _SG_NEGATIVE),
    LineForm("long_context", P.SG_LONG_LEN, "0.4 - 0.5.x (SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1: a warning)",
             "Warning: User-specified context_length (131072) is greater than the derived context_length (40960). "
             "This may lead to incorrect model outputs or CUDA errors. Note that the derived context_length may "
             "differ from max_position_embeddings in the model's config.",
             "format: python/sglang/srt/configs/model_config.py ModelConfig._derive_context_length",
             _SG_LONG, once=True),
    LineForm("long_context", P.LONG_ENV, "any (the env var in a pasted command or environment)",
             "export SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1",
             "format: python/sglang/srt/configs/model_config.py ModelConfig._derive_context_length (its env var)",
             env_read("sglang")),
)  # fmt: skip
VLLM_LINES: tuple[LineForm, ...] = (
    LineForm("version", P._VL_VERSION, "0.5 - 0.10", "vLLM API server version 0.19.0",
             "format: vllm/entrypoints/openai/api_server.py",
             _VERSION),
    LineForm("version", P._VL_BANNER, "0.11 - 0.33 (the start-up banner)",
             "(APIServer pid=1) INFO 04-22 01:04:39 [entrypoints/utils.py:299]  ▄▄ ▄█ █     █     █ ▀▄▀ █  "
             "version 0.19.0",
             _F + "vllm-qwen3-8b-h100-llmd-planner-tp1-profiling-override.log",
             _VERSION),
    LineForm("engine_config", P._VL_ENGINE, "V0 0.4 - 0.8 ('an LLM engine')",
             "INFO 04-28 04:07:48 llm_engine.py:249] Initializing an LLM engine (v0.6.4.post1) with config: "
             "model='realtreetune/rho-1b-sft-GSM8K'",
             _F + "vllm-v0-rho-1b-h200-grpocredit-0.6.4.log",
             _ENGINE),
    LineForm("engine_config", P._VL_ENGINE, "V1 0.8 - 0.33 ('a V1 LLM engine'; 0.9-0.10's V0 fallback: 'a V0')",
             "(EngineCore pid=243) INFO 04-22 01:04:50 [v1/engine/core.py:105] Initializing a V1 LLM engine "
             "(v0.19.0) with config: model='Qwen/Qwen3-8B'",
             _F + "vllm-qwen3-8b-h100-llmd-planner-tp1-profiling-override.log",
             _ENGINE),
    LineForm("cli_args", P._VL_NON_DEFAULT, "0.8 - 0.33",
             "non-default args: {'model_tag': 'Qwen/Qwen3-8B', 'model': 'Qwen/Qwen3-8B', 'max_model_len': 8192, "
             "'gpu_memory_utilization': 0.95, 'enable_prefix_caching': False}",
             _F + "vllm-qwen3-8b-h100-llmd-planner-tp1-profiling-override.log",
             F.cli_args, once=True),
    LineForm("architecture", P._VL_ARCH, "V1 (0.26.0 in the field log; 0.33.0)",
             "(APIServer pid=1) INFO 09-04 09:38:00 [model.py:623] Resolved architecture: LlamaForCausalLM",
             _F + "vllm-llama-3.1-8b-a40-vireshkoli-llm-inference-optimization.log",
             F.one("architecture", F.word)),
    LineForm("max_len", P._VL_MAX_LEN, "V1 (0.26.0 in the field log; 0.33.0)",
             "(APIServer pid=1) INFO 09-04 09:38:00 [model.py:1788] Using max model len 4096",
             _F + "vllm-llama-3.1-8b-a40-vireshkoli-llm-inference-optimization.log",
             F.one("max_len", F.integer)),
    LineForm("block", P._VL_BLOCK, "V1 0.33.0 (a backend's preferred block size)",
             "Setting kv cache block size to 64 for FLASHMLA_SPARSE/DEEPSEEK_V32_INDEXER backend(s).",
             "format: shared/reference/vllm-0.33.0.md §4 (vllm/platforms/interface.py:777)",
             F.one("block", F.integer)),
    LineForm("format", P._VL_FORMAT, "V1 0.33.0 (MLA backends)",
             "Using fp8_ds_mla KV cache format for FLASHMLA_SPARSE backend.",
             "format: shared/reference/vllm-0.33.0.md §4 (vllm/.../mla_attention.py:531)",
             F.one("format", F.word)),
    LineForm("model_loading", P._VL_LOADING, "V0 0.4 - 0.8 ('Loading model weights took X GB', GiB)",
             "Loading model weights took 14.9888 GB", "doctor-vllm-v0-llama-3.1-8b-rtx3090-issue-10517.log",
             _LOADING),
    LineForm("model_loading", P._VL_LOADING, "V1 0.8 - 0.33",
             "Model loading took 15.27 GiB memory and 15.294531 seconds",
             _F + "vllm-qwen3-8b-h100-llmd-planner-tp1-profiling-override.log",
             _LOADING),
    LineForm("v0_profile", P._VL_V0_PROFILE, "V0 0.6.4 (one line)",
             "Memory profiling results: total_gpu_memory=23.58GiB initial_memory_usage=15.34GiB "
             "peak_torch_memory=17.98GiB memory_usage_post_profile=15.35GiB non_torch_memory=0.35GiB "
             "kv_cache_size=2.89GiB gpu_memory_utilization=0.90",
             "doctor-vllm-v0-llama-3.1-8b-rtx3090-issue-10517.log",
             F.v0_profile),
    LineForm("v0_budget", P._VL_V0_BUDGET, "V0 0.6.5 - 0.8",
             "the current vLLM instance can use total_gpu_memory (79.19GiB) x gpu_memory_utilization (0.90) = 71.27GiB",
             _F + "vllm-v0-llama-2-7b-lora-h100-gateway-api-pr-550.log",
             _V0_BUDGET),
    LineForm("v0_terms", P._VL_V0_TERMS, "V0 0.6.5 - 0.8",
             "model weights take 12.55GiB; non_torch_memory takes 0.16GiB; PyTorch activation peak memory takes "
             "2.38GiB; the rest of the memory reserved for KV Cache is 56.18GiB.",
             _F + "vllm-v0-llama-2-7b-lora-h100-gateway-api-pr-550.log",
             F.v0_terms),
    LineForm("v0_row", P._VL_V0_ROW, "V0 0.6.5 development builds (a table: one 'key   value' row per line)",
             "INFO 12-13 19:54:18 worker.py:243] available_kv_cache_memory    53.29GiB",
             _F + "vllm-v0-meta-llama-3-8b-h100-vllm-pr-10511.log",
             _V0_ROW),
    LineForm("v0_blocks", P._VL_V0_BLOCKS, "V0 0.4 - 0.7 ('# GPU blocks')",
             "# GPU blocks: 1478, # CPU blocks: 2048", "doctor-vllm-v0-llama-3.1-8b-rtx3090-issue-10517.log",
             F.v0_blocks),
    LineForm("v0_blocks", P._VL_V0_BLOCKS, "V0 0.8 ('# cuda blocks'; '# rocm blocks' on ROCm)",
             "# cuda blocks: 7191, # CPU blocks: 512", _F + "vllm-v0-llama-2-7b-lora-h100-gateway-api-pr-550.log",
             F.v0_blocks),
    LineForm("v0_maxlen_error", P._VL_V0_MAXLEN, "V0 0.2 - 0.8 (a failed start)",
             "The model's max seq len (29000) is larger than the maximum number of tokens that can be stored in KV "
             "cache (23648).", "doctor-vllm-v0-llama-3.1-8b-rtx3090-issue-10517.log",
             _V0_MAXLEN),
    LineForm("hybrid_block", P._VL_HYBRID_BLOCK, "V1 0.10 - 0.33, linear-attention hybrids",
             "INFO 03-30 07:05:40 [config.py:228] Setting attention block size to 528 tokens to ensure that attention "
             "page size is >= mamba page size.",
             "doctor-vllm-hybrid-page-alignment-qwen3.5-xpu-vllm-pr-37467.log",
             _HYBRID_BLOCK),
    LineForm("mamba_padding", P._VL_MAMBA_PADDING, "V1 0.10 - 0.33, linear-attention hybrids",
             "Padding mamba page size by 0.76% to ensure that mamba page size and attention page size are exactly "
             "equal.",
             "doctor-vllm-hybrid-page-alignment-qwen3.5-xpu-vllm-pr-37467.log",
             _MAMBA_PADDING),
    LineForm("profiling_override", P._VL_OVERRIDE, "V1 0.1x - 0.33 (profiling run: not the pool)",
             "Overriding num_gpu_blocks=0 with num_gpu_blocks_override=512",
             _F + "vllm-qwen3-8b-h100-llmd-planner-tp1-profiling-override.log",
             F.override),
    LineForm("override", P._VL_OVERRIDE, "V1 0.33.0 (--num-gpu-blocks-override: the pool)",
             "Overriding num_gpu_blocks=7191 with num_gpu_blocks_override=512",
             "format: shared/reference/vllm-0.33.0.md §3 (vllm/v1/core/kv_cache_planning.py may_override_num_blocks)",
             F.override),
    LineForm("available", P._VL_AVAILABLE, "V1 0.8 - 0.33", "Available KV cache memory: 57.5 GiB",
             _F + "vllm-qwen3-8b-h100-llmd-planner-tp1-profiling-override.log",
             F.available),
    LineForm("kv_size", P._VL_KV_SIZE, "V1 0.8 - 0.33", "GPU KV cache size: 418,688 tokens",
             _F + "vllm-qwen3-8b-h100-llmd-planner-tp1-profiling-override.log",
             _KV_SIZE),
    LineForm("dcp", P._VL_DCP, "V1 with dcp > 1 (a nightly of Nov 2025 in ../shared/logs; 0.33.0)",
             "Multiplying the GPU KV cache size by the dcp_world_size 8.",
             "format: vllm/v1/core/kv_cache_utils.py (verbatim in ../shared/logs/vllm-kimi-k2-thinking-h200-vllm-"
             "recipes-tp8-dcp8.log, a folder a checkout may lack)",
             F.one("dcp", F.integer)),
    LineForm("concurrency", P._VL_CONCURRENCY, "V0 0.6.3 - V1 0.33",
             "Maximum concurrency for 8,192 tokens per request: 51.11x",
             _F + "vllm-qwen3-8b-h100-llmd-planner-tp1-profiling-override.log",
             _CONCURRENCY),
    LineForm("maxlen_error", P._VL_MAXLEN_ERROR, "V1 0.8 - 0.33 (a failed start)",
             "To serve at least one request with the models's max seq len (221000), (10.12 GiB KV cache is needed, "
             "which is larger than the available KV cache memory (5.59 GiB). Based on the available memory, the "
             "estimated maximum model length is 122080.",
             "doctor-vllm-max-seq-len-kvfp8-issue-25350.log",
             _MAXLEN_ERROR),
    LineForm("error", P._VL_NO_MEMORY, "V1 (vllm-ascend, 2025; 0.33.0 per the reference: a failed start)",
             "(EngineCore_DP0 pid=1102) ValueError: No available memory for the cache blocks. Try increasing "
             "`gpu_memory_utilization` when initializing the engine.",
             "doctor-vllm-ascend-no-available-memory-dp0-issue-5707.log",
             F.one("error", F.whole)),
    LineForm("error", P.VL_FAILED, "V1 (a worker or the engine core died during start-up)",
             "(VllmWorker PP0_TP0 pid=4797) ERROR 09-29 05:54:49 [multiproc_executor.py:596] WorkerProc hit an "
             "exception.", "doctor-vllm-repeated-pool-pair-worker-exception-gfx906-vllm-gfx906-44.log",
             _VL_FAILED),
    LineForm("error", P.VL_LONG_LEN, "V0 / V1 (a length above the derived one, refused: no env var)",
             "Value error, User-specified max_model_len (131072) is greater than the derived max_model_len "
             "(max_position_embeddings=32768.0 or model_max_length=None in model's config.json). To allow overriding "
             "this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1.",
             "doctor-vllm-maxlen-above-derived-refused-longvt-9.log",
             _VL_LONG, once=True),
    LineForm("long_context", P.VL_LONG_LEN, "V1 after vllm#20904 (VLLM_ALLOW_LONG_MAX_MODEL_LEN=1: a warning)",
             "User-specified max_model_len (131072) is greater than the derived max_model_len "
             "(max_position_embeddings=40960 or model_max_length=None in model's config.json). "
             "VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with extreme caution.",
             "format: vllm/config/model.py _get_and_verify_max_len (figures of timothystewart6/vllm-gb10#7)",
             _VL_LONG, once=True),
    LineForm("long_context", P.LONG_ENV, "any (the env var in a pasted command or environment)",
             "export VLLM_ALLOW_LONG_MAX_MODEL_LEN=1", "format: vllm/envs.py VLLM_ALLOW_LONG_MAX_MODEL_LEN",
             env_read("vllm")),
)  # fmt: skip
