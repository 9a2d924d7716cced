"""HOW a model is served: GPU, engine, parallel layout and memory/scheduler knobs (pure data).

A knob left as ``None`` takes the engine's own default, computed the way the engine computes it;
the engine module records which knobs were defaulted and why.
"""

from __future__ import annotations

from dataclasses import fields

from kvplan import record

ENGINES = {"sglang": ("0.5.23", "0.5.9"), "vllm": ("0.33.0",)}
"""The versions whose source kvplan read; the first of each is the default. Any other version is accepted and
planned by the rules in force then (kvplan.versions: one table per engine, keyed by version ranges)."""

MODEL_DTYPES = ("auto", "half", "float16", "bfloat16", "float", "float32")
"""--dtype of both engines (vLLM ``ModelDType``, SGLang ``--dtype`` choices): what ``kv_cache_dtype auto`` follows."""

AUTO_FIT = -1
"""``context_length`` (vLLM ``--max-model-len``) -1 or ``auto``: vLLM fits max_model_len to the KV cache memory."""

QUANTIZATIONS = ("fp8",)
"""--quantization values kvplan plans (vLLM's online fp8: kvplan.engines.online_quant)."""

KV_CACHE_DTYPES = ("auto", "bf16", "bfloat16", "fp16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_ds_mla")

ENGINE_KNOBS: dict[str, tuple[str, str]] = {
    # knob: (the one engine that reads it, what the other engine uses instead: a knob name, or why it has none)
    "mem_fraction_static": ("sglang", "gpu_memory_utilization"),
    "pre_load_free": ("sglang", "it budgets from the CUDA total × gpu_memory_utilization"),
    "runtime_overhead": ("sglang", "non_kv_other"),
    "chunked_prefill_size": ("sglang", "max_num_batched_tokens"),
    "cuda_graph_max_bs": ("sglang", "kvplan's vLLM plan takes its CUDA-graph memory from non_kv_other"),
    "speculative_eagle_topk": ("sglang", "its MTP drafts one chain of num_speculative_tokens, no top-k tree"),
    "swa_full_tokens_ratio": ("sglang", "its one block pool serves every KV cache group, no ratio"),
    "max_mamba_cache_size": ("sglang", "its one block pool holds the Mamba state blocks too"),
    "disable_radix_cache": ("sglang", "its prefix caching does not size the block pool"),
    "swa_eviction_interval": ("sglang", "it frees sliding-window blocks as the window passes"),
    "gpu_memory_utilization": ("vllm", "mem_fraction_static"),
    "quantization": ("vllm", "kvplan does not yet plan its online --quantization"),
    "kv_cache_memory": ("vllm", "it sizes the pool with mem_fraction_static, or caps it with max_total_tokens"),
    "non_kv_other": ("vllm", "runtime_overhead"),
    "max_num_batched_tokens": ("vllm", "chunked_prefill_size"),
    "async_scheduling": ("vllm", "its overlap scheduler does not size any pool by in-flight tokens"),
    "flashinfer_sampler": ("vllm", "its sampler's memory is inside the mem_fraction_static reserve"),
    "num_gpu_blocks_override": ("vllm", "max_total_tokens"),
    "disable_hybrid_kv_cache_manager": ("vllm", "its hybrid pools are separate pools, sized by swa_full_tokens_ratio"),
}
"""Deployment knobs only one engine reads (engines/sglang.py, engines/vllm.py); the other engine refuses them.
Every other knob is read by both."""


@record(kw_only=True)
class Gpu:
    key: str
    name: str
    nvml_total_bytes: int
    """memory.total as nvidia-smi / NVML report it (SGLang's heuristic reads this, in MiB)."""
    cuda_total_bytes: int
    """Total as cudaMemGetInfo / torch report it (NVML total less the driver reserve)."""
    sm: int
    """Compute capability major×10 + minor (90 = Hopper, 100 = Blackwell); 0 for non-CUDA."""
    vendor: str
    hbm_bandwidth_bytes_per_s: int
    source: str
    gfx: str = ""
    """AMD ISA (gfx942 = MI300X/MI308X/MI325X, gfx950 = MI355X); empty on NVIDIA, whose generation is ``sm``."""
    aliases: tuple[str, ...] = ()
    """Other spellings ``--set gpu=...`` accepts (the catalog's)."""
    derived: tuple[str, ...] = ()
    """Figures not read from a public nvidia-smi / amd-smi / torch output: ``nvml_total`` from the datasheet,
    ``cuda_total`` from kvplan's reserve rule (kvplan.models.gpus.DERIVED_CUDA_RESERVE_BYTES)."""
    nvlink: str = "full"
    """How a node's GPUs connect: 'full' (NVLink / NVSwitch or XGMI between every pair), 'pairs' (two-way NVLink
    bridges), 'none' (PCIe only). vLLM builds no custom all-reduce over more than two GPUs that are not fully
    connected (custom_all_reduce.py CustomAllreduce.__init__)."""

    @property
    def total_label(self) -> str:
        """How the total is named where it is printed: NVML on NVIDIA, amd-smi (ROCm SMI) on AMD."""
        return "GPU total (amd-smi)" if self.vendor == "amd" else "GPU total (NVML)"


@record(kw_only=True)
class Deployment:
    name: str
    source: str
    model: str
    engine: str
    engine_version: str
    gpu: Gpu
    gpus_per_node: int = 8
    nodes: int = 1
    tp: int = 1
    dp_attention: int = 1
    ep: int = 1
    pp: int = 1
    pp_layer_partition: tuple[int, ...] | None = None
    """Layers per pipeline stage (vLLM ``VLLM_PP_LAYER_PARTITION``, SGLang ``SGLANG_PP_LAYER_PARTITION``);
    None: the engine's ``get_pp_indices`` split."""
    dcp: int = 1
    kv_cache_dtype: str = "auto"
    mla_layout: str | None = None
    """Explicit MLA layout override (bf16 / fp8_ds_mla / fp8); wins over the engine's choice."""
    attention_backend: str | None = None
    """SGLang DSA backend (flashmla_kv, flashmla_sparse, fa3, trtllm, tilelang) or vLLM backend name."""
    mem_fraction_static: float | None = None
    gpu_memory_utilization: float | None = None
    kv_cache_memory: int | None = None
    weights_per_gpu: int | None = None
    pre_load_free: int | None = None
    runtime_overhead: int | None = None
    non_kv_other: int | None = None
    page_size: int | None = None
    chunked_prefill_size: int | None = None
    max_num_batched_tokens: int | None = None
    max_running_requests: int | None = None
    context_length: int | None = None
    max_total_tokens: int | None = None
    speculative_num_draft_tokens: int = 0
    speculative_eagle_topk: int | None = None
    cuda_graph_max_bs: int | None = None
    swa_full_tokens_ratio: float | None = None
    """SGLang --swa-full-tokens-ratio: SWA pool tokens / full pool tokens of a sliding-window hybrid (default 0.8)."""
    max_mamba_cache_size: int | None = None
    """SGLang --max-mamba-cache-size: state slots of a linear-attention hybrid (default: sized from the budget)."""
    disable_radix_cache: bool = False
    """SGLang --disable-radix-cache: no prefix cache; a sliding-window hybrid with --max-running-requests then sizes
    its SWA pool from the per-request cap (SWARequestCapPoolConfigurator), a Mamba hybrid keeps 1 state slot a
    request (``_calculate_mamba_ratio``)."""
    swa_eviction_interval: int | None = None
    """SGLang's SGLANG_SWA_EVICTION_INTERVAL (environment, default 128): tokens a request runs past its window
    before the SWA pool frees them."""
    dtype: str = "auto"
    """--dtype, which kv_cache_dtype auto follows: auto takes the config's torch_dtype, a float32 one downcast to
    2 bytes (vLLM ``_resolve_auto_dtype``: bf16; SGLang ``_get_and_verify_dtype``: fp16); only float32 is 4 bytes."""
    async_scheduling: bool | None = None
    """vLLM --async-scheduling / --no-async-scheduling (default on: vllm-project/vllm#27614)."""
    flashinfer_sampler: bool | None = None
    """vLLM V1's top-k/top-p sampler on FlashInfer (``VLLM_USE_FLASHINFER_SAMPLER``); None: the release's default
    (FlashInfer where installed before 0.11.1, vllm_profile.FLASHINFER_SAMPLER_UNTIL). False: an install without
    FlashInfer ('FlashInfer is not available. Falling back to the PyTorch-native implementation'), which sorts."""
    num_gpu_blocks_override: int | None = None
    """vLLM --num-gpu-blocks-override: num_blocks, whatever the memory (``may_override_num_blocks``)."""
    disable_hybrid_kv_cache_manager: bool = False
    """vLLM --disable-hybrid-kv-cache-manager: sliding-window layers cached as full attention, one group."""
    disable_cuda_graph: bool = False
    """SGLang --disable-cuda-graph, vLLM --enforce-eager (``enforce_eager`` is read as this knob): no CUDA-graph
    memory is reserved (SGLang's decode and prefill graph terms; vLLM's CUDA-graph estimate)."""
    rope_scaling: str | None = None
    """'yarn': the RoPE scaling the model card documents (kvplan.models.rope), passed as SGLang
    --json-model-override-args / vLLM --hf-overrides; kvplan.engines.context says what each engine derives."""
    quantization: str | None = None
    """vLLM --quantization: 'fp8' on a bf16 / fp16 checkpoint quantizes the linear weights at load
    (kvplan.engines.online_quant); the KV cache keeps the model dtype unless kv_cache_dtype is set."""
    allow_long_context: bool = False
    """SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 / VLLM_ALLOW_LONG_MAX_MODEL_LEN=1: a context_length above the
    one the engine derives starts (quality past the model's positions is not guaranteed)."""
    description: str = ""
    explicit: frozenset[str] = frozenset()
    """Knob names the preset or the user set (the rest are defaults)."""
    written_for: str = ""
    """The model the deployment file names (before any --set model=...): whom its model knobs were chosen for."""
    from_file: frozenset[str] = frozenset()
    """Knob names the file gave and --set did not change (kvplan.models.retarget reads them)."""
    carry: Carry | None = None
    """Set where the file was written for another model than the one planned: what it carries over."""
    defaulted: tuple[tuple[str, str, str], ...] = ()
    """(knob, value shown, why) for each deployment-level value kvplan chose because the file left it out
    (engine, version, GPU, GPU counts, tp); the engine's own defaults are on the plan's knobs."""

    @property
    def mtp(self) -> bool:
        return self.speculative_num_draft_tokens > 0

    @property
    def builtin(self) -> bool:
        """A preset shipped with kvplan (not the user's own file)."""
        return self.source.endswith("(built-in)")


@record(kw_only=True)
class Carry:
    """A deployment file written for one model, planned with another: which of its knobs apply.

    A built-in preset's MODEL_KNOBS are dropped (the engine's defaults for the planned model instead) and its
    hardware and layout knobs carried over; a user's own file applies whole, its model knobs said."""

    deployment: str
    written_for: str
    model: str
    dropped: tuple[tuple[str, object], ...] = ()
    """(knob, the file's value) not applied: the engine defaults it for the planned model."""
    carried: tuple[tuple[str, object], ...] = ()
    """(knob, value) the file gives that still apply to the planned model."""
    builtin: bool = True


@record(kw_only=True)
class Requirements:
    """What a service promises, checked by `kvplan gate` (from the config's `requirements:` or the CLI)."""

    min_ctx_tokens: int | None = None
    """The largest admitted context must be at least this."""
    concurrency: tuple[tuple[int, int], ...] = ()
    """(N, ctx): N requests of ctx tokens must be admitted at once."""
    max_capacity_drop_ppm: int | None = None
    """Largest allowed drop of pool capacity against the lock, in parts per million."""

    def merged(self, other: Requirements) -> Requirements:
        """These, with other's values where it sets them (the command line wins over the file)."""
        return Requirements(
            min_ctx_tokens=other.min_ctx_tokens if other.min_ctx_tokens is not None else self.min_ctx_tokens,
            concurrency=other.concurrency or self.concurrency,
            max_capacity_drop_ppm=(
                other.max_capacity_drop_ppm if other.max_capacity_drop_ppm is not None else self.max_capacity_drop_ppm
            ),
        )


KNOBS: tuple[str, ...] = tuple(
    f.name
    for f in fields(Deployment)
    if f.name not in ("name", "source", "explicit", "description", "defaulted", "written_for", "from_file", "carry")
)

MODEL_KNOBS: tuple[str, ...] = (
    "kv_cache_dtype", "mla_layout", "attention_backend", "page_size", "context_length", "max_total_tokens",
    "speculative_num_draft_tokens", "speculative_eagle_topk", "weights_per_gpu", "kv_cache_memory", "non_kv_other",
    "runtime_overhead", "swa_full_tokens_ratio", "max_mamba_cache_size", "pp_layer_partition", "rope_scaling",
    "num_gpu_blocks_override", "dtype",
)  # fmt: skip
"""Knobs a preset chooses for its own model: the KV layout and backend (an MLA/DSA choice means nothing to GQA),
the page size (SGLang's DSA backends need 64), the context (the model's positions), the MTP drafts, memory
measured with that model's weights and activations, and what counts that model's layers, blocks, dtype or
documented RoPE scaling. Planned with another --model they take the engine's default
for that model unless the user sets them. The rest (engine, GPU, GPU counts, parallel layout, memory fraction,
scheduler sizes) describe the hardware and the operator's choices, and carry over, said."""
