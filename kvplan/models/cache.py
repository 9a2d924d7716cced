"""Cache kinds: what each layer of a model keeps per token, and how many bytes that takes (pure data).

A model is its layers; each layer owns caches of known kinds, the way vLLM's ``v1/kv_cache_interface.py``
names ``FullAttentionSpec``, ``MLAAttentionSpec``, ``SlidingWindowSpec`` and ``MambaSpec``. Each kind answers
its own size questions; engines map kinds to their pools (docs/engines.md). A new attention family (sliding
window, Mamba state, compressed attention) is a new kind here, not a new branch in every caller.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from kvplan import record
from kvplan.errors import PlanError
from kvplan.models.costs import CostBasis, KindCost, KvHeads
from kvplan.models.formats import BF16_BYTES, FP32_BYTES, MlaLayout, indexer_bytes_per_token_layer

KV_DTYPE_BYTES = {
    "auto": 2,
    "bf16": 2,
    "bfloat16": 2,
    "fp16": 2,
    "float16": 2,
    "half": 2,
    "float32": 4,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp8_ds_mla": 1,
}
"""Element size of a KV cache dtype as the engines spell it ('auto' is the model dtype: bf16 for every
model kvplan knows; 'float32' is vLLM's auto under --dtype float32); SGLang
``torch._utils._element_size(kv_cache_dtype)``, vLLM ``STR_DTYPE_TO_TORCH_DTYPE``."""


def kv_dtype_bytes(dtype: str) -> int:
    """Bytes of one cached element in ``dtype`` (2 for bf16/fp16/auto, 1 for any fp8).

    >>> kv_dtype_bytes("fp8_e5m2"), kv_dtype_bytes("auto")
    (1, 2)
    """
    return KV_DTYPE_BYTES.get(dtype, 1 if dtype.startswith("fp8") else 2)


SpecKind = Literal["full", "mla", "window", "state", "indexer", "compressed"]
"""The KV cache spec family a kind becomes in the engines' managers (vLLM ``FullAttentionSpec``,
``MLAAttentionSpec``, ``SlidingWindowSpec``, ``MambaSpec``, the indexer's and DeepSeek-V4's own specs)."""


# Each kind's bytes:
#
# | kind          | bytes per token per layer (one rank)                                   |
# |---------------|------------------------------------------------------------------------|
# | FullAttention | kv_heads_per_rank × (head_dim + v_head_dim) × dtype bytes              |
# | MlaLatent     | MlaLayout: (kv_lora_rank + rope) × 2 bf16, 656 fp8_ds_mla, 576 raw fp8   |
# | IndexerK      | ceil((index_head_dim + index_head_dim / 128 × 4) / (index_kpool × compress_ratio)) |
# | SlidingWindow | as FullAttention, for the last ``window`` tokens only                  |
# | CompressedAttention | DeepSeek-V4: 584 B per window token + 584 B per ``compress_ratio`` tokens |
#
# | kind          | bytes per request per layer (one rank), independent of the context      |
# |---------------|------------------------------------------------------------------------|
# | LinearState   | conv (K - 1) × conv_dim / tp × conv dtype + heads / tp × dk × dv × state dtype |
#
# Hybrid kinds (sliding window, linear state, compressed attention) are read from the model's config here and
# pooled by the engines' hybrid chains (kvplan.engines.sglang_hybrid, kvplan.engines.vllm_hybrid).
@record
class FullAttention:
    """Full (causal) attention with its own K and V per kv head: MHA, GQA or MQA.

    Under attention tensor parallel (tp / dp_attention ranks) the kv heads are split, and replicated when
    there are fewer kv heads than ranks: SGLang ``ModelConfig.get_num_kv_heads`` and vLLM
    ``ModelConfig.get_num_kv_heads`` both return ``max(1, total_num_kv_heads // tp)``.
    """

    num_kv_heads: int
    head_dim: int
    v_head_dim: int
    num_attention_heads: int = 0

    spec: ClassVar[SpecKind] = "full"

    @property
    def label(self) -> str:
        """'MHA' (one kv head per query head), 'MQA' (one kv head), else 'GQA'."""
        if self.num_kv_heads == 1:
            return "MQA"
        if self.num_attention_heads and self.num_kv_heads == self.num_attention_heads:
            return "MHA"
        return "GQA"

    def kv_heads_per_rank(self, attn_tp: int) -> int:
        return max(1, self.num_kv_heads // max(attn_tp, 1))

    def replicated(self, attn_tp: int) -> bool:
        """True when ranks hold copies of the same kv head (fewer kv heads than attention ranks)."""
        return self.num_kv_heads < attn_tp

    def k_bytes_per_token(self, attn_tp: int, dtype: str) -> int:
        return self.kv_heads_per_rank(attn_tp) * self.head_dim * kv_dtype_bytes(dtype)

    def v_bytes_per_token(self, attn_tp: int, dtype: str) -> int:
        return self.kv_heads_per_rank(attn_tp) * self.v_head_dim * kv_dtype_bytes(dtype)

    def bytes_per_token(self, attn_tp: int, dtype: str) -> int:
        """K + V of one token in one layer on one rank.

        >>> FullAttention(8, 128, 128).bytes_per_token(8, "bf16")   # 1 head × (128 + 128) × 2
        512
        """
        return self.k_bytes_per_token(attn_tp, dtype) + self.v_bytes_per_token(attn_tp, dtype)

    def describe(self, attn_tp: int) -> str:
        per = self.kv_heads_per_rank(attn_tp)
        rep = " (replicated)" if self.replicated(attn_tp) else ""
        v = f"/{self.v_head_dim}" if self.v_head_dim != self.head_dim else ""
        heads = f"{self.num_kv_heads} kv heads × {self.head_dim}{v}"
        return f"{self.label}, {heads} → {per} per rank{rep} at attention tp {attn_tp}"

    def row_bytes(self, attn_tp: int, dtype: str, layout: MlaLayout | None) -> int:
        """One token of one layer as an engine's attention page stores it: K + V of the kv heads per rank."""
        del layout
        return self.bytes_per_token(attn_tp, dtype)

    @property
    def head_size(self) -> int:
        """vLLM's ``AttentionSpec.head_size``: the K head size."""
        return self.head_dim

    def heads(self, attn_tp: int) -> KvHeads | None:
        """How TP splits the kind's kv heads (MLA: None, one latent per token on every rank)."""
        return KvHeads(self.num_kv_heads, self.kv_heads_per_rank(attn_tp), self.head_dim, self.v_head_dim)

    def kind_costs(self, layers: int, on: CostBasis) -> tuple[KindCost, ...]:
        """The kind's bytes on one GPU over its ``layers`` layers (kvplan.plan.budget.kind_costs)."""
        bpt = layers * self.bytes_per_token(on.attn_tp, on.kv_dtype)
        return (KindCost(kind=self.label, layers=layers, per="token", bytes_per_token=bpt),)


@record
class MlaLatent:
    """Multi-head latent attention: one compressed latent + rope key per token, replicated on every TP rank."""

    kv_lora_rank: int
    qk_rope_head_dim: int

    label = "MLA"
    spec: ClassVar[SpecKind] = "mla"

    def bytes_per_token(self, layout: MlaLayout) -> int:
        """One token of one layer in ``layout``.

        >>> MlaLatent(512, 64).bytes_per_token(MlaLayout.BF16)
        1152
        """
        return layout.bytes_per_token_layer(self.kv_lora_rank, self.qk_rope_head_dim)

    def describe(self, attn_tp: int) -> str:
        del attn_tp
        return f"MLA, latent {self.kv_lora_rank} + rope {self.qk_rope_head_dim}, replicated on every rank"

    def kv_heads_per_rank(self, attn_tp: int) -> int:
        """One latent "head" on every rank (vLLM ``MLAAttentionSpec`` num_kv_heads 1): replicated, never split."""
        del attn_tp
        return 1

    def row_bytes(self, attn_tp: int, dtype: str, layout: MlaLayout | None) -> int:
        """One token of one layer as an engine's attention page stores it: the latent row in the engine's layout."""
        del attn_tp, dtype
        if layout is None:
            raise ValueError("an MLA row needs the engine's row layout")
        return self.bytes_per_token(layout)

    @property
    def head_size(self) -> int:
        """vLLM's ``MLAAttentionSpec.head_size``: the latent row, kv_lora_rank + rope."""
        return self.kv_lora_rank + self.qk_rope_head_dim

    def heads(self, attn_tp: int) -> KvHeads | None:
        del attn_tp
        return None

    def kind_costs(self, layers: int, on: CostBasis) -> tuple[KindCost, ...]:
        if on.mla_layout is None:
            return ()
        bpt = layers * self.bytes_per_token(on.mla_layout)
        return (KindCost(kind="MLA", layers=layers, per="token", bytes_per_token=bpt),)


@record
class IndexerK:
    """The DSA indexer's K cache (fp8 + an fp32 scale per 128), on the indexer-owning ("full") layers only."""

    index_head_dim: int
    index_kpool: int = 1
    compress_ratio: int = 1
    """DeepSeek-V4: the indexer keys one compressed token per ``compress_ratio`` tokens (its C4 layers: 4);
    vLLM ``DeepseekV4IndexerCache.get_kv_cache_spec`` sizes it with ``compress_ratio``. 1 for DSA."""

    label = "indexer K"
    spec: ClassVar[SpecKind] = "indexer"

    @property
    def bytes_per_state(self) -> int:
        """One stored key: fp8 K + one fp32 scale per 128 elements (132 B for head_dim 128)."""
        return indexer_bytes_per_token_layer(self.index_head_dim)

    @property
    def tokens_per_state(self) -> int:
        """Tokens one stored key stands for: ``index_kpool`` (GLM-5.3-Flash pools) × ``compress_ratio`` (V4)."""
        return self.index_kpool * self.compress_ratio

    def bytes_per_request(self, ctx_tokens: int) -> int:
        """The keys of a ``ctx_tokens`` request: one per token (DSA), per whole ``compress_ratio`` group (V4),
        ``index_kpool`` tokens sharing one key's bytes (GLM-5.3-Flash: ceil(132 / kpool) per token).

        >>> IndexerK(128, compress_ratio=4).bytes_per_request(131_072)   # 32,768 keys × 132
        4325376
        """
        per_token = indexer_bytes_per_token_layer(self.index_head_dim, self.index_kpool)
        return max(ctx_tokens, 0) // self.compress_ratio * per_token

    @property
    def bytes_per_token(self) -> int:
        """fp8 K + one fp32 scale per 128 elements, shared by ``index_kpool`` × ``compress_ratio`` tokens.

        >>> IndexerK(128).bytes_per_token, IndexerK(128, compress_ratio=4).bytes_per_token   # 132, ceil(132 / 4)
        (132, 33)
        """
        return indexer_bytes_per_token_layer(self.index_head_dim, self.tokens_per_state)

    def kind_costs(self, layers: int, on: CostBasis) -> tuple[KindCost, ...]:
        return (KindCost(kind="indexer K", layers=layers, per="token", bytes_per_token=layers * self.bytes_per_token),)


@record
class SlidingWindow(FullAttention):
    """Full attention over the last ``window`` tokens only (gpt-oss ``sliding_attention`` layers).

    The same K and V per token as full attention (vLLM ``SlidingWindowSpec`` is an ``AttentionSpec`` with a
    ``sliding_window``), but a request never needs more than ``window`` tokens of it: older tokens are dead.
    How many an engine keeps allocated (vLLM frees whole blocks behind the window and keeps one more; SGLang
    sizes a separate SWA pool by a ratio) is an engine rule, not the model's.

    ``sinks``: the model has attention sinks (openai/gpt-oss ``gpt_oss/torch/model.py`` ``AttentionBlock``:
    ``self.sinks = Parameter(num_attention_heads)``, one learned logit per query head). They are parameters, not
    cache: no bytes per token.
    """

    window: int = 0
    sinks: bool = False

    label = "sliding window"
    kind_name: ClassVar[str] = "sliding-window"
    spec: ClassVar[SpecKind] = "window"

    def tokens_held(self, ctx_tokens: int) -> int:
        """Tokens of a ``ctx_tokens`` request the layer still reads: at most the window.

        >>> SlidingWindow(8, 64, 64, window=128).tokens_held(131_072)
        128
        """
        return min(max(ctx_tokens, 0), self.window)

    def bytes_per_request(self, ctx_tokens: int, attn_tp: int, dtype: str) -> int:
        """K + V of the tokens the window holds, on one rank."""
        return self.tokens_held(ctx_tokens) * self.bytes_per_token(attn_tp, dtype)

    def kind_costs(self, layers: int, on: CostBasis) -> tuple[KindCost, ...]:
        bpt = layers * self.bytes_per_token(on.attn_tp, on.kv_dtype)
        name = f"sliding window {self.window}" + (" + sinks" if self.sinks else "")
        return (KindCost(kind=name, layers=layers, per="window", bytes_per_token=bpt, window=self.window,
                         request_max_bytes=self.window * bpt),)  # fmt: skip


StateFamily = Literal["gated_deltanet", "kda"]

_DTYPE_BYTES = {"float32": FP32_BYTES, "bfloat16": BF16_BYTES, "float16": BF16_BYTES}


@record
class LinearState:
    """A linear-attention layer's fixed state per request: a short-convolution window and a recurrent matrix.

    Shapes as both engines compute them (one rank of ``tp``):

    - Gated DeltaNet (Qwen3-Next): conv_dim = 2 × num_k_heads × head_k_dim + num_heads × head_v_dim; conv
      state (conv_kernel - 1 + spec) × conv_dim / tp; recurrent num_heads / tp × head_v_dim × head_k_dim
      (vLLM ``MambaStateShapeCalculator.gated_delta_net_state_shape``; SGLang ``Mamba2StateShape.create``);
    - KDA (Kimi-Linear, GLM-5.3-Flash): conv_dim = num_heads × head_dim + 2 × num_k_heads × head_k_dim
      (q, k, v each convolved); recurrent num_heads / tp × head_dim × head_dim
      (vLLM ``MambaStateShapeCalculator.kda_state_shape``; SGLang ``KimiLinearStateShape.create``).

    Element sizes differ by engine (``dtype_bytes``); ``mamba_ssm_dtype`` is the config's own field.
    """

    family: StateFamily
    num_heads: int
    """Recurrent heads: ``linear_num_value_heads`` (GDN) or ``linear_attn_config.num_heads`` (KDA)."""
    num_k_heads: int
    head_k_dim: int
    head_v_dim: int
    conv_kernel: int
    mamba_ssm_dtype: str | None = None
    """``mamba_ssm_dtype`` of the config (Qwen3.5 writes "float32"); SGLang reads it, vLLM only for ``vllm_reads``."""
    vllm_reads_ssm_dtype: bool = False
    """vLLM takes the recurrent dtype from ``mamba_ssm_dtype`` too: Qwen3.5's ``…ForConditionalGeneration``
    (``model_executor/models/config.py`` ``MODELS_CONFIG_MAP`` → ``Qwen3_5ForConditionalGenerationConfig``:
    ``mamba_ssm_cache_dtype`` "auto" becomes the text config's ``mamba_ssm_dtype``)."""

    kind_name: ClassVar[str] = "linear-attention state"
    spec: ClassVar[SpecKind] = "state"

    @property
    def label(self) -> str:
        return "Gated DeltaNet state" if self.family == "gated_deltanet" else "KDA state"

    @property
    def conv_dim(self) -> int:
        k = self.num_k_heads * self.head_k_dim
        return 2 * k + self.num_heads * self.head_v_dim

    def conv_elements(self, tp: int, spec_tokens: int = 0) -> int:
        """(conv_kernel - 1 + spec_tokens) × conv_dim / tp: the last inputs the short convolution needs."""
        return (self.conv_kernel - 1 + spec_tokens) * _divide(self.conv_dim, tp, "conv_dim")

    def recurrent_elements(self, tp: int) -> int:
        """num_heads / tp × head_v_dim × head_k_dim: the delta rule's state matrix per head."""
        return _divide(self.num_heads, tp, "heads") * self.head_v_dim * self.head_k_dim

    def dtype_bytes(self, engine: str) -> tuple[int, int]:
        """(conv, recurrent) element sizes the engine stores, bf16 checkpoints.

        - SGLang ``mamba2_state_dtype``: conv ``SGLANG_MAMBA_CONV_DTYPE`` (default bfloat16); recurrent the
          config's ``mamba_ssm_dtype``, else float32 (``SGLANG_MAMBA_SSM_DTYPE`` overrides both);
        - vLLM ``MambaStateDtypeCalculator``: GDN ``_mamba_state_dtype``, conv the model dtype and recurrent the
          same unless ``--mamba-ssm-cache-dtype`` (default "auto"; Qwen3.5: ``vllm_reads_ssm_dtype``); KDA
          ``kda_state_dtype``, (model dtype, float32).

        >>> s = LinearState("gated_deltanet", 32, 16, 128, 128, 4)
        >>> s.dtype_bytes("sglang"), s.dtype_bytes("vllm")
        ((2, 4), (2, 2))
        """
        if engine == "vllm":
            if self.vllm_reads_ssm_dtype and self.mamba_ssm_dtype is not None:
                return (BF16_BYTES, _DTYPE_BYTES.get(self.mamba_ssm_dtype, FP32_BYTES))
            return (BF16_BYTES, FP32_BYTES if self.family == "kda" else BF16_BYTES)
        return (BF16_BYTES, _DTYPE_BYTES.get(self.mamba_ssm_dtype or "float32", FP32_BYTES))

    def bytes_per_request(self, tp: int, engine: str, spec_tokens: int = 0) -> int:
        """Conv + recurrent state of one request in one layer on one rank: fixed, whatever the context.

        >>> LinearState("gated_deltanet", 32, 16, 128, 128, 4).bytes_per_request(1, "sglang")
        2146304
        """
        conv, rec = self.dtype_bytes(engine)
        return self.conv_elements(tp, spec_tokens) * conv + self.recurrent_elements(tp) * rec

    def kind_costs(self, layers: int, on: CostBasis) -> tuple[KindCost, ...]:
        per = layers * self.bytes_per_request(on.attn_tp, on.engine)
        return (KindCost(kind=self.label, layers=layers, per="request", bytes_per_token=0, request_max_bytes=per),)


def _divide(n: int, tp: int, what: str) -> int:
    """n / tp exactly, as vLLM's and SGLang's ``divide`` assert."""
    tp = max(tp, 1)
    if n % tp:  # the engine stops at start-up: a refusal (exit 2), never a crash (found by fuzzing)
        raise PlanError(f"{what} {n} is not divisible by tensor parallel {tp} (the engine's divide() asserts)")
    return n // tp


@record
class CompressedAttention:
    """DeepSeek-V4 attention: one 512-wide KV head, a sliding window, and (``compress_ratio`` 4 or 128) a
    compressed KV of one state per ``compress_ratio`` tokens (config ``compress_ratios``, ``sliding_window``).

    vLLM: the window lives in ``DeepseekV4SWACache`` (every layer) and the compressed states in an
    ``MLAAttentionSpec(compress_ratio=...)`` (``DeepseekV4MLAAttention.get_kv_cache_spec``; none for ratio 0),
    both fp8 only (``fp8_ds_mla``). Ratio-4 layers also own an indexer K on the compressed tokens (``IndexerK``
    with ``compress_ratio`` 4). Not modelled: the compressors' partial-window state (``DeepseekCompressor``).
    """

    head_dim: int
    qk_rope_head_dim: int
    window: int
    compress_ratio: int
    """0: the window only (``compress_ratios`` entry 0); 4: CSA (with the indexer); 128: HCA."""

    kind_name: ClassVar[str] = "DeepSeek-V4 compressed-attention"
    label = "compressed attention"
    spec: ClassVar[SpecKind] = "compressed"

    @property
    def entry_bytes(self) -> int:
        """Bytes of one window token or one compressed state (584 for head_dim 512, rope 64): fp8 NoPE, bf16 RoPE,
        a scale byte per 64 NoPE and a pad byte (vLLM ``DeepseekV4MultiHeadLatentAttentionWrapper``: ``head_bytes``).

        >>> CompressedAttention(512, 64, 128, 4).entry_bytes   # 448 + 64 × 2 + 448 / 64 + 1
        584
        """
        nope = self.head_dim - self.qk_rope_head_dim
        return nope + self.qk_rope_head_dim * BF16_BYTES + nope // 64 + 1

    def window_tokens(self, ctx_tokens: int) -> int:
        return min(max(ctx_tokens, 0), self.window)

    def compressed_states(self, ctx_tokens: int) -> int:
        """Whole groups of ``compress_ratio`` tokens (the tail waits in the compressor)."""
        return max(ctx_tokens, 0) // self.compress_ratio if self.compress_ratio > 1 else 0

    def bytes_per_request(self, ctx_tokens: int) -> int:
        """Window + compressed states of one request in one layer (replicated on every rank: one KV head).

        >>> CompressedAttention(512, 64, 128, 4).bytes_per_request(1024)   # (128 + 256) × 584
        224256
        """
        return (self.window_tokens(ctx_tokens) + self.compressed_states(ctx_tokens)) * self.entry_bytes

    def kind_costs(self, layers: int, on: CostBasis) -> tuple[KindCost, ...]:
        """Model level, before the engine's pages: every layer keeps its window of entries; a C4 / C128 layer
        also one compressed entry per ``compress_ratio`` tokens (per token of context, floored)."""
        n, ratio, window = layers, self.compress_ratio, self.window
        out: list[KindCost] = []
        if ratio > 1:
            kind = f"compressed attention C{ratio} + window {window}"
            out.append(KindCost(kind=kind, layers=n, per="token", bytes_per_token=n * self.entry_bytes // ratio))
        out.append(KindCost(kind=f"window {window} (C{ratio} layers)" if ratio > 1
                            else f"window {window} (window-only layers)", layers=n, per="window",
                            bytes_per_token=n * self.entry_bytes, window=window,
                            request_max_bytes=n * window * self.entry_bytes))  # fmt: skip
        return tuple(out)


AttentionCache = FullAttention | MlaLatent | CompressedAttention
CacheKind = FullAttention | MlaLatent | IndexerK | LinearState | CompressedAttention
HYBRID_KINDS: tuple[type, ...] = (SlidingWindow, LinearState, CompressedAttention)
"""Kinds pooled by the engines' hybrid chains (kvplan.engines.sglang_hybrid, kvplan.engines.vllm_hybrid)."""


@record
class Layer:
    """One decoder layer and the caches it owns."""

    index: int
    caches: tuple[CacheKind, ...]

    @property
    def attention(self) -> AttentionCache:
        for c in self.caches:
            if isinstance(c, FullAttention | MlaLatent | CompressedAttention):
                return c
        raise ValueError(f"layer {self.index} has no attention cache")

    @property
    def state(self) -> LinearState | None:
        for c in self.caches:
            if isinstance(c, LinearState):
                return c
        return None

    @property
    def indexer(self) -> IndexerK | None:
        for c in self.caches:
            if isinstance(c, IndexerK):
                return c
        return None

    @property
    def window(self) -> SlidingWindow | None:
        """The layer's sliding-window cache, if it has one."""
        return next((c for c in self.caches if isinstance(c, SlidingWindow)), None)

    @property
    def compressed(self) -> CompressedAttention | None:
        """The layer's DeepSeek-V4 compressed attention, if it has one."""
        return next((c for c in self.caches if isinstance(c, CompressedAttention)), None)

    @property
    def paged_attention(self) -> tuple[FullAttention | MlaLatent, ...]:
        """Its full-attention and MLA caches: one page a block for every token (a window is a spec of its own)."""
        return tuple(c for c in self.caches if isinstance(c, FullAttention | MlaLatent) and c.spec in ("full", "mla"))


def request_bytes(
    cache: CacheKind, ctx_tokens: int, attn_tp: int, engine: str, kv_dtype: str = "bf16",
    mla_layout: MlaLayout = MlaLayout.BF16,
) -> int:  # fmt: skip
    """What one request of ``ctx_tokens`` keeps in one layer's ``cache`` on one rank, model-level (before any
    engine's page rounding): per-token kinds × tokens, a window at most its window, a state its fixed size."""
    if isinstance(cache, SlidingWindow):
        return cache.bytes_per_request(ctx_tokens, attn_tp, kv_dtype)
    if isinstance(cache, FullAttention):
        return max(ctx_tokens, 0) * cache.bytes_per_token(attn_tp, kv_dtype)
    if isinstance(cache, MlaLatent):
        return max(ctx_tokens, 0) * cache.bytes_per_token(mla_layout)
    if isinstance(cache, IndexerK | CompressedAttention):
        return cache.bytes_per_request(ctx_tokens)
    return cache.bytes_per_request(attn_tp, engine)


def request_bytes_by_kind(
    layers: tuple[Layer, ...], ctx_tokens: int, attn_tp: int, engine: str, kv_dtype: str = "bf16"
) -> tuple[tuple[CacheKind, int, int], ...]:
    """(kind, layers, bytes) for each distinct cache of the layers: a ``ctx_tokens`` request's bytes per kind on
    one rank. The kinds' bytes add up to the request's total (tests/fuzz/test_hybrid_kinds.py)."""
    counts: dict[CacheKind, int] = {}
    for layer in layers:
        for c in layer.caches:
            counts[c] = counts.get(c, 0) + 1
    return tuple((c, n, n * request_bytes(c, ctx_tokens, attn_tp, engine, kv_dtype)) for c, n in counts.items())


def describe_kinds(layers: tuple[Layer, ...], attn_tp: int) -> tuple[str, ...]:
    """One line per cache kind the layers own, with its bytes per token on one rank (bf16 for attention).

    >>> describe_kinds(tuple(Layer(i, (FullAttention(8, 128, 128, 64),)) for i in range(80)), 8)
    ('80 × GQA, 8 kv heads × 128 → 1 per rank at tp 8 (40,960 B/token bf16)',)
    """
    counts: dict[CacheKind, int] = {}
    for layer in layers:
        for c in layer.caches:
            counts[c] = counts.get(c, 0) + 1
    out: list[str] = []
    for c, n in counts.items():
        if isinstance(c, SlidingWindow | LinearState | CompressedAttention):
            out.append(_describe_hybrid(c, n, attn_tp))
        elif isinstance(c, FullAttention):
            v = f"/{c.v_head_dim}" if c.v_head_dim != c.head_dim else ""
            per = c.kv_heads_per_rank(attn_tp)
            rep = ", replicated" if c.replicated(attn_tp) else ""
            total = n * c.bytes_per_token(attn_tp, "bf16")
            out.append(
                f"{n} × {c.label}, {c.num_kv_heads} kv heads × {c.head_dim}{v} → {per} per rank{rep} at tp {attn_tp}"
                f" ({total:,} B/token bf16)"
            )
        elif isinstance(c, MlaLatent):
            bf16, fp8 = c.bytes_per_token(MlaLayout.BF16), c.bytes_per_token(MlaLayout.FP8_RAW)
            out.append(
                f"{n} × MLA, latent {c.kv_lora_rank} + rope {c.qk_rope_head_dim}, replicated on every rank"
                f" ({n * bf16:,} B/token bf16, {n * fp8:,} raw fp8)"
            )
        else:
            on = f", on C{c.compress_ratio}-compressed tokens" if c.compress_ratio > 1 else ""
            out.append(
                f"{n} × indexer K, head_dim {c.index_head_dim}, kpool {c.index_kpool}{on} "
                f"({n * c.bytes_per_token:,} B/token: fp8 + fp32 scale per 128)"
            )
    return tuple(out)


def _describe_hybrid(c: SlidingWindow | LinearState | CompressedAttention, n: int, attn_tp: int) -> str:
    """The ``models show`` line of a hybrid kind: what it keeps, and its bytes per token or per request."""
    if isinstance(c, SlidingWindow):
        per = c.kv_heads_per_rank(attn_tp)
        sinks = " + sinks" if c.sinks else ""
        total = n * c.bytes_per_token(attn_tp, "bf16")
        return (
            f"{n} × sliding window {c.window}{sinks}, {c.num_kv_heads} kv heads × {c.head_dim} → {per} per rank at"
            f" tp {attn_tp} ({total:,} B/token bf16, at most {c.window} tokens: {c.window * total:,} B per request)"
        )
    if isinstance(c, LinearState):
        conv, rec = c.conv_elements(attn_tp), c.recurrent_elements(attn_tp)
        sg, vl = n * c.bytes_per_request(attn_tp, "sglang"), n * c.bytes_per_request(attn_tp, "vllm")
        return (
            f"{n} × {c.label}: conv {c.conv_kernel - 1} × {c.conv_dim:,} + recurrent {c.num_heads} × {c.head_v_dim}"
            f" × {c.head_k_dim} per request → {conv:,} + {rec:,} elements per rank at tp {attn_tp}"
            f" ({sg:,} B per request SGLang bf16/{_dtype_name(c.dtype_bytes('sglang')[1])},"
            f" {vl:,} vLLM bf16/{_dtype_name(c.dtype_bytes('vllm')[1])})"
        )
    kind = {0: "window only", 4: "CSA, 1 state per 4 tokens", 128: "HCA, 1 state per 128 tokens"}
    what = kind.get(c.compress_ratio, f"1 state per {c.compress_ratio} tokens")
    per_token = f", + {n * c.entry_bytes:,} B per {c.compress_ratio} tokens" if c.compress_ratio > 1 else ""
    return (
        f"{n} × compressed attention ({what}), 1 kv head × {c.head_dim}, window {c.window}, replicated on every rank"
        f" ({n * c.entry_bytes:,} B per window token fp8{per_token})"
    )


def _dtype_name(nbytes: int) -> str:
    return {4: "fp32", 2: "bf16"}.get(nbytes, f"{nbytes} B")


def layer_groups(layers: tuple[Layer, ...]) -> tuple[tuple[int, tuple[CacheKind, ...]], ...]:
    """Runs of layers with the same caches, as (count, caches): what ``models show`` prints one line each."""
    out: list[tuple[int, tuple[CacheKind, ...]]] = []
    counts: dict[tuple[CacheKind, ...], int] = {}
    for layer in layers:
        counts[layer.caches] = counts.get(layer.caches, 0) + 1
    for caches, n in counts.items():
        out.append((n, caches))
    return tuple(out)
