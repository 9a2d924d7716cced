"""vLLM start-up figures kept in a public record, reproduced from the config alone (see the package docstring).

Source: ashishkamra/vllm-memory-estimator's validation database (test_data/validation_db.json at 8b0e21d1): each
record holds the figures one Red Hat benchmark start-up log printed (the engine config line, 'Model loading took',
'Available KV cache memory', 'GPU KV cache size') with the run's accelerator and runtime args; the logs themselves are
not public. Each case cites one record, kept whole and verbatim under tests/data/logs/records/ with its provenance
and arithmetic in the header. One source: H200, B200 and MI300X (ROCm) over vLLM 0.11-0.20, utilization 0.92,
prefix caching off, max_seq_len 8,192 or 10,000 (131,072 and 163,840, the models' own, in the two 0.20 runs).

kvplan plans each with its vLLM V1 rows (kvplan/versions.py; no CUDA-graph estimate before 0.21): available =
ceil(CUDA total × 0.92) − weights (from the config) − the profile run and non-torch growth (kvplan/engines/
vllm_profile.py, FITTED terms marked there); each comment gives those terms and the record's own figures.
"""

from __future__ import annotations

from tests.runbook.config_alone import Case

RECORDS = "tests/data/logs/records/"
HF = "tests/data/hf/"
DEFAULTS = ("page_size=default", "mla_layout=default", "attention_backend=default")


def _record(
    log: str,
    logged: int,
    label: str,
    model: str,
    build: str,
    gpu: str,
    accelerator: str,
    *,
    tp: int,
    ctx: int,
    kv: str = "auto",
    gap: str = "",
    gap_band: tuple[float, float] = (0.0, 0.0),
) -> Case:
    """One record: the stated knobs are its runtime_args (utilization 0.92 in every record kept), log_config and
    accelerator; the evidence line is its kv_cache_tokens."""
    version = build.removeprefix("v").split("+")[0]
    return Case(
        log=RECORDS + log,
        line=f'"kv_cache_tokens": {logged}',
        logged=logged,
        label=label,
        model=HF + model + "/config.json",
        sets=(
            "engine=vllm",
            f"engine_version={version}",
            f"gpu={gpu}",
            "gpu_memory_utilization=0.92",
            f"context_length={ctx}",
            f"kv_cache_dtype={kv}",
            *DEFAULTS,
            f"gpus_per_node={tp}",
            f"tp={tp}",
        ),
        stated=f"the record's runtime_args (tensor-parallel-size {tp}, gpu-memory-utilization 0.92), log_config "
        f"(vllm_version {build}, max_seq_len {ctx}, kv_cache_dtype {kv}) and accelerator {accelerator}",
        gap=gap,
        gap_band=gap_band,
    )


CASES: tuple[Case, ...] = (
    # MI300X × 8, vLLM 0.11.2+rhai1: requested ceil(205,822,885,888 × 0.92) = 189,357,055,017 B − weights
    # 85,416,954,912 B (79.55 GiB; recorded 81.3105) − 11,416,455,086 B of other non-KV (torch peak 8.46 + non-torch
    # 2.17 GiB) = 92,523,645,019 B (86.17 GiB; recorded 87.09) -> 1,316,650 tokens (-0.58 %).
    _record(
        "vllm-record-deepseek-r1-0528-mi300x-tp8-0.11.2-rhai1-vllm-memory-estimator.log",
        1_324_304,
        "vLLM 0.11.2+rhai1 (record), DeepSeek-R1-0528 fp8, MI300X × 8, TP8, util 0.92",
        "deepseek-r1",
        "v0.11.2+rhai1",
        "mi300x",
        "MI300X",
        tp=8,
        ctx=8192,
    ),
    # MI300X × 8, vLLM 0.14.1+rhai4: requested ceil(205,822,885,888 × 0.92) = 189,357,055,017 B − weights
    # 85,416,954,912 B (79.55 GiB; recorded 81.31) − 11,416,455,086 B of other non-KV (torch peak 8.46 + non-torch
    # 2.17 GiB) = 92,523,645,019 B (86.17 GiB; recorded 85.34) -> 1,316,650 tokens (+1.47 %).
    _record(
        "vllm-record-deepseek-r1-0528-mi300x-tp8-0.14.1-rhai4-vllm-memory-estimator.log",
        1_297_552,
        "vLLM 0.14.1+rhai4 (record), DeepSeek-R1-0528 fp8, MI300X × 8, TP8, util 0.92",
        "deepseek-r1",
        "v0.14.1+rhai4",
        "mi300x",
        "MI300X",
        tp=8,
        ctx=8192,
    ),
    # MI300X × 8, vLLM 0.18.0+rhaiv.0: requested ceil(205,822,885,888 × 0.92) = 189,357,055,017 B − weights
    # 85,416,954,912 B (79.55 GiB; recorded 81.31) − 8,396,474,286 B of other non-KV (torch peak 5.65 + non-torch 2.17
    # GiB) = 95,543,625,819 B (88.98 GiB; recorded 88.0) -> 1,359,625 tokens (+1.61 %).
    _record(
        "vllm-record-deepseek-r1-0528-mi300x-tp8-0.18.0-rhaiv.0-vllm-memory-estimator.log",
        1_338_112,
        "vLLM 0.18.0+rhaiv.0 (record), DeepSeek-R1-0528 fp8, MI300X × 8, TP8, util 0.92",
        "deepseek-r1",
        "v0.18.0+rhaiv.0",
        "mi300x",
        "MI300X",
        tp=8,
        ctx=8192,
    ),
    # MI300X × 8, vLLM 0.16.0+rhaiv.2: requested ceil(205,822,885,888 × 0.92) = 189,357,055,017 B − weights
    # 85,416,954,912 B (79.55 GiB; recorded 81.31) − 11,416,455,086 B of other non-KV (torch peak 8.46 + non-torch
    # 2.17 GiB) = 92,523,645,019 B (86.17 GiB; recorded 85.23) -> 1,316,650 tokens (+1.60 %).
    _record(
        "vllm-record-deepseek-r1-0528-mi300x-tp8-0.16.0-rhaiv.2-vllm-memory-estimator.log",
        1_295_920,
        "vLLM 0.16.0+rhaiv.2 (record), DeepSeek-R1-0528 fp8, MI300X × 8, TP8, util 0.92",
        "deepseek-r1",
        "v0.16.0+rhaiv.2",
        "mi300x",
        "MI300X",
        tp=8,
        ctx=8192,
    ),
    # MI300X × 1, vLLM 0.11.2+rhai1: requested ceil(205,822,885,888 × 0.92) = 189,357,055,017 B − weights
    # 141,140,967,424 B (131.45 GiB; recorded 131.6191) − 5,465,828,229 B of other non-KV (torch peak 4.96 + non-torch
    # 0.13 GiB) = 42,750,259,364 B (39.81 GiB; recorded 39.07) -> 130,448 tokens (+1.89 %).
    _record(
        "vllm-record-llama-3.3-70b-mi300x-tp1-0.11.2-rhai1-vllm-memory-estimator.log",
        128_032,
        "vLLM 0.11.2+rhai1 (record), Llama-3.3-70B-Instruct bf16, MI300X × 1, TP1, util 0.92",
        "llama-3.1-70b",
        "v0.11.2+rhai1",
        "mi300x",
        "MI300X",
        tp=1,
        ctx=8192,
    ),
    # MI300X × 1, vLLM 0.18.0+rhaiv.0: requested ceil(205,822,885,888 × 0.92) = 189,357,055,017 B − weights
    # 141,140,967,424 B (131.45 GiB; recorded 131.62) − 4,194,304,000 B of other non-KV (torch peak 3.66 + non-torch
    # 0.25 GiB) = 44,021,783,593 B (41.00 GiB; recorded 41.88) -> 134,336 tokens (-2.11 %).
    _record(
        "vllm-record-llama-3.3-70b-mi300x-tp1-0.18.0-rhaiv.0-vllm-memory-estimator.log",
        137_232,
        "vLLM 0.18.0+rhaiv.0 (record), Llama-3.3-70B-Instruct bf16, MI300X × 1, TP1, util 0.92",
        "llama-3.1-70b",
        "v0.18.0+rhaiv.0",
        "mi300x",
        "MI300X",
        tp=1,
        ctx=8192,
        gap="the memory besides the weights on the ROCm 0.18 build: the record leaves 2.85 GiB for the profile peak "
        "and non-torch growth where kvplan plans 3.91 GiB (torch peak 3.66 + non-torch 0.25), 1.06 GiB of a 41.9 "
        "GiB budget; the weights land within 0.13 %, and the 0.11-0.16 records of this deployment land at +1.89 "
        "%. What would close it: the profile peak of the ROCm builds measured per release",
        gap_band=(-0.035, -0.02),
    ),
    # MI300X × 4, vLLM 0.13.0+rhai0: requested ceil(205,822,885,888 × 0.92) = 189,357,055,017 B − weights
    # 35,312,386,048 B (32.89 GiB; recorded 32.959) − 7,656,261,550 B of other non-KV (torch peak 4.96 + non-torch
    # 2.17 GiB) = 146,388,407,419 B (136.33 GiB; recorded 137.3) -> 1,786,960 tokens (-0.69 %).
    _record(
        "vllm-record-llama-3.3-70b-mi300x-tp4-0.13.0-rhai0-vllm-memory-estimator.log",
        1_799_360,
        "vLLM 0.13.0+rhai0 (record), Llama-3.3-70B-Instruct bf16, MI300X × 4, TP4, util 0.92",
        "llama-3.1-70b",
        "v0.13.0+rhai0",
        "mi300x",
        "MI300X",
        tp=4,
        ctx=8192,
    ),
    # MI300X × 4, vLLM 0.11.2+rhai1: requested ceil(205,822,885,888 × 0.92) = 189,357,055,017 B − weights
    # 117,632,424,960 B (109.55 GiB; recorded 112.6113) − 10,574,186,414 B of other non-KV (torch peak 7.68 + non-
    # torch 2.17 GiB) = 61,150,443,643 B (56.95 GiB; recorded 56.83) -> 1,270,576 tokens (+0.25 %).
    _record(
        "vllm-record-qwen3-235b-a22b-2507-mi300x-tp4-0.11.2-rhai1-vllm-memory-estimator.log",
        1_267_456,
        "vLLM 0.11.2+rhai1 (record), Qwen3-235B-A22B-Instruct-2507 bf16, MI300X × 4, TP4, util 0.92",
        "qwen3-235b-a22b",
        "v0.11.2+rhai1",
        "mi300x",
        "MI300X",
        tp=4,
        ctx=8192,
    ),
    # MI300X × 8, vLLM 0.11.2+rhai1: requested ceil(205,822,885,888 × 0.92) = 189,357,055,017 B − weights
    # 58,970,102,784 B (54.92 GiB; recorded 56.6465) − 10,574,186,414 B of other non-KV (torch peak 7.68 + non-torch
    # 2.17 GiB) = 119,812,765,819 B (111.58 GiB; recorded 111.06) -> 2,489,456 tokens (+0.85 %).
    _record(
        "vllm-record-qwen3-235b-a22b-2507-mi300x-tp8-0.11.2-rhai1-vllm-memory-estimator.log",
        2_468_368,
        "vLLM 0.11.2+rhai1 (record), Qwen3-235B-A22B-Instruct-2507 bf16, MI300X × 8, TP8, util 0.92",
        "qwen3-235b-a22b",
        "v0.11.2+rhai1",
        "mi300x",
        "MI300X",
        tp=8,
        ctx=10000,
    ),
    # B200 × 8, vLLM 0.18.0: requested ceil(191,501,434,880 × 0.92) = 176,181,320,090 B − weights 85,416,954,912 B
    # (79.55 GiB; recorded 79.88) − 8,315,803,566 B of other non-KV (torch peak 5.57 + non-torch 2.17 GiB) =
    # 82,448,561,612 B (76.79 GiB; recorded 79.81) -> 1,173,248 tokens (-3.79 %).
    _record(
        "vllm-record-deepseek-r1-0528-b200-tp8-0.18.0-vllm-memory-estimator.log",
        1_219_424,
        "vLLM 0.18.0 (record), DeepSeek-R1-0528 fp8, B200 × 8, TP8, util 0.92",
        "deepseek-r1",
        "v0.18.0",
        "b200",
        "B200",
        tp=8,
        ctx=8192,
        gap="the memory besides the weights at TP8 on Blackwell: the record leaves 4.39 GiB where kvplan plans 7.74 "
        "GiB (torch peak 5.57 with a 1.75 GiB fused-MoE workspace; non-torch growth 2.17 GiB FITTED on H100 TP4 "
        "logs, ASSUMED at TP8); the weights land within 0.4 %. What would close it: the profile peak and "
        "non-torch growth measured on B200 at TP8",
        gap_band=(-0.05, -0.025),
    ),
    # B200 × 4, vLLM 0.18.0: requested ceil(191,501,434,880 × 0.92) = 176,181,320,090 B − weights 35,312,386,048 B
    # (32.89 GiB; recorded 32.89) − 4,580,169,646 B of other non-KV (torch peak 2.10 + non-torch 2.17 GiB) =
    # 136,288,764,396 B (126.93 GiB; recorded 127.02) -> 1,663,680 tokens (-0.07 %).
    _record(
        "vllm-record-llama-3.3-70b-b200-tp4-0.18.0-vllm-memory-estimator.log",
        1_664_848,
        "vLLM 0.18.0 (record), Llama-3.3-70B-Instruct bf16, B200 × 4, TP4, util 0.92",
        "llama-3.1-70b",
        "v0.18.0",
        "b200",
        "B200",
        tp=4,
        ctx=8192,
    ),
    # B200 × 8, vLLM 0.18.0: requested ceil(191,501,434,880 × 0.92) = 176,181,320,090 B − weights 86,952,919,584 B
    # (80.98 GiB; recorded 80.77) − 7,271,837,940 B of other non-KV (topk indices buffer 0.12 + physical topk 0.48 +
    # indexer prefill buffer 0.04 + torch peak 5.57 + non-torch 2.17 − DSA calibration 1.61 GiB) = 81,956,562,566 B
    # (76.33 GiB; recorded 78.87) -> 1,046,336 tokens (-3.23 %).
    _record(
        "vllm-record-deepseek-v3.2-b200-tp8-0.18.0-vllm-memory-estimator.log",
        1_081_216,
        "vLLM 0.18.0 (record), DeepSeek-V3.2 fp8, B200 × 8, TP8, util 0.92",
        "deepseek-v3.2",
        "v0.18.0",
        "b200",
        "B200",
        tp=8,
        ctx=8192,
        gap="the memory besides the weights at TP8 on Blackwell: the record leaves 4.44 GiB where kvplan plans 6.77 "
        "GiB (torch peak 5.57 + non-torch 2.17 ASSUMED at TP8 + DSA buffers 0.64 − the DSA calibration 1.61 "
        "fitted to GLM-5.3's recipe point); the weights land within 0.3 %. What would close it: the DSA model's "
        "non-KV terms measured on B200",
        gap_band=(-0.045, -0.02),
    ),
    # B200 × 8, vLLM 0.18.0: requested ceil(191,501,434,880 × 0.92) = 176,181,320,090 B − weights 52,426,273,184 B
    # (48.83 GiB; recorded 48.62) − 7,281,384,180 B of other non-KV (topk indices buffer 0.12 + physical topk 0.48 +
    # indexer prefill buffer 0.05 + torch peak 5.57 + non-torch 2.17 − DSA calibration 1.61 GiB) = 116,473,662,726 B
    # (108.47 GiB; recorded 110.95) -> 2,696,896 tokens (-2.23 %).
    _record(
        "vllm-record-deepseek-v3.2-nvfp4-b200-tp8-0.18.0-vllm-memory-estimator.log",
        2_758_336,
        "vLLM 0.18.0 (record), DeepSeek-V3.2-NVFP4, B200 × 8, TP8, util 0.92",
        "deepseek-v3.2-nvfp4",
        "v0.18.0",
        "b200",
        "B200",
        tp=8,
        ctx=10000,
        kv="fp8_e4m3",
        gap="the memory besides the weights at TP8 on Blackwell, as for the fp8 checkpoint: the record leaves 4.51 "
        "GiB where kvplan plans 6.78 GiB (torch peak 5.57 + non-torch 2.17 ASSUMED at TP8 + DSA buffers 0.65 − "
        "the DSA calibration 1.61); the NVFP4 weights land within 0.5 %. What would close it: the non-KV terms "
        "measured on B200",
        gap_band=(-0.035, -0.02),
    ),
    # H200 × 4, vLLM 0.11.2: requested ceil(150,109,945,856 × 0.92) = 138,101,150,188 B − weights 35,312,386,048 B
    # (32.89 GiB; recorded 32.8894) − 7,522,043,822 B of other non-KV (torch peak 4.84 + non-torch 2.17 GiB) =
    # 95,266,720,318 B (88.72 GiB; recorded 90.23) -> 1,162,912 tokens (-1.67 %).
    _record(
        "vllm-record-llama-3.3-70b-h200-tp4-0.11.2-vllm-memory-estimator.log",
        1_182_608,
        "vLLM 0.11.2 (record), Llama-3.3-70B-Instruct bf16, H200 × 4, TP4, util 0.92",
        "llama-3.1-70b",
        "v0.11.2",
        "h200",
        "H200",
        tp=4,
        ctx=8192,
    ),
    # H200 × 4, vLLM 0.13.0: requested ceil(150,109,945,856 × 0.92) = 138,101,150,188 B − weights 35,312,386,048 B
    # (32.89 GiB; recorded 32.8894) − 7,522,043,822 B of other non-KV (torch peak 4.84 + non-torch 2.17 GiB) =
    # 95,266,720,318 B (88.72 GiB; recorded 90.23) -> 1,162,912 tokens (-1.67 %).
    _record(
        "vllm-record-llama-3.3-70b-h200-tp4-0.13.0-vllm-memory-estimator.log",
        1_182_608,
        "vLLM 0.13.0 (record), Llama-3.3-70B-Instruct bf16, H200 × 4, TP4, util 0.92",
        "llama-3.1-70b",
        "v0.13.0",
        "h200",
        "H200",
        tp=4,
        ctx=8192,
    ),
    # H200 × 4, vLLM 0.14.1: requested ceil(150,109,945,856 × 0.92) = 138,101,150,188 B − weights 35,312,386,048 B
    # (32.89 GiB; recorded 32.89) − 7,522,043,822 B of other non-KV (torch peak 4.84 + non-torch 2.17 GiB) =
    # 95,266,720,318 B (88.72 GiB; recorded 90.3) -> 1,162,912 tokens (-1.74 %).
    _record(
        "vllm-record-llama-3.3-70b-h200-tp4-0.14.1-vllm-memory-estimator.log",
        1_183_520,
        "vLLM 0.14.1 (record), Llama-3.3-70B-Instruct bf16, H200 × 4, TP4, util 0.92",
        "llama-3.1-70b",
        "v0.14.1",
        "h200",
        "H200",
        tp=4,
        ctx=8192,
    ),
    # H200 × 4, vLLM 0.16.0: requested ceil(150,109,945,856 × 0.92) = 138,101,150,188 B − weights 35,312,386,048 B
    # (32.89 GiB; recorded 32.89) − 7,522,043,822 B of other non-KV (torch peak 4.84 + non-torch 2.17 GiB) =
    # 95,266,720,318 B (88.72 GiB; recorded 90.3) -> 1,162,912 tokens (-1.75 %).
    _record(
        "vllm-record-llama-3.3-70b-h200-tp4-0.16.0-vllm-memory-estimator.log",
        1_183_568,
        "vLLM 0.16.0 (record), Llama-3.3-70B-Instruct bf16, H200 × 4, TP4, util 0.92",
        "llama-3.1-70b",
        "v0.16.0",
        "h200",
        "H200",
        tp=4,
        ctx=8192,
    ),
    # H200 × 4, vLLM 0.18.0: requested ceil(150,109,945,856 × 0.92) = 138,101,150,188 B − weights 35,312,386,048 B
    # (32.89 GiB; recorded 32.89) − 4,437,743,534 B of other non-KV (torch peak 1.96 + non-torch 2.17 GiB) =
    # 98,351,020,606 B (91.60 GiB; recorded 91.57) -> 1,200,560 tokens (+0.03 %).
    _record(
        "vllm-record-llama-3.3-70b-h200-tp4-0.18.0-vllm-memory-estimator.log",
        1_200_192,
        "vLLM 0.18.0 (record), Llama-3.3-70B-Instruct bf16, H200 × 4, TP4, util 0.92",
        "llama-3.1-70b",
        "v0.18.0",
        "h200",
        "H200",
        tp=4,
        ctx=8192,
    ),
    # H200 × 4, vLLM 0.19.0: requested ceil(150,109,945,856 × 0.92) = 138,101,150,188 B − weights 35,312,386,048 B
    # (32.89 GiB; recorded 32.89) − 4,437,743,534 B of other non-KV (torch peak 1.96 + non-torch 2.17 GiB) =
    # 98,351,020,606 B (91.60 GiB; recorded 91.57) -> 1,200,560 tokens (+0.03 %).
    _record(
        "vllm-record-llama-3.3-70b-h200-tp4-0.19.0-vllm-memory-estimator.log",
        1_200_192,
        "vLLM 0.19.0 (record), Llama-3.3-70B-Instruct bf16, H200 × 4, TP4, util 0.92",
        "llama-3.1-70b",
        "v0.19.0",
        "h200",
        "H200",
        tp=4,
        ctx=8192,
    ),
    # H200 × 4, vLLM 0.20.0: requested ceil(150,109,945,856 × 0.92) = 138,101,150,188 B − weights 35,312,386,048 B
    # (32.89 GiB; recorded 32.89) − 4,437,743,534 B of other non-KV (torch peak 1.96 + non-torch 2.17 GiB) =
    # 98,351,020,606 B (91.60 GiB; recorded 90.66) -> 1,200,560 tokens (+1.03 %).
    _record(
        "vllm-record-llama-3.3-70b-h200-tp4-0.20.0-vllm-memory-estimator.log",
        1_188_336,
        "vLLM 0.20.0 (record), Llama-3.3-70B-Instruct bf16, H200 × 4, TP4, util 0.92",
        "llama-3.1-70b",
        "v0.20.0",
        "h200",
        "H200",
        tp=4,
        ctx=131072,
    ),
    # H200 × 8, vLLM 0.13.0: requested ceil(150,109,945,856 × 0.92) = 138,101,150,188 B − weights 85,416,954,912 B
    # (79.55 GiB; recorded 79.739) − 9,419,966,382 B of other non-KV (torch peak 6.60 + non-torch 2.17 GiB) =
    # 43,264,228,894 B (40.29 GiB; recorded 43.11) -> 615,664 tokens (-6.54 %).
    _record(
        "vllm-record-deepseek-r1-0528-h200-tp8-0.13.0-vllm-memory-estimator.log",
        658_752,
        "vLLM 0.13.0 (record), DeepSeek-R1-0528 fp8, H200 × 8, TP8, util 0.92",
        "deepseek-r1",
        "v0.13.0",
        "h200",
        "H200",
        tp=8,
        ctx=8192,
        gap="the memory besides the weights in 0.13: the record leaves 5.77 GiB where kvplan plans 8.77 GiB (torch "
        "peak 6.60, non-torch 2.17 ASSUMED at TP8); this deployment's records leave 7.28 (0.11.2), 5.77 (0.13), "
        "7.45 (0.14.1), 5.80 (0.16), 6.09 (0.18-0.19) and 7.64 GiB (0.20, at 163,840 tokens), so the profile peak"
        " moves between releases by more than kvplan's rows track. What would close it: the 0.13 profile run read"
        " from its source",
        gap_band=(-0.08, -0.05),
    ),
    # H200 × 8, vLLM 0.14.1: requested ceil(150,109,945,856 × 0.92) = 138,101,150,188 B − weights 85,416,954,912 B
    # (79.55 GiB; recorded 79.74) − 9,419,966,382 B of other non-KV (torch peak 6.60 + non-torch 2.17 GiB) =
    # 43,264,228,894 B (40.29 GiB; recorded 41.43) -> 615,664 tokens (-2.75 %).
    _record(
        "vllm-record-deepseek-r1-0528-h200-tp8-0.14.1-vllm-memory-estimator.log",
        633_088,
        "vLLM 0.14.1 (record), DeepSeek-R1-0528 fp8, H200 × 8, TP8, util 0.92",
        "deepseek-r1",
        "v0.14.1",
        "h200",
        "H200",
        tp=8,
        ctx=8192,
        gap="the memory besides the weights in 0.14.1: the record leaves 7.45 GiB where kvplan plans 8.77 GiB (torch "
        "peak 6.60, non-torch 2.17 ASSUMED at TP8), the release-by-release swing the 0.13 record of this "
        "deployment shows. What would close it: the 0.14 profile run read from its source",
        gap_band=(-0.04, -0.02),
    ),
    # H200 × 8, vLLM 0.16.0: requested ceil(150,109,945,856 × 0.92) = 138,101,150,188 B − weights 85,416,954,912 B
    # (79.55 GiB; recorded 79.74) − 9,419,966,382 B of other non-KV (torch peak 6.60 + non-torch 2.17 GiB) =
    # 43,264,228,894 B (40.29 GiB; recorded 43.08) -> 615,664 tokens (-6.46 %).
    _record(
        "vllm-record-deepseek-r1-0528-h200-tp8-0.16.0-vllm-memory-estimator.log",
        658_176,
        "vLLM 0.16.0 (record), DeepSeek-R1-0528 fp8, H200 × 8, TP8, util 0.92",
        "deepseek-r1",
        "v0.16.0",
        "h200",
        "H200",
        tp=8,
        ctx=8192,
        gap="the memory besides the weights in 0.16: the record leaves 5.80 GiB where kvplan plans 8.77 GiB (torch "
        "peak 6.60, non-torch 2.17 ASSUMED at TP8), as in 0.13. What would close it: the 0.16 profile run read "
        "from its source",
        gap_band=(-0.08, -0.05),
    ),
    # H200 × 8, vLLM 0.18.0: requested ceil(150,109,945,856 × 0.92) = 138,101,150,188 B − weights 85,416,954,912 B
    # (79.55 GiB; recorded 79.74) − 6,311,040,942 B of other non-KV (torch peak 3.71 + non-torch 2.17 GiB) =
    # 46,373,154,334 B (43.19 GiB; recorded 42.79) -> 659,904 tokens (+0.93 %).
    _record(
        "vllm-record-deepseek-r1-0528-h200-tp8-0.18.0-vllm-memory-estimator.log",
        653_808,
        "vLLM 0.18.0 (record), DeepSeek-R1-0528 fp8, H200 × 8, TP8, util 0.92",
        "deepseek-r1",
        "v0.18.0",
        "h200",
        "H200",
        tp=8,
        ctx=8192,
    ),
    # H200 × 8, vLLM 0.19.0: requested ceil(150,109,945,856 × 0.92) = 138,101,150,188 B − weights 85,416,954,912 B
    # (79.55 GiB; recorded 79.74) − 6,311,040,942 B of other non-KV (torch peak 3.71 + non-torch 2.17 GiB) =
    # 46,373,154,334 B (43.19 GiB; recorded 42.79) -> 659,904 tokens (+0.93 %).
    _record(
        "vllm-record-deepseek-r1-0528-h200-tp8-0.19.0-vllm-memory-estimator.log",
        653_808,
        "vLLM 0.19.0 (record), DeepSeek-R1-0528 fp8, H200 × 8, TP8, util 0.92",
        "deepseek-r1",
        "v0.19.0",
        "h200",
        "H200",
        tp=8,
        ctx=8192,
    ),
    # H200 × 8, vLLM 0.20.0: requested ceil(150,109,945,856 × 0.92) = 138,101,150,188 B − weights 85,416,954,912 B
    # (79.55 GiB; recorded 79.74) − 6,311,040,942 B of other non-KV (torch peak 3.71 + non-torch 2.17 GiB) =
    # 46,373,154,334 B (43.19 GiB; recorded 41.24) -> 659,904 tokens (+7.11 %).
    _record(
        "vllm-record-deepseek-r1-0528-h200-tp8-0.20.0-vllm-memory-estimator.log",
        616_096,
        "vLLM 0.20.0 (record), DeepSeek-R1-0528 fp8, H200 × 8, TP8, util 0.92",
        "deepseek-r1",
        "v0.20.0",
        "h200",
        "H200",
        tp=8,
        ctx=163840,
        gap="the memory besides the weights at max-model-len 163,840 on 0.20: the record leaves 7.64 GiB where kvplan"
        " plans 5.88 GiB (torch peak 3.71 + non-torch 2.17), as for the 8,192-token runs of 0.18-0.19, which "
        "leave 6.09 GiB; the 1.55 GiB more of this run is in no term of kvplan's 0.9-0.20 row. What would close "
        "it: the 0.20 profile run read from its source",
        gap_band=(0.05, 0.09),
    ),
    # H200 × 8, vLLM 0.16.0: requested ceil(150,109,945,856 × 0.92) = 138,101,150,188 B − weights 86,952,919,584 B
    # (80.98 GiB; recorded 80.62) − 8,308,891,892 B of other non-KV (topk indices buffer 0.06 + physical topk 0.48 +
    # indexer prefill buffer 0.04 + torch peak 6.60 + non-torch 2.17 − DSA calibration 1.61 GiB) = 42,839,338,712 B
    # (39.90 GiB; recorded 42.19) -> 546,944 tokens (-5.43 %).
    _record(
        "vllm-record-deepseek-v3.2-h200-tp8-0.16.0-vllm-memory-estimator.log",
        578_368,
        "vLLM 0.16.0 (record), DeepSeek-V3.2 fp8, H200 × 8, TP8, util 0.92",
        "deepseek-v3.2",
        "v0.16.0",
        "h200",
        "H200",
        tp=8,
        ctx=8192,
        gap="the memory besides the weights in 0.16: the record leaves 5.81 GiB where kvplan plans 7.74 GiB (torch "
        "peak 6.60 + non-torch 2.17 ASSUMED at TP8 + DSA buffers 0.58 − the DSA calibration 1.61); the weights "
        "land within 0.5 %. What would close it: the 0.16 profile run read from its source",
        gap_band=(-0.07, -0.04),
    ),
    # H200 × 8, vLLM 0.18.0: requested ceil(150,109,945,856 × 0.92) = 138,101,150,188 B − weights 86,952,919,584 B
    # (80.98 GiB; recorded 80.76) − 5,199,966,452 B of other non-KV (topk indices buffer 0.06 + physical topk 0.48 +
    # indexer prefill buffer 0.04 + torch peak 3.71 + non-torch 2.17 − DSA calibration 1.61 GiB) = 45,948,264,152 B
    # (42.79 GiB; recorded 41.76) -> 586,624 tokens (+2.47 %).
    _record(
        "vllm-record-deepseek-v3.2-h200-tp8-0.18.0-vllm-memory-estimator.log",
        572_480,
        "vLLM 0.18.0 (record), DeepSeek-V3.2 fp8, H200 × 8, TP8, util 0.92",
        "deepseek-v3.2",
        "v0.18.0",
        "h200",
        "H200",
        tp=8,
        ctx=8192,
        gap="the memory besides the weights in 0.18, the other way: the record leaves 6.10 GiB where kvplan plans "
        "4.84 GiB, the DSA calibration (−1.61 GiB, fitted to GLM-5.3's recipe point) taking off more than this "
        "DeepSeek-V3.2 run frees; the weights land within 0.3 %. What would close it: the DSA calibration fitted "
        "per model, not on one point",
        gap_band=(0.02, 0.04),
    ),
    # H200 × 4, vLLM 0.11.2: requested ceil(150,109,945,856 × 0.92) = 138,101,150,188 B − weights 117,632,424,960 B
    # (109.55 GiB; recorded 109.6068) − 9,433,335,726 B of other non-KV (torch peak 6.62 + non-torch 2.17 GiB) =
    # 11,035,389,502 B (10.28 GiB; recorded 12.73) -> 229,280 tokens (-19.29 %).
    _record(
        "vllm-record-qwen3-235b-a22b-2507-h200-tp4-0.11.2-vllm-memory-estimator.log",
        284_080,
        "vLLM 0.11.2 (record), Qwen3-235B-A22B-Instruct-2507 bf16, H200 × 4, TP4, util 0.92",
        "qwen3-235b-a22b",
        "v0.11.2",
        "h200",
        "H200",
        tp=4,
        ctx=8192,
        gap="the memory besides the weights on a tight budget: the record leaves 6.28 GiB for the profile peak and "
        "non-torch growth where kvplan plans 8.79 GiB (torch peak 6.62: a 5.58 GiB sampler over 1,024 x 151,936 "
        "logits + a 1.00 GiB MoE workspace; non-torch 2.17), and 2.5 GiB is 19 % of a 12.7 GiB budget; the "
        "weights land within 0.05 %, and the MI300X TP4 record of the same model and release lands +0.25 %. What "
        "would close it: the 0.11 profile run read from its source",
        gap_band=(-0.22, -0.16),
    ),
)
