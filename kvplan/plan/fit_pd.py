"""Prefill and decode instances sized apart (`kvplan fit --pd`; pure): each side by the same search as
`fit` (kvplan.plan.fit), the hand-off by kvplan.plan.transfer, and the transport's GPU buffers beyond the pool
read from the engines' source."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from kvplan.engines.common import PoolPlan
from kvplan.errors import InputError
from kvplan.models.arch import ModelArch
from kvplan.models.deploy import Requirements
from kvplan.plan.fit import Fit, FitQuery, fit
from kvplan.plan.transfer import Transfer, transfer

# --------------------------------------------------------------------------- prefill / decode (--pd)


def pd_setting(engine: str, side: str, backend: str | None) -> str:
    """How each engine names a side and its transport (SGLang server args; vLLM's KVTransferConfig)."""
    name = PD_BACKENDS[backend or PD_DEFAULT_BACKEND[engine]][engine]
    if engine == "sglang":
        return f"--disaggregation-mode {side} --disaggregation-transfer-backend {name}"
    role = "kv_producer" if side == "prefill" else "kv_consumer"
    return f'--kv-transfer-config \'{{"kv_connector": "{name}", "kv_role": "{role}"}}\''


@dataclass(frozen=True, kw_only=True)
class PdFit:
    """Prefill and decode instances sized separately by the same search.

    The prefill instance must admit one request of the longest required context: it holds that request's KV
    (main and indexer rows, MTP draft rows) until the hand-off, and admit's workspace check covers the indexer
    logits at the full context. The decode instance must meet every requirement (ctx × concurrency, MTP).
    The hand-off is the prefill plan's pages of that request (kvplan.plan.transfer, unit 'page') at ``link``.
    The transfer backend's GPU buffers beyond the pool, per side: :func:`pd_staging`.
    """

    prefill: Fit
    decode: Fit
    longest_ctx: int
    link: str
    backend: str | None = None
    """The transport (``PD_BACKENDS``): SGLang ``--disaggregation-transfer-backend``, vLLM's ``kv_connector``;
    None: each engine's default (``PD_DEFAULT_BACKEND``)."""
    sglang_staging: bool = False
    """SGLang's ``SGLANG_DISAGG_STAGING_BUFFER=1`` (off by default)."""
    sla_think_s: float | None = None
    """With SLAs: the prefill side's clients' wait between requests, the decode side's time of one
    (kvplan.plan.fit_pd_sla); None without."""

    @property
    def staging(self) -> tuple[Staging, Staging] | None:
        """(prefill, decode): what each side's transport allocates on the GPU beyond the pool."""
        p, d = self.prefill.best, self.decode.best
        if p is None or d is None or p.plan is None or d.plan is None:
            return None
        return (
            pd_staging(p.plan, "prefill", self.backend, self.sglang_staging),
            pd_staging(d.plan, "decode", self.backend, self.sglang_staging),
        )

    @property
    def hand_off(self) -> Transfer | None:
        best = self.prefill.best
        if best is None or best.plan is None:
            return None
        return transfer(best.plan, self.longest_ctx, unit="page", link=self.link)

    @property
    def prefill_in_flight(self) -> int:
        """Requests of the longest context the prefill instance's memory holds at once."""
        best = self.prefill.best
        return best.checks[0].admission.max_concurrent if best is not None and best.checks else 0

    @property
    def binds(self) -> str | None:
        """The side that needs more GPUs (at equal GPUs: the one with less headroom)."""
        p, d = self.prefill.best, self.decode.best
        if p is None or d is None:
            return None
        return "decode" if (d.gpus, -d.headroom_ppm) >= (p.gpus, -p.headroom_ppm) else "prefill"


PdSides = Callable[[ModelArch, FitQuery, FitQuery, str], tuple[Fit, Fit, float | None]]
"""(arch, query, the prefill side's query, link) -> (prefill, decode, the prefill clients' think time)."""


def fit_pd(
    arch: ModelArch,
    q: FitQuery,
    link: str = "400Gbps",
    backend: str | None = None,
    sglang_staging: bool = False,
    sides: PdSides | None = None,
) -> PdFit:
    if backend is not None and backend not in PD_BACKENDS:
        raise InputError(f"--pd-backend {backend!r}: choose from {', '.join(PD_BACKENDS)}")
    if sglang_staging:
        if "sglang" not in q.engines:
            raise InputError("--pd-staging is SGLang's SGLANG_DISAGG_STAGING_BUFFER: search --engine sglang")
        if arch.is_mla:  # disaggregation/prefill.py and decode.py refuse it at startup (RuntimeError)
            raise InputError(f"SGLang refuses SGLANG_DISAGG_STAGING_BUFFER for {arch.name}: {SGLANG_STAGING_MLA}")
    req = q.requirements
    longest = max([c for _, c in req.concurrency] + [req.min_ctx_tokens or 0])
    prefill_q = replace(q, requirements=Requirements(min_ctx_tokens=longest), sla=None)
    if sides is not None:  # with SLAs, each side priced against its own (kvplan.plan.fit_pd_sla.pd_fits)
        prefill, decode, think = sides(arch, q, prefill_q, link)
    else:
        prefill, decode, think = fit(arch, prefill_q), fit(arch, q), None
    return PdFit(
        prefill=prefill, decode=decode, longest_ctx=longest, link=link, backend=backend,
        sglang_staging=sglang_staging, sla_think_s=think,
    )  # fmt: skip


# --------------------------------------------------------------------------- PD transport buffers (--pd)

PD_BACKENDS = {
    "mooncake": {"sglang": "mooncake", "vllm": "MooncakeConnector"},
    "nixl": {"sglang": "nixl", "vllm": "NixlConnector"},
}
"""--pd-backend: each engine's name for the transport (SGLang 0.5.23 ``--disaggregation-transfer-backend``,
default mooncake, srt/arg_groups/fields/disagg.py; vLLM 0.33.0 ``kv_transfer_config.kv_connector``)."""
PD_DEFAULT_BACKEND = {"sglang": "mooncake", "vllm": "nixl"}
"""SGLang's default; vLLM has none (``kv_connector`` must be set): NixlConnector, the one its PD docs use."""
SGLANG_QUEUE_SIZE = 4
"""SGLang 0.5.23 ``SGLANG_DISAGGREGATION_QUEUE_SIZE`` default (srt/environ.py): transfer queues, one staging
buffer each on a prefill server."""
SGLANG_STAGING_POOL_BYTES = 4096 * 1024 * 1024
"""SGLang 0.5.23 ``SGLANG_DISAGG_STAGING_POOL_SIZE_MB`` default 4096 (srt/environ.py), × 1024 × 1024
(common/staging_handler.py init_staging_allocator): the decode server's staging ring."""
SGLANG_STAGING_MLA = (
    "SGLANG_DISAGG_STAGING_BUFFER is designed for non-MLA models (e.g. GQA, MHA). MLA models should not set this flag."
)
"""SGLang 0.5.23's RuntimeError (disaggregation/prefill.py, disaggregation/decode.py)."""


@dataclass(frozen=True)
class Staging:
    """GPU bytes a PD side's transport allocates per rank beyond the KV pool, and where that comes from."""

    side: str
    bytes: int
    text: str


def pd_staging(plan: PoolPlan, side: str, backend: str | None, sglang_staging: bool = False) -> Staging:
    """What the engine's PD transport allocates on one GPU beyond the pool (read from the engines' source).

    SGLang 0.5.23, mooncake and nixl alike: the KV pool itself is registered for RDMA
    (``register_buffer_to_engine``: ``kv_data_ptrs`` and ``aux_data_ptrs``); the aux metadata buffers are CPU
    tensors (``disaggregation/utils.py`` ``MetadataBuffers``: device "cpu" unless Ascend or Mooncake's
    INTRA_NODE_NVLINK pool). Only ``SGLANG_DISAGG_STAGING_BUFFER=1`` (off by default; for heterogeneous TP,
    refused for MLA) allocates GPU staging, after the pool: a prefill server ``SGLANG_DISAGGREGATION_QUEUE_SIZE``
    (4) buffers of ``max(1, chunked_prefill_size // page) × Σ kv_item_lens`` bytes (``init_staging_buffers``;
    ``kv_item_lens`` is one page of each registered KV buffer, so Σ = page × the rank's bytes a token, draft
    layers included), a decode server one ring of ``SGLANG_DISAGG_STAGING_POOL_SIZE_MB`` (4096) MiB.

    vLLM 0.33.0: NixlConnector with ``kv_buffer_device`` "cuda" (the default: the platform's device) registers the
    KV cache tensors themselves (``nixl/base_worker.py`` ``register_kv_caches``: ``xfer_buffers = kv_caches``);
    with "cpu" it stages through pinned host buffers, not the GPU. MooncakeConnector registers the KV cache
    tensors (``batch_register_memory(kv_data_ptrs)``). No GPU buffer beyond the pool either way.
    """
    backend = backend or PD_DEFAULT_BACKEND[plan.engine]
    name = PD_BACKENDS[backend][plan.engine]
    ver = plan.engine_version
    if plan.engine == "vllm":
        how = (
            "the KV cache tensors themselves are registered with NIXL (nixl/base_worker.py register_kv_caches, "
            'kv_buffer_device "cuda", the default; "cpu" stages through host memory, not the GPU)'
            if backend == "nixl"
            else "the KV cache tensors themselves are registered (mooncake_connector.py batch_register_memory)"
        )
        return Staging(side, 0, f"no staging buffer beyond the pool: vLLM {ver}, {name}: {how}")
    if not sglang_staging:
        return Staging(
            side, 0,
            f"no staging buffer beyond the pool: SGLang {ver}, {name}: the KV pool itself is registered for RDMA "
            "(register_buffer_to_engine: kv_data_ptrs, aux_data_ptrs; the aux metadata buffers are on the CPU); "
            "SGLANG_DISAGG_STAGING_BUFFER is off",
        )  # fmt: skip
    reserve = next((x.bytes for x in plan.memory_map if x.label == "reserve"), 0)
    after = (
        f"allocated after the pool, out of the {reserve:,} B the plan keeps outside weights and pool (activations, "
        "CUDA graphs): kvplan does not shrink the pool for it"
    )
    if side == "decode":
        return Staging(
            side, SGLANG_STAGING_POOL_BYTES,
            f"SGLang {ver}, {name}, SGLANG_DISAGG_STAGING_BUFFER=1: one staging ring of "
            f"SGLANG_DISAGG_STAGING_POOL_SIZE_MB 4096 MiB (init_staging_allocator), {after}",
        )  # fmt: skip
    page = plan.page_tokens
    cps = plan.knob("chunked_prefill_size").as_int() or 8192
    if cps <= 0 or cps % page:
        raise InputError(
            f"SGLang refuses SGLANG_DISAGG_STAGING_BUFFER with chunked_prefill_size {cps}: it must be positive and "
            f"a multiple of page_size {page}"
        )
    per_token = plan.cell.main_bytes + plan.cell.draft_main_bytes
    pages = max(1, cps // page)
    each = pages * page * per_token
    return Staging(
        side, SGLANG_QUEUE_SIZE * each,
        f"SGLang {ver}, {name}, SGLANG_DISAGG_STAGING_BUFFER=1: SGLANG_DISAGGREGATION_QUEUE_SIZE {SGLANG_QUEUE_SIZE} "
        f"buffers × max(1, chunked_prefill_size {cps:,} // page {page}) = {pages:,} pages × {page} tokens × "
        f"{per_token:,} B a token (Σ kv_item_lens / page) = {SGLANG_QUEUE_SIZE} × {each:,} B (init_staging_buffers), "
        + after,
    )  # fmt: skip
