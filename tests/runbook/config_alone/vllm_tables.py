"""vLLM start-up figures quoted in a public documentation table, reproduced from the config alone (see the package
docstring).

Source: LMCache's docs FAQ 'KV Cache Sizes for Popular Models' (LMCache/LMCache#1769, 2025-10-10), kept whole under
tests/data/logs/records/ with its provenance and arithmetic in the header. Each row quotes three figures a vLLM
start-up printed ('Available KV cache memory' as 'Spare GPU RAM', 'GPU KV cache size' in tokens, 'Maximum
concurrency' at the model's own context length); the rows that name the GPU and TP are cases. The version, the
utilization and the install are not stated: planned as the release current when the table was added (0.11.0; 0.10.2
plans the same) with vLLM's defaults (utilization 0.9, 8,192 batched tokens, the FlashInfer sampler kvplan assumes
before 0.11.1), never chosen to fit.
"""

from __future__ import annotations

from tests.runbook.config_alone import Case

LOG = "tests/data/logs/records/vllm-record-qwen3-32b-llama-3.1-70b-h100-lmcache-faq.log"
HF = "tests/data/hf/"
GQA = ("kv_cache_dtype=auto", "page_size=default", "mla_layout=default", "attention_backend=default")
DEFAULTS = ("engine=vllm", "engine_version=0.11.0", "gpu=h100", "gpu_memory_utilization=0.9", *GQA)
STATED = (
    "LMCache's FAQ table (LMCache/LMCache#1769): '{row} (tp={tp} on H100)', the context length column ({ctx:,}, the "
    "model's own); the version (2025-10-10: 0.11.0 or 0.10.2, the same rule row) and the utilization (the default "
    "0.9) are not stated"
)
GAP = (
    "the memory besides the weights: the table leaves {left} GiB less KV memory than kvplan plans ({planned} GiB "
    "planned, {logged} GiB quoted), and it states neither the version, the utilization nor the install. A wheel "
    "without FlashInfer sorts the logits in the profile run (38 B a logit against the FlashInfer sampler's 14 B: "
    "{sort} GiB more peak for this vocabulary), which kvplan plans from 0.11.1 on, not at the 0.11.0 assumed here. "
    "What would close it: the run's version, utilization and sampler line"
)

CASES: tuple[Case, ...] = (
    # 0.9-0.16 row, vLLM 0.11.0 (ASSUMED) on 2 × H100, Qwen3-32B: block 16 × 4 kv heads per rank × (128 + 128) × 2 B
    # × 64 layers = 2,097,152 B; requested ceil(85,044,756,480 × 0.9) = 76,540,280,832 B − weights 32,773,285,888 B −
    # torch peak 2,316,566,528 B (FlashInfer sampler, 1,024 × 151,936 logits, + cuBLAS 32 MiB) − non-torch
    # 2,222,645,575 B (FITTED on H100 TP2) = 39,227,782,841 B (36.53 GiB; quoted 33.66) -> 18,705 blocks -> 299,280
    # tokens (+8.53 %). The sort sampler: 1,024 × 151,936 × (38 − 14) B = 3,733,979,136 B (3.48 GiB).
    Case(
        log=LOG,
        source="lmcache-faq",
        line="33.66 GB × 2 (or 275,760 tokens)",
        logged=275_760,
        label="vLLM (Oct 2025, V1; table), Qwen3-32B bf16, H100 × 2, TP2",
        model=HF + "qwen3-32b/config.json",
        sets=(*DEFAULTS, "context_length=40960", "gpus_per_node=2", "tp=2"),
        stated=STATED.format(row="Qwen/Qwen3-32B", tp=2, ctx=40_960),
        gap=GAP.format(left="2.87", planned="36.53", logged="33.66", sort="3.48"),
        gap_band=(0.07, 0.10),
    ),
    # The same table on 4 × H100, Llama-3.1-70B: block 16 × 2 kv heads per rank × (128 + 128) × 2 B × 80 layers =
    # 1,310,720 B; requested 76,540,280,832 B − weights 35,312,386,048 B − torch peak 2,040,004,608 B (1,024 × 128,256
    # logits) − non-torch 2,330,019,758 B (FITTED on H100 TP4) = 36,857,870,418 B (34.33 GiB; quoted 32.06) -> 28,120
    # blocks -> 449,920 tokens (+7.07 %). The sort sampler: 1,024 × 128,256 × 24 B = 3,152,019,456 B (2.94 GiB).
    Case(
        log=LOG,
        source="lmcache-faq",
        line="32.06 GB × 4 (or 420,208 tokens)",
        logged=420_208,
        label="vLLM (Oct 2025, V1; table), Llama-3.1-70B bf16, H100 × 4, TP4",
        model=HF + "llama-3.1-70b/config.json",
        sets=(*DEFAULTS, "context_length=131072", "gpus_per_node=4", "tp=4"),
        stated=STATED.format(row="meta-llama/Llama-3.1-70B", tp=4, ctx=131_072),
        gap=GAP.format(left="2.27", planned="34.33", logged="32.06", sort="2.94"),
        gap_band=(0.05, 0.09),
    ),
)
