"""The result both engines return: a pool plan, with the chain of memory terms that produced it."""

from __future__ import annotations

from dataclasses import field
from typing import Literal

from kvplan import record
from kvplan.errors import PlanError
from kvplan.models import mxfp4_moe
from kvplan.models.arch import ModelArch, PipelineStage, Split
from kvplan.models.deploy import Deployment
from kvplan.models.formats import MlaLayout
from kvplan.models.pipeline import stage_weights
from kvplan.units import MiB, cdiv, gib


@record
class Knob:
    """A resolved deployment knob and where its value came from."""

    name: str
    value: object
    origin: str
    """'set' (preset, file or --set) or 'default: <how the engine computed it>'."""

    @property
    def defaulted(self) -> bool:
        return self.origin != "set"

    def as_int(self) -> int:
        if isinstance(self.value, bool) or not isinstance(self.value, int):
            raise TypeError(f"knob {self.name} is not an integer: {self.value!r}")
        return self.value

    def as_float(self) -> float:
        if isinstance(self.value, bool) or not isinstance(self.value, int | float):
            raise TypeError(f"knob {self.name} is not a number: {self.value!r}")
        return float(self.value)


def given(dep: Deployment, name: str, value: object, default: str) -> Knob:
    """A knob the engine takes as given: 'set' where the deployment file or --set gives it, else its default."""
    return Knob(name, value, "set" if name in dep.explicit else f"default: {default}")


@record
class Term:
    """One step of the memory chain of one GPU."""

    label: str
    bytes: int | None
    detail: str = ""


@record
class Segment:
    """One part of the memory map of one GPU; the segments add up to the GPU's NVML total."""

    label: str
    bytes: int


@record(kw_only=True)
class Cell:
    """Bytes of one per-rank pool row (one token at dcp 1), by cache."""

    main_bytes: int
    indexer_bytes: int
    draft_main_bytes: int = 0
    draft_indexer_bytes: int = 0

    @property
    def total_bytes(self) -> int:
        return self.main_bytes + self.indexer_bytes + self.draft_main_bytes + self.draft_indexer_bytes

    @property
    def main_only_bytes(self) -> int:
        """What a plan that counted the main MLA KV only would charge per row."""
        return self.main_bytes + self.draft_main_bytes


DemandPer = Literal["token", "window", "request"]


@record
class Demand:
    """What ONE request costs in a pool, for one cache kind (one vLLM KV cache group, one SGLang pool's kind).

    - ``per='token'``: ``units`` × ceil(tokens / page_tokens) pages (full attention, MLA, the DSA indexer);
    - ``per='window'``: ``units`` × (ceil(min(tokens, window) / page_tokens) + ``extra``) pages: a sliding window
      holds at most ``window`` tokens, plus the pages an engine adds because a window need not start at a page
      boundary (vLLM ``SlidingWindowSpec.max_memory_usage_bytes``: one);
    - ``per='request'``: ``units`` units whatever the length (Mamba / linear-attention state slots or blocks).

    ``units`` multiplies: vLLM puts equal-sized groups of layers in one group each, so a model with three
    linear-attention groups costs three blocks a request in its one shared pool.
    """

    kind: str
    per: DemandPer
    window: int = 0
    units: int = 1
    extra: int = 0
    """Pages a window adds beyond ceil(min(tokens, window) / page) (per='window' only)."""
    page_tokens: int = 0
    """Tokens of this kind's own page when it differs from the pool's (0: the pool's): vLLM's DeepSeek-V4 groups
    share one block id pool with blocks of 256, 64, 8 and 4 tokens (kvplan/engines/vllm_hybrid.py)."""

    def need(self, tokens: int, page_tokens: int) -> int:
        """Units one request of ``tokens`` tokens takes for this kind.

        >>> Demand("full", "token").need(129, 64), Demand("swa", "window", window=128, extra=1).need(10_000, 64)
        (3, 3)
        """
        tokens = max(tokens, 0)
        page_tokens = self.page_tokens or page_tokens
        if self.per == "request":
            return self.units
        if self.per == "window":
            return self.units * (cdiv(min(tokens, self.window), page_tokens) + self.extra)
        return self.units * cdiv(tokens, page_tokens)


@record
class Pool:
    """One pool an engine sizes on each GPU, and what one request takes from it.

    ``unit``: 'page' (tokens × layers of one page), 'block' (vLLM's hybrid block: one page of every group) or
    'slot' (one request's state); ``capacity``: units a request can get on one rank (vLLM: the null block
    excluded); ``unit_bytes``: bytes one unit takes on one rank; ``page_tokens``: tokens of one request a page
    holds (64 × dcp for DSA; for a 'slot' pool, 1).
    """

    name: str
    unit: str
    page_tokens: int
    capacity: int
    unit_bytes: int
    demands: tuple[Demand, ...]

    def need(self, tokens: int) -> int:
        """Units one request of ``tokens`` takes from this pool: the sum over its demands."""
        return sum(d.need(tokens, self.page_tokens) for d in self.demands)

    def fits(self, tokens: int) -> int:
        """Requests of ``tokens`` tokens the pool holds at once: capacity // need (0 when one does not fit)."""
        need = self.need(tokens)
        return self.capacity // need if need else 0

    @property
    def bytes(self) -> int:
        return self.capacity * self.unit_bytes


@record(kw_only=True)
class StagePool:
    """One pipeline stage's own pool on each of its GPUs, before the engine cuts every stage to the smallest."""

    stage: PipelineStage
    weights_bytes: int
    cell_bytes: int
    """Bytes of one pool row on this stage: its own layers only."""
    main_layers: int
    indexer_layers: int
    available_bytes: int
    rows: int
    logged_tokens: int
    startup_error: str | None
    binding: bool


@record
class StartupRefusal:
    """A start refused because one request of max_model_len does not fit the KV cache, as figures (vLLM's
    ``check_enough_kv_cache_memory``; V0's max seq len check, which compares tokens: no bytes) beside its text."""

    text: str
    max_model_len: int
    needed_bytes: int | None
    available_bytes: int | None


@record(kw_only=True)
class PoolPlan:
    """How one engine turns a deployment into a KV pool on each GPU."""

    engine: str
    engine_version: str
    arch: ModelArch
    deployment: Deployment
    knobs: tuple[Knob, ...]
    mla_layout: MlaLayout | None
    """The MLA row layout; None for a full-attention (MHA / GQA / MQA) model."""
    mla_bytes_per_layer: int
    """Main KV bytes of one token in one layer on one rank (MLA row, or K + V of the kv heads per rank)."""
    main_layers: int
    indexer_bytes_per_layer: int
    indexer_layers: int
    indexer_rule: str
    draft_layers: int
    dcp: int
    cell: Cell
    page_tokens: int
    """Rows of one page on one rank (64 for DSA)."""
    chain: tuple[Term, ...]
    available_bytes: int
    """The engine's KV budget on one GPU."""
    rows: int
    """Pool rows per rank: SGLang's `#tokens`, vLLM's num_blocks × block_size."""
    usable_pages: int
    """Pages a request can get: SGLang all pages, vLLM all blocks but the null block."""
    logged_tokens: int
    """The capacity the engine logs: SGLang `max_total_num_tokens` (rows × dcp); vLLM num_blocks × 64 × dcp."""
    context_len: int
    max_running_requests: int
    allocated_bytes: int
    """Bytes the pool tensors really take on one GPU (padding rows and pages included)."""
    memory_map: tuple[Segment, ...]
    startup_error: str | None = None
    startup_refusal: StartupRefusal | None = None
    """The max-seq-len refusal as figures when it is ``startup_error`` (None for any other error)."""
    loads_weights: bool = True
    """False when the weights do not fit in the memory free before loading: the chain past the weights is
    notional, the pool empty (kvplan.engines.common.check_gpu_memory)."""
    notes: tuple[str, ...] = ()
    extras: dict[str, int] = field(default_factory=dict)
    kv_dtype: str = ""
    """The resolved KV cache dtype (full attention: what sets the element size)."""
    attn_tp: int = 1
    """Attention tensor-parallel ranks (tp / dp_attention): how the kv heads are split."""
    pools: tuple[Pool, ...] = ()
    """The pools of a hybrid model; empty for a uniform model, whose rows / pages ARE its one pool.

    vLLM: ONE Pool (the shared block pool) with one Demand per KV cache group; SGLang: several (the full-attention
    token pool, the SWA pool, the Mamba state pool). For a hybrid, ``rows`` / ``usable_pages`` / ``logged_tokens``
    keep what the engine logs (each engine's docstring says how)."""
    stages: tuple[StagePool, ...] = ()
    """Under pipeline parallelism, every stage's own pool (kvplan.engines.pipeline); this plan is the binding
    stage's. Empty at pp 1."""

    @property
    def main_bytes_per_layer(self) -> int:
        return self.mla_bytes_per_layer

    @property
    def model_cell_bytes(self) -> int:
        """One token's row over every pipeline stage (the cell at pp 1): what a whole-model figure multiplies."""
        return sum(s.cell_bytes for s in self.stages) if self.stages else self.cell.total_bytes

    @property
    def model_main_layers(self) -> int:
        return sum(s.main_layers for s in self.stages) if self.stages else self.main_layers

    @property
    def model_indexer_layers(self) -> int:
        return sum(s.indexer_layers for s in self.stages) if self.stages else self.indexer_layers

    @property
    def kv_format(self) -> str:
        """The main cache's format as printed: the MLA layout ('bf16', 'fp8_ds_mla', 'fp8') or the kv dtype."""
        if self.mla_layout is not None:
            return self.mla_layout.value
        return {"bfloat16": "bf16", "float16": "fp16", "auto": "bf16"}.get(self.kv_dtype, self.kv_dtype)

    @property
    def is_fp8(self) -> bool:
        return self.kv_format.startswith("fp8")

    @property
    def logical_page_tokens(self) -> int:
        """Tokens of one request that one page holds across the dcp ranks (64 × dcp)."""
        return self.page_tokens * self.dcp

    @property
    def usable_tokens(self) -> int:
        return self.usable_pages * self.logical_page_tokens

    def pages_for(self, tokens: int) -> int:
        return cdiv(tokens, self.logical_page_tokens)

    @property
    def hybrid_pools(self) -> tuple[Pool, ...]:
        """``pools``, or the one pool a uniform plan implies: ``usable_pages`` pages of ``logical_page_tokens``
        tokens, a request taking ceil(tokens / page) of them."""
        if self.pools:
            return self.pools
        return (
            Pool(
                name="KV",
                unit="page",
                page_tokens=self.logical_page_tokens,
                capacity=self.usable_pages,
                unit_bytes=self.cell.total_bytes * self.page_tokens,
                demands=(Demand(self.arch_kind_label, "token"),),
            ),
        )

    @property
    def arch_kind_label(self) -> str:
        return "MLA" if self.mla_layout is not None else "full attention"

    def knob(self, name: str) -> Knob:
        for k in self.knobs:
            if k.name == name:
                return k
        raise KeyError(name)

    @property
    def semantics(self) -> str:
        return f"{'SGLang' if self.engine == 'sglang' else 'vLLM'} {self.engine_version}"


def memory_map(
    *, nvml_total: int, outside: tuple[str, int], weights: int, main: int, indexer: int, draft: int, available: int
) -> tuple[Segment, ...]:
    """weights | main KV | indexer | draft | reserve | free | outside-the-engine; adds up to the NVML total.

    ``free`` is the part of the KV budget the page-aligned pool leaves unused; ``reserve`` is everything
    else the engine keeps out of the pool (SGLang's slack, vLLM's non-KV memory and 1 − utilization).
    """
    unused = max(available - main - indexer - draft, 0)
    weights = max(min(weights, nvml_total - outside[1]), 0)  # weights that do not load fill the GPU, no more
    reserve = nvml_total - outside[1] - weights - main - indexer - draft - unused
    return (
        Segment("weights", weights),
        Segment("main KV", main),
        Segment("indexer", indexer),
        Segment("draft", draft),
        Segment("reserve", reserve),
        Segment("free", unused),
        Segment(*outside),
    )


def resolve(dep: Deployment, name: str, default: object, why: str) -> Knob:
    """A knob's value: the deployment's when set, else the engine default with its reason."""
    value = getattr(dep, name)
    if value is not None:
        return Knob(name, value, "set")
    return Knob(name, default, f"default: {why}")


def weight_split(dep: Deployment) -> Split:
    """The effective split of the weights on one GPU of the deployment."""
    return Split.of(tp=dep.tp, dp_attention=dep.dp_attention, ep=dep.ep, pp=dep.pp)


def weights_knob(arch: ModelArch, dep: Deployment, *, with_mtp: bool) -> Knob:
    """Weights per GPU: the deployment's, else a measured point of the same effective split, else the estimate.

    Measured points match on the split (attention tp / dp, experts max(tp, ep), pp), not on the knobs:
    ``ep=8`` on TP8 or any ``dcp`` keeps TP8's measured figure.
    """
    stage = arch.pp_stage
    if dep.weights_per_gpu is not None:
        return Knob("weights_per_gpu", dep.weights_per_gpu, "set")
    split = weight_split(dep)
    point = arch.measured_weights_for(split)
    if point is not None:
        return Knob("weights_per_gpu", point.bytes, f"default: measured ({split}), {point.source}")
    backend = mxfp4_moe.backend_for(dep.engine, dep.gpu)
    est = stage_weights(arch, split, engine=dep.engine, with_mtp=with_mtp, moe_backend=backend)
    how = f"; {arch.weights_said}" if arch.weights_said else ""
    if note := mxfp4_moe.layout_note(arch.param_groups, dep.engine, backend):
        how += f"; {note}"
    if stage is not None:
        how = f"; {stage}{how}"
    assumed = "".join(f"; ASSUMPTION: {a}" for a in arch.weights_assumptions)
    return Knob(
        "weights_per_gpu",
        est,
        f"default: estimated from {arch.total_params:,} parameters split {split}{how}{assumed}",
    )


def does_not_start(why: str) -> PlanError:
    """The error for figures no engine arithmetic can run on (a GPU under 1 MiB): exit 2."""
    return PlanError(f"the engine does not start: {why}")


def check_gpu_memory(dep: Deployment, *, weights: int, free_before_load: int, free_label: str) -> str | None:
    """Why the engine cannot load the weights (its startup error), or None; nonsense figures raise.

    - a GPU under 1 MiB (SGLang's heuristic reads the total in MiB and divides by it): PlanError, exit 2 (the
      loader refuses GPUs under 1 GiB; a plan built past the loader still never divides by zero);
    - no memory free before loading (``runtime_overhead`` of the whole GPU; a ``pre_load_free`` above the GPU's
      total is refused where the deployment is loaded, kvplan.models.deployment): the engine does not start;
    - weights that do not fit in the memory free before loading: the engine runs out of memory loading them.

    The last two are a verdict about a valid deployment (GLM-5.3's 94.46 GiB a GPU at TP8 on an 80 GB H100), not
    bad input: the plan carries the reason as ``startup_error`` and an empty pool, and admit / gate report it
    (exit 1).
    """
    gpu = dep.gpu
    if gpu.nvml_total_bytes < MiB or gpu.cuda_total_bytes < MiB:
        raise does_not_start(
            f"GPU {gpu.name!r} has {gpu.nvml_total_bytes:,} B (NVML) / {gpu.cuda_total_bytes:,} B (CUDA), under 1 MiB"
        )
    if free_before_load <= 0:
        return f"{free_label} is {free_before_load:,} B: nothing is left to load the weights into"
    if weights > free_before_load:
        return (
            f"weights {gib(weights, 'engine_exact')} > {gib(free_before_load, 'engine_exact')} {free_label} "
            f"on one {gpu.name}: loading them runs out of memory"
        )
    return None
