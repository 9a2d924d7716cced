"""DeepSeek-V4 (DeepseekV4ForCausalLM) on vLLM 0.33.0: five kinds of cache specs packed into one block id pool
(``models/deepseek_v4/``, ``v1/core/kv_cache_planning.py _get_packed_kv_cache_groups``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from kvplan.engines.common import Demand, Knob
from kvplan.engines.vllm_blocks import Group, HybridBlocks, approximate_gcd, max_in_flight_tokens, refuse
from kvplan.errors import PlanError
from kvplan.models.arch import ModelArch
from kvplan.models.cache import CompressedAttention, Layer
from kvplan.models.deploy import Deployment
from kvplan.units import cdiv
from kvplan.versions import parse_version

V4_SINCE = (0, 33, 0)
"""The one wheel whose DeepSeek-V4 code was read (vllm-0.33.0): its spec classes, block sizes and the packed
grouping below. Other versions are refused (one line) rather than planned with rules nobody read."""

V4_BLOCK = 256
"""``DeepseekV4IndexerBackend.get_supported_kernel_block_sizes`` -> [256] and ``DeepseekV4SparseMLABackend`` ->
[256] (``v1/attention/backends/mla/indexer.py``, ``models/deepseek_v4/sparse_mla.py``): the cache_config
block_size that ``Platform._preferred_block_size_for_backends`` settles on (16 is refused by the SWA backend's
``MultipleOf(32)``; the lcm candidates give 256)."""

V4_SWA_BLOCK = 64
"""``DeepseekV4SWACache.__init__``: ``block_size: int = 64`` (``v1/attention/backends/mla/sparse_swa.py``); the
attention layer does not pass one."""

V4_PAGE_ALIGNMENT = 576
"""fp8_ds_mla pages are padded to a multiple of 576 B (``alignment=576`` on every V4 spec;
``v1/kv_cache_interface.py _apply_alignment_padding``: page_size_padded = round_up(page, alignment))."""

V4_COMPRESSOR_STATE_BYTES = 4
"""``CompressorStateCache``: ``assert self.dtype == torch.float32`` (``models/deepseek_v4/compressor.py``)."""

V4_BACKEND = "FLASHMLA_SPARSE_DSV4"


def is_v4(arch: ModelArch) -> bool:
    """A DeepSeek-V4 model: its layers own ``CompressedAttention`` caches."""
    return any(layer.compressed is not None for layer in arch.layers)


def v4_layout(arch: ModelArch, dep: Deployment) -> tuple[str, list[Knob]]:
    """kv dtype and backend of DeepSeek-V4 on vLLM 0.33.0: (dtype, knobs).

    ``models/deepseek_v4/nvidia/model.py``: without an explicit backend SM12x takes FlashInfer, every other CUDA
    arch ``DeepseekV4FlashMLAAttention`` (backend FLASHMLA_SPARSE_DSV4, ``use_fp8_ds_mla_layout = True``);
    ``attention.py _resolve_dsv4_kv_cache_dtype`` turns 'auto' / 'fp8*' into fp8_ds_mla ("Using DeepSeek's
    fp8_ds_mla KV cache format.") and refuses anything else with the error below.
    """
    gpu = dep.gpu
    if parse_version(dep.engine_version) < V4_SINCE:
        raise refuse(arch, dep, "DeepSeek-V4 compressed-attention layers before vLLM 0.33.0 (only that wheel read)")
    if gpu.vendor != "nvidia" or gpu.sm // 10 not in (9, 10):
        raise refuse(arch, dep, f"DeepSeek-V4 off the FlashMLA path (SM{gpu.sm}: only SM90 / SM10x planned)")
    if dep.attention_backend and dep.attention_backend != V4_BACKEND:
        raise refuse(arch, dep, f"DeepSeek-V4 with attention backend {dep.attention_backend}")
    if dep.mla_layout:
        raise PlanError("mla_layout applies to MLA models only: DeepSeek-V4 keeps vLLM's fp8_ds_mla 584 B entries")
    dtype = dep.kv_cache_dtype
    if not (dtype == "auto" or dtype.startswith("fp8")):
        raise PlanError(
            f"vLLM refuses it: DeepseekV4 fp8_ds_mla layout only supports fp8 kv-cache, got {dtype}. Please set "
            "`--kv-cache-dtype fp8` or select a backend that supports bfloat16 KV cache."
        )
    why = "set" if dtype == "fp8_ds_mla" else f"default: {dtype} -> fp8_ds_mla (_resolve_dsv4_kv_cache_dtype)"
    knobs = [
        Knob("kv_cache_dtype", "fp8_ds_mla", why),
        Knob("attention_backend", V4_BACKEND, "set" if dep.attention_backend else f"default: SM{gpu.sm} FlashMLA"),
    ]
    return "fp8_ds_mla", knobs


SpecBase = Literal["full", "window"]
"""A V4 spec's grouping family: ``MLAAttentionSpec`` kinds register as full attention, ``SlidingWindowMLASpec``
kinds as windows."""


@dataclass(frozen=True)
class V4Spec:
    """One layer's KV cache spec as vLLM 0.33.0 builds it for DeepSeek-V4 (fp8_ds_mla, FlashMLA path).

    ``base`` is the spec's grouping family (``UniformTypeKVCacheSpecs.is_uniform_type``): 'full' for the
    ``MLAAttentionSpec`` kinds (registered with base ``FullAttentionSpec``), 'window' for the
    ``SlidingWindowMLASpec`` kinds (uniform only with the same ``sliding_window``); and the block size must match.
    """

    layer: str
    kind: str
    base: SpecBase
    block: int
    window: int
    page: int

    @property
    def bucket_key(self) -> tuple[str, int, int]:
        return (self.base, self.block, self.window)


def _pad(n: int) -> int:
    return cdiv(n, V4_PAGE_ALIGNMENT) * V4_PAGE_ALIGNMENT


def _compressed(layer: Layer) -> CompressedAttention:
    att = layer.compressed
    if att is None:  # every DeepSeek-V4 layer owns one (kvplan.models.hybrid reads compress_ratios so)
        raise ValueError(f"layer {layer.index} has no compressed attention")
    return att


def v4_specs(arch: ModelArch, mtp_layers: int = 0) -> tuple[V4Spec, ...]:
    """Every layer's specs, in vLLM's layer order (``get_kv_cache_spec`` of each cache module):

    - ``DeepseekV4SWACache`` (every layer): SlidingWindowMLASpec, block 64, window ``sliding_window``,
      page pad(64 × 584) = 37,440 B;
    - ``DeepseekV4MLAAttention.get_kv_cache_spec`` (ratio > 1): MLAAttentionSpec, block 256,
      ``tokens_per_state`` = ratio, page pad(256 // ratio × 584): C4 37,440 B, C128 pad(1,168) = 1,728 B;
    - ``CompressorStateCache`` (ratio > 1, ``compressor.py``): SlidingWindowMLASpec, fp32 state of
      2 × coff × head_dim (coff = 2 for C4, 1 for C128), block 4 (C4) / 8 (C128), window coff × ratio (8 / 128):
      page pad(4 × 2,048 × 4) = pad(8 × 1,024 × 4) = 32,832 B;
    - ``DeepseekV4IndexerCache`` (C4): MLAAttentionSpec, 132 B (128 fp8 + fp32 scale), block 256,
      ``tokens_per_state`` 4: page pad(64 × 132) = 8,640 B; and its compressor's ``CompressorStateCache``
      (index_head_dim 128, coff 2): block 4, window 8, page pad(4 × 512 × 4) = 8,640 B;
    - with speculative decoding (MTP), each MTP layer (``nvidia/mtp.py``: a DeepseekV4DecoderLayer at layer_id
      num_hidden_layers + k) has compress_ratio 1 (``attention.py``: "MTP layer is not included in the compress
      ratio list"): its ``DeepseekV4SWACache`` only, after the target's layers.
    """
    out: list[V4Spec] = []
    for layer in arch.layers:
        att = _compressed(layer)
        r, entry, i = att.compress_ratio, att.entry_bytes, layer.index
        out.append(V4Spec(f"{i}.swa", f"window {att.window}", "window", V4_SWA_BLOCK, att.window, _pad(64 * entry)))
        if r > 1:
            coff = 2 if r == 4 else 1
            out.append(V4Spec(f"{i}.c{r}", f"C{r} compressed", "full", V4_BLOCK, 0, _pad(V4_BLOCK // r * entry)))
            sblock = 4 if r == 4 else 8
            state = sblock * 2 * coff * att.head_dim * V4_COMPRESSOR_STATE_BYTES
            out.append(V4Spec(f"{i}.c{r}state", f"C{r} compressor state", "window", sblock, coff * r, _pad(state)))
        idx = layer.indexer
        if idx is not None:
            key = idx.bytes_per_state  # 132
            out.append(
                V4Spec(f"{i}.idx", "C4 indexer K", "full", V4_BLOCK, 0, _pad(V4_BLOCK // idx.compress_ratio * key))
            )
            state = 4 * 2 * 2 * idx.index_head_dim * V4_COMPRESSOR_STATE_BYTES
            out.append(V4Spec(f"{i}.idxstate", "C4 indexer compressor state", "window", 4, 8, _pad(state)))
    if mtp_layers:
        att = _compressed(arch.layers[-1])
        for k in range(mtp_layers):
            i = arch.num_layers + k
            out.append(V4Spec(f"{i}.swa", f"window {att.window}", "window", V4_SWA_BLOCK, att.window,
                              _pad(64 * att.entry_bytes)))  # fmt: skip
    return tuple(out)


def pack_v4_groups(specs: tuple[V4Spec, ...]) -> tuple[tuple[V4Spec, ...], ...]:
    """``kv_cache_planning._get_packed_kv_cache_groups`` (the block-outermost layout DeepSeek-V4 resolves to:
    ``DeepseekV4IndexerBackend.supported_kv_cache_layouts`` = BLHNC, BLNHC): greedy buckets of uniform-type
    specs; a bucket with one layer per page size per repeat is 'balanced' and split into groups of
    ``repeats_per_group`` pattern repeats (``_approximate_gcd`` over the balanced buckets' largest page-size
    counts, at least the largest mixed balanced bucket's); an unbalanced bucket stays one group. No Mamba or
    ring bucket exists here, and with a repeat count the window buckets are not 'state' buckets.
    """
    buckets: list[list[V4Spec]] = []
    for s in specs:
        for b in buckets:
            if b[0].bucket_key == s.bucket_key:
                b.append(s)
                break
        else:
            buckets.append([s])
    info = []
    for b in buckets:
        by_page: dict[int, list[V4Spec]] = {}
        for s in b:
            by_page.setdefault(s.page, []).append(s)
        balanced = len({len(v) for v in by_page.values()}) == 1
        info.append((b, by_page, balanced, max(len(v) for v in by_page.values())))
    floor = max((most for _, by_page, bal, most in info if bal and len(by_page) > 1), default=0)
    repeats = approximate_gcd([most for _, _, bal, most in info if bal], floor) if floor else None
    if repeats is None:
        return ()  # the state-bucket split (_get_packed_kv_cache_groups' anchor) is not modelled: refused
    groups: list[tuple[V4Spec, ...]] = []
    for b, by_page, balanced, most in info:
        n = cdiv(most, repeats) if balanced else 1
        if n == 1:
            groups.append(tuple(b))
            continue
        pattern = list(zip(*by_page.values(), strict=True))
        for i in range(n):
            groups.append(tuple(s for rep in pattern[i::n] for s in rep))
    return tuple(groups)


def plan_v4(arch: ModelArch, dep: Deployment, block_knob: Knob, mnbt: int, max_model_len: int) -> HybridBlocks:
    """DeepSeek-V4: the packed groups, their bytes per block id, and what one request takes of each group."""
    if not block_knob.defaulted and block_knob.as_int() != V4_BLOCK:
        raise PlanError(
            f"block_size {block_knob.as_int()}: vLLM's DEEPSEEK_V4_INDEXER and FLASHMLA_SPARSE_DSV4 backends take "
            f"kernel block size {V4_BLOCK} only (get_supported_kernel_block_sizes)"
        )
    block_knob = Knob(
        "page_size",
        V4_BLOCK,
        block_knob.origin if not block_knob.defaulted else "default: the DeepSeek-V4 backends take 256 only",
    )
    spec = dep.speculative_num_draft_tokens
    specs = v4_specs(arch, arch.num_mtp_layers if spec else 0)
    groups = pack_v4_groups(specs)
    if not groups:
        raise refuse(arch, dep, "DeepSeek-V4 layers without a C4 / C128 repeat pattern")
    in_flight = max_in_flight_tokens(dep, mnbt)
    out: list[Group] = []
    for g in groups:
        first = g[0]
        kinds: dict[str, int] = {}
        for s in g:
            kinds[s.kind] = kinds.get(s.kind, 0) + 1
        label = " + ".join(f"{n} {k}" for k, n in kinds.items())
        if first.base == "full":  # FullAttentionSpec.max_memory_usage_bytes: cdiv(max_model_len, block) pages
            d = Demand(label, "token", page_tokens=first.block)
        else:  # SlidingWindowSpec.max_admission_blocks_per_request
            held = min(first.window - 1 + in_flight, max_model_len)
            d = Demand(label, "window", window=held, extra=1, page_tokens=first.block)
        out.append(Group(label, len(g), 1, d))
    block_bytes = max(sum(s.page for s in g) for g in groups)
    widest = max(groups, key=lambda g: sum(s.page for s in g))
    notes = _notes(arch, specs, groups, block_bytes, len(widest), in_flight, spec)
    return HybridBlocks(
        block=V4_BLOCK,
        block_knob=block_knob,
        page_bytes=block_bytes,
        attn_bytes_per_token=0,
        state_bytes=0,
        group_size=1,
        groups=tuple(out),
        mamba_cache_mode="none",
        notes=notes,
        packed_bytes_per_block=block_bytes,
        group_layers=len(widest),
    )


def _notes(
    arch: ModelArch,
    specs: tuple[V4Spec, ...],
    groups: tuple[tuple[V4Spec, ...], ...],
    block_bytes: int,
    widest_layers: int,
    in_flight: int,
    spec: int,
) -> tuple[str, ...]:
    pages = sorted({(s.kind, s.block, s.page) for s in specs})
    notes = [
        f"vLLM DeepSeek-V4 (0.33.0, fp8_ds_mla, block-outermost BLHNC layout): {len(specs)} cache specs in "
        f"{len(groups)} KV cache groups packed into one block id pool (_get_packed_kv_cache_groups); one block id = "
        f"the widest group's pages = {block_bytes:,} B ({widest_layers} layers' pages)",
        "vLLM DeepSeek-V4 pages (block tokens, bytes after the 576 B padding): "
        + "; ".join(f"{k} {b} tokens {p:,} B" for k, b, p in pages),
        f"vLLM sizes every window group (SWA and compressor states) for window - 1 + in-flight tokens "
        f"({in_flight:,}: max_in_flight_tokens, ASSUMPTION: async scheduling on the V1 runner) + 1 block "
        "(SlidingWindowSpec.max_admission_blocks_per_request): the compressor states, 4- and 8-token blocks, "
        "dominate a request's blocks; a running request holds far fewer once its prefill is done",
        "ASSUMPTION: every V4 spec's block stride alignment resolves to 1 (the backends' kernel block sizes equal "
        "the spec blocks), so bytes per block is not rounded further; of DeepSeek-V4's own non-KV memory the "
        "top-k and MTP hidden buffers and the prefill gather workspace are counted (vllm_dsv4_memory), its rope "
        "caches and the attention's forward activations are not",
        "vLLM prefix reuse on DeepSeek-V4: kvplan does not model which groups a hit can reuse (windows and "
        "compressor states are prefix-cacheable window groups in 0.33.0)",
    ]
    if spec:
        notes.append(
            f"speculative decoding (MTP, num_speculative_tokens {spec}): the {arch.num_mtp_layers} MTP layer's window "
            "cache joins the window groups (compress_ratio 1: no compressed or compressor-state spec); a measured "
            "weights point is used as is (ASSUMPTION: whether its run loaded the MTP layer is not known; an "
            "estimate adds the MTP group)"
        )
    return tuple(notes)
