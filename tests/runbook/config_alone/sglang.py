"""SGLang startup logs reproduced from the config alone (see the package docstring for the rules).

One case per SGLang version row where a public log with a stated deployment exists (kvplan/versions.py).
Each case's comment derives the figure kvplan computes: cell bytes, the version's default mem_fraction_static,
and pre-load free = CUDA total − 1 GiB (kvplan's runtime_overhead default); weights come from the config.
"""

from __future__ import annotations

from tests.runbook.config_alone import Case

FIELD = "tests/data/logs/field/"
LLAMA = "tests/data/hf/llama-3.1-8b/config.json"
GQA = ("kv_cache_dtype=auto", "page_size=default", "mla_layout=default", "attention_backend=default")
"""A non-DSA model gets the engines' own defaults (the built-in default deployment pins GLM-5.3's fp8 MLA cache)."""
DSV32 = "tests/data/hf/deepseek-v3.2/config.json"
DSV32_B200 = (
    "engine=sglang",
    "gpu=b200",
    "gpus_per_node=8",
    "tp=8",
    "dp_attention=8",
    "kv_cache_dtype=auto",
    "page_size=default",
    "mla_layout=default",
    "attention_backend=default",
)
DSV32_GAP = (
    "the weights: kvplan's parameter-group estimate of DeepSeek-V3.2 fp8 at TP8 is 92.12 GiB per GPU, and both logged "
    "pools need 1.8-1.9 GiB less free memory after the weights (issue 12: the estimate runs 2.6-6.2 % low for this "
    "model on B200; the PR quotes no load line to split weights from runtime overhead); the "
    "rules themselves check out: the pool ratio of the two runs is 0.6715 planned vs 0.6668 logged, and both KV sizes "
    "are reproduced to the printed digit (tests/engines/test_engine_versions_sglang.py); weights from the checkpoint "
    "headers (issue 12 item 1) would close it"
)

CASES: tuple[Case, ...] = (
    # 0.4.0-0.4.5 row. cell = 8 kv heads × (128 + 128) × 2 B × 32 layers = 131,072 B; mfs 0.88 from the tp table.
    Case(
        log=FIELD + "sglang-llama-3.1-8b-h100-sgl-docs-notebook.log",
        line="max_total_num_tokens=444500",
        logged=444_500,
        label="SGLang 0.4.1, Llama-3.1-8B bf16, H100 × 1, TP1",
        model=LLAMA,
        sets=("engine=sglang", "engine_version=0.4.1", "gpu=h100", "gpus_per_node=1", "tp=1", *GQA),
        stated="ServerArgs line (tp_size=1, context_len from the config); the GPU from the docs build (H100 80GB)",
    ),
    # 0.4.0-0.4.5 row, the same chain as above on 0.4.4: mfs 0.88 (tp 1), cell 131,072 B; the FA3 backend the PR
    # tests runs on Hopper only, and every 80 GB Hopper (H100 SXM / PCIe, H800) has the 81,559 MiB NVML total.
    Case(
        log=FIELD + "sglang-llama-3.1-8b-h100-sglang-pr-4760.log",
        line="#tokens: 442750",
        logged=442_750,
        label="SGLang 0.4.4, Llama-3.1-8B bf16, H100 × 1, TP1 (FA3)",
        model=LLAMA,
        sets=("engine=sglang", "engine_version=0.4.4", "gpu=h100", "gpus_per_node=1", "tp=1", *GQA),
        stated="sgl-project/sglang#4760 (2025-03-25 main, 0.4.4.x): Llama-3.1-8B-Instruct, one GPU, FA3 (Hopper); "
        "the default mem fraction (none passed)",
    ),
    # 0.4.0-0.4.5 row on 4 × L4 (nvml 23,034 MiB): mfs 0.85 (tp 4 table; the log's ServerArgs prints it), cell =
    # 2 kv heads per rank × 256 × 2 B × 64 layers = 65,536 B. The log: pre-load 21.63 GiB, weights 15.54 GiB ->
    # int((6.09 − 21.63 × 0.15) × 2^30) // 65,536 = 46,620 (logged 46,611). kvplan: pre-load 20.99 GiB (CUDA total
    # 21.99 − 1 GiB assumed; the log shows 0.36 GiB taken), weights 15.29 GiB -> (5.70 − 3.15) GiB -> 41,877.
    Case(
        log="shared/logs/sglang-qwq-32b-l4-didier-durand-llms-in-clouds.log",
        line="max_total_num_tokens=46611",
        logged=46_611,
        label="SGLang 0.4.3.post4, QwQ-32B bf16, L4 × 4, TP4",
        model="tests/data/hf/qwq-32b/config.json",
        sets=("engine=sglang", "engine_version=0.4.3.post4", "gpu=l4", "gpus_per_node=4", "tp=4", *GQA),
        stated="the source's Dockerfile (SGL_VERSION 0.4.3.post4), instance g6.12xlarge (4 × L4), "
        "--tensor-parallel-size 4",
        gap="on a 24 GB GPU the 15 % slack leaves a 2.8 GiB pool, so the 1 GiB runtime_overhead kvplan assumes "
        "before the weights (the log took 0.36 GiB: pre-load 21.63 of 21.99 GiB) and 0.25 GiB of weights below "
        "the logged 15.54 GiB cost 10 %; a measured runtime overhead per GPU class (kvplan probe) would close it",
        gap_band=(-0.12, -0.08),
    ),
    # 0.4.8-0.5.2 row (July 2025; mfs 0.93 set): cell = 1 kv head per rank × 256 × 2 B × 94 layers = 48,128 B.
    # kvplan: pre-load 78.20 GiB, weights 55.13 GiB (config estimate) -> (23.07 − 78.20 × 0.07) GiB // 48,128.
    Case(
        log=FIELD + "sglang-qwen3-235b-a22b-fp8-h100-vllm-issue-21348.log",
        line="#tokens: 367404",
        logged=367_404,
        label="SGLang (Jul 2025), Qwen3-235B-A22B-FP8, H100 × 4, TP4, mfs 0.93",
        model="tests/data/hf/qwen3-235b-a22b-fp8/config.json",
        sets=(
            "engine=sglang",
            "engine_version=0.4.9",
            "gpu=h100",
            "gpus_per_node=4",
            "tp=4",
            "mem_fraction_static=0.93",
            *GQA,
        ),
        stated="vllm-project/vllm#21348: '4xH100', --tp 4 --mem-fraction-static 0.93; the version is not printed "
        "(the July 2025 release, 0.4.9.x: with mfs set, every 0.4.x-0.5.x row plans this model the same)",
        gap="the issue quotes no memory figure, so the 1.1 GiB the pool lacks cannot be split between weights "
        "(kvplan's 55.13 GiB estimate per GPU) and what TP4 takes before the weights (1 GiB assumed); a load line "
        "or a checkpoint-header weight figure would close it",
        gap_band=(0.05, 0.09),
    ),
    # 0.5.6-0.5.8 row on 8 × MI355X (288 GiB = 294,912 MiB), Kimi-K2.5's own config.json: cell = 61 × (512 + 64) × 2 B
    # = 70,272 B (bf16 MLA). The default mfs of a text model: round((294,912 − (512 + 16,384 × 1.5 + 512 × 2 + 8/8 ×
    # 1024)) / 294,912, 3) = 0.908, scaled for the vision tower (adjust_mem_fraction_for_vlm, 27 layers × 1,152:
    # 27 × 1,152² / (24 × 1,024²) = 1.423828125): 0.908 × 0.95 × (1 − 0.0423828125) = 0.8260405859375, the ServerArgs
    # figure. Pre-load free 309,237,645,312 − 1 GiB = 308,163,903,488 B; weights 75,668,188,128 B (int4 group-32
    # experts, bf16 elsewhere, the MoonViT tower 471,143,920 × 2 B); slack 308,163,903,488 × (1 − mfs) =
    # 53,608,012,085 B; available 232,495,715,360 − 53,608,012,085 B // 70,272 = 2,545,646 (+3.72 %).
    Case(
        log=FIELD + "sglang-kimi-k2.5-mi355x-ajith-sirra-amd-issues.log",
        line="TP0] KV Cache is allocated. #tokens: 2454421",
        logged=2_454_421,
        label="SGLang 0.5.8.post1 (ROCm), Kimi-K2.5, MI355X × 8, TP8",
        model="tests/data/hf/kimi-k2.5/config.json",
        sets=(
            "engine=sglang",
            "engine_version=0.5.8.post1",
            "gpu=mi355x",
            "gpus_per_node=8",
            "tp=8",
            "kv_cache_dtype=auto",
            "page_size=1",
            "mla_layout=default",
            "attention_backend=triton",
        ),
        stated="the source's command (sglang serve --tp 8), its docker image (v0.5.8.post1-rocm720-mi35x) and "
        "ServerArgs (attention_backend='triton', page_size=1)",
        gap="the weights and the memory before them on this ROCm image: the log loads 73.58 GiB a GPU where the "
        "config gives 70.47 GiB (3.1 GiB not traced: the int4 experts as this image's MoE path holds them), and its "
        "least rank has 283.53 GiB free before the weights where kvplan assumes 287.00 (the CUDA total less 1 GiB; "
        "the same source's GLM-5 image holds 7.4-7.8 GB there too). Given both figures, SGLang's own arithmetic gives "
        "2,454,504 tokens (−0.003 %)",
        gap_band=(0.03, 0.05),
    ),
    # 0.5.10-0.5.23 row (SGLang main of Aug 2026), 1 × H100 (nvml 81,559 MiB): cell = 4 kv heads × (128 + 128) × 2 B ×
    # 48 layers = 98,304 B; the default mem fraction round((81,559 − 13,904) / 81,559, 3) = 0.83 (reserved = 512 +
    # 8192 × 1.5 + 1/8 × 1024 + decode graph 256 × 2 + prefill graph 58 × 8 MiB), the same figure the ServerArgs line
    # prints. kvplan: pre-load 78.20 GiB (CUDA total 79.20 − 1 GiB), weights 29.04 GiB (per tensor from config.json +
    # the rotary cache) -> int((78.20 × 0.83 − 29.04) × 2^30) // 98,304 = 391,753 (−0.30 %).
    Case(
        log=FIELD + "sglang-qwen3-30b-a3b-fp8-h100-mystous-vllm-hybrid.log",
        line="max_total_num_tokens=392920",
        logged=392_920,
        label="SGLang main (Aug 2026, 0.5.10-0.5.23 rules), Qwen3-30B-A3B-FP8, H100 × 1, TP1",
        model="tests/data/hf/qwen3-30b-a3b-fp8/config.json",
        sets=(
            "engine=sglang",
            "engine_version=0.5.23",
            "gpu=h100",
            "gpus_per_node=1",
            "tp=1",
            "kv_cache_dtype=auto",
            "page_size=1",
            "mla_layout=default",
            "attention_backend=triton",
        ),
        stated="the run's ServerArgs line (tp_size=1, page_size=1, attention_backend='triton', kv_cache_dtype='auto'; "
        "mem_fraction_static=0.83, not set here: kvplan's default must find it); H100 80GB from the log's "
        "kernel-config warnings; the version is not printed (main of Aug 2026, after 0.5.9: the 0.5.10-0.5.23 row, "
        "read at 0.5.23)",
    ),
    # 0.5.10-0.5.23 row (SGLang main of Sep 2026), 1 × A40 (NVML 46,068 MiB; CUDA total derived 44.49 GiB): cell
    # 131,072 B; mfs 0.9 set. kvplan: pre-load 43.49 GiB (44.49 − 1 GiB assumed), weights 14.99 GiB (config) ->
    # int((43.49 × 0.9 − 14.99) × 2^30) // 131,072 = 197,842 (−2.12 %).
    Case(
        log=FIELD + "sglang-llama-3.1-8b-a40-vireshkoli-llm-inference-optimization.log",
        line="max_total_num_tokens=202127",
        logged=202_127,
        label="SGLang main (Sep 2026, 0.5.10-0.5.23 rules), Llama-3.1-8B bf16, A40 × 1, TP1, mfs 0.9",
        model=LLAMA,
        sets=(
            "engine=sglang",
            "engine_version=0.5.23",
            "gpu=a40",
            "gpus_per_node=1",
            "tp=1",
            "mem_fraction_static=0.9",
            "context_length=4096",
            "max_running_requests=256",
            "chunked_prefill_size=4096",
            "kv_cache_dtype=auto",
            "page_size=1",
            "mla_layout=default",
            "attention_backend=flashinfer",
        ),
        stated="the run's ServerArgs line (tp_size=1, mem_fraction_static=0.9, context_length=4096, "
        "max_running_requests=256, chunked_prefill_size=4096, page_size=1, attention_backend='flashinfer'); the A40 "
        "of the same benchmark (its vLLM twin, vllm-llama-3.1-8b-a40-...): the catalog's A40 (NVML 46,068 MiB, CUDA "
        "total 44.43 GiB as the twin reads it); the version is not printed (main of Sep 2026, after 0.5.9: the "
        "0.5.10-0.5.23 row)",
        gap="the memory before the weights on a 48 GB card: kvplan assumes CUDA total − 1 GiB (43.43 GiB) where the "
        "log loads from 44.11 GiB (0.32 GiB taken of the 44.43 GiB total), and 0.68 GiB × 0.9 is 2.3 % of a 24.7 GiB "
        "pool; the chain itself checks out (the log's own figures give 202,170, −0.02 %). What would close it: a "
        "measured runtime overhead per GPU class (kvplan probe)",
        gap_band=(-0.03, -0.02),
    ),
    # 0.5.3 row (main before sgl-project/sglang#11309), 8 × B200 (nvml 183,359 MiB), tp 8 = dp 8 with dp attention:
    # fp8 forced on SM100, page 64, mem_fraction_static forced to 0.8; budget cell = 61 × 576 B = 35,136 B (the index
    # K is allocated outside it). kvplan: pre-load 177.35 GiB, weights 92.12 GiB (config estimate) ->
    # int((85.23 − 177.35 × 0.2) × 2^30) // 35,136 // 64 × 64 = 1,520,640.
    Case(
        log=FIELD + "sglang-deepseek-v3.2-exp-b200-sglang-pr-11309-main.log",
        line="#tokens: 1462784",
        logged=1_462_784,
        label="SGLang 0.5.3 (main, Oct 2025), DeepSeek-V3.2-Exp fp8 KV, B200 × 8, TP8 DP8",
        model=DSV32,
        sets=(*DSV32_B200, "engine_version=0.5.3"),
        stated="sgl-project/sglang#11309: 'On 8xB200', --tp 8 --dp 8 --enable-dp-attention, 'With main (hardcoded "
        "mem-fraction-static=0.8)'",
        gap=DSV32_GAP,
        gap_band=(0.02, 0.06),
    ),
    # 0.5.4 row (the PR's own run): the index K in the budget, cell = 61 × (576 + 132) B = 43,188 B; the mem fraction
    # from the reserve heuristic with the dp-attention terms: round((183,359 − 45,568) / 183,359, 3) = 0.751.
    Case(
        log=FIELD + "sglang-deepseek-v3.2-exp-b200-sglang-pr-11309.log",
        line="#tokens: 975424",
        logged=975_424,
        label="SGLang 0.5.4 (#11309), DeepSeek-V3.2-Exp fp8 KV, B200 × 8, TP8 DP8",
        model=DSV32,
        sets=(*DSV32_B200, "engine_version=0.5.4"),
        stated="sgl-project/sglang#11309: 'On 8xB200', --tp 8 --dp 8 --enable-dp-attention, 'With this PR'",
        gap=DSV32_GAP,
        gap_band=(0.02, 0.07),
    ),
    # 0.5.8.post1-0.5.9 row, GLM-5-FP8 on 8 × MI355X (288 GiB) with the v0.5.9 ROCm image: DSA on every one of 78
    # layers, fp8 rows, page 1 on ROCm; budget cell = 78 × (576 + 132) B = 55,224 B; the default mem fraction 0.908
    # (the ServerArgs figure). kvplan: pre-load 308,163,903,488 B (288 − 1 GiB assumed) − weights 95,566,778,880 B
    # (89.00 GiB; logged 89.20) − slack 28,351,079,120 B (× 0.092) = 184,246,045,487 B // 55,224 = 3,336,340 (+4.27 %).
    Case(
        log="tests/data/logs/doctor-sglang-0.5.9-glm-5-fp8-mi355x-rocm-preload-usage-ajith-sirra-amd-issues.log",
        source="ajith-sirra-amd-issues",  # the repository of the Kimi-K2.5 case (ajith-sirra-amd/Issues)
        line="TP0] KV Cache is allocated. #tokens: 3199575",
        logged=3_199_575,
        label="SGLang 0.5.9 (ROCm), GLM-5-FP8, MI355X × 8, TP8, fp8 KV",
        model="tests/data/hf/glm-5/config.json",
        sets=(
            "engine=sglang",
            "engine_version=0.5.9",
            "gpu=mi355x",
            "gpus_per_node=8",
            "tp=8",
            "kv_cache_dtype=fp8_e4m3",
            "page_size=1",
            "mla_layout=default",
            "attention_backend=triton",
        ),
        stated="the source's command (--tp-size 8 --kv-cache-dtype fp8_e4m3 --attention-backend triton), its docker "
        "image (rocm/sgl-dev:v0.5.9-rocm720-mi35x-20260225) and ServerArgs (tp_size=8, dp_size=1); page 1 from the "
        "'Setting page size to 1 for DeepSeek DSA on ROCm' line",
        gap="the memory before the weights on this ROCm image: the log loads from 279.48 GiB free (7.41-7.83 GB held "
        "after 'Init torch distributed', 3.41-3.83 GB on the 0.5.8.post1 image of the same source) where kvplan "
        "assumes 287.00 GiB (a 1 GiB runtime overhead); × 0.908 that is 6.8 GiB of a 164.6 GiB budget (the weights "
        "add 0.2); the chain "
        "itself lands within 0.01 % from the log's own figures. What would close it: the pre-load memory of the ROCm "
        "images measured per image",
        gap_band=(0.03, 0.06),
    ),
)
