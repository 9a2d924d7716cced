"""What is served: a model's architecture as far as memory is concerned (pure data)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import field, replace
from enum import Enum
from typing import Any

from kvplan import record
from kvplan.models.activation import ActivationDims
from kvplan.models.cache import HYBRID_KINDS, FullAttention, IndexerK, Layer, MlaLatent
from kvplan.models.rope import ConfigRope, RopeScaling
from kvplan.models.shards import ShardDims


class IndexerRule(str, Enum):
    """Where the set of indexer-owning ("full") layers came from, in SGLang's order of priority."""

    INDEXER_TYPES = "indexer_types"
    PATTERN = "index_topk_pattern"
    FREQ = "index_topk_freq"
    NONE = "none"


def full_indexer_layers(
    num_layers: int,
    *,
    indexer_types: tuple[str, ...] | None = None,
    pattern: str | None = None,
    freq: int = 1,
    offset: int | None = None,
) -> tuple[tuple[bool, ...], IndexerRule]:
    """Which layers own an indexer K cache, resolved as SGLang's ``dsa_layer_skips_topk`` does.

    1. ``indexer_types``: a layer is full iff its entry is "full";
    2. ``index_topk_pattern``: full iff its letter is "F";
    3. ``index_topk_freq`` (default 1) with ``index_skip_topk_offset``: full iff
       ``max(i - offset + 1, 0) % freq == 0``; without an offset, ``max(i - 1, 0) % freq == 0``.

    >>> sum(full_indexer_layers(78, freq=4)[0])   # {0, 1, 5, 9, ..., 77}
    21
    """
    if indexer_types is not None:
        return tuple(t == "full" for t in indexer_types), IndexerRule.INDEXER_TYPES
    if pattern is not None:
        return tuple(c == "F" for c in pattern), IndexerRule.PATTERN
    if offset is None:
        flags = tuple(max(i - 1, 0) % freq == 0 for i in range(num_layers))
    else:
        flags = tuple(max(i - offset + 1, 0) % freq == 0 for i in range(num_layers))
    return flags, IndexerRule.FREQ


@record
class Split:
    """How many ways each part of the weights is split on one GPU (the key a measured point matches on).

    Two layouts with the same split load the same bytes per GPU: ``ep=8`` on TP8 still splits the experts
    8 ways, and dcp never splits weights (it shards the KV cache only).
    """

    tp: int
    """dense layers, shared experts, embeddings: tensor parallel."""
    attention: int
    """attention: tp / dp_attention (DP attention replicates attention on each DP rank)."""
    experts: int
    """routed experts: max(tp, ep) (EP splits whole experts, TP splits each one; their product is capped at tp)."""
    pp: int = 1
    """layers: pipeline stages."""

    @classmethod
    def of(cls, *, tp: int, dp_attention: int = 1, ep: int = 1, pp: int = 1) -> Split:
        return cls(tp=tp, attention=max(tp // max(dp_attention, 1), 1), experts=max(tp, ep), pp=max(pp, 1))

    def ways(self, split: str) -> int:
        return {"tp": self.tp, "attn": self.attention, "experts": self.experts, "none": 1}[split]

    def __str__(self) -> str:
        pp = f", pp {self.pp}" if self.pp > 1 else ""
        return f"tp {self.tp}, attention {self.attention}, experts {self.experts}{pp}"

    # dataclass(order=True)'s four comparisons, written once here rather than compiled at import (start-up)
    def __lt__(self, other: object) -> bool:
        return _fields(self) < _fields(other) if other.__class__ is self.__class__ else NotImplemented

    def __le__(self, other: object) -> bool:
        return _fields(self) <= _fields(other) if other.__class__ is self.__class__ else NotImplemented

    def __gt__(self, other: object) -> bool:
        return _fields(self) > _fields(other) if other.__class__ is self.__class__ else NotImplemented

    def __ge__(self, other: object) -> bool:
        return _fields(self) >= _fields(other) if other.__class__ is self.__class__ else NotImplemented


def _fields(split: Any) -> tuple[int, int, int, int]:
    return split.tp, split.attention, split.experts, split.pp


@record(kw_only=True)
class PipelineStage:
    """One pipeline stage: the decoder layers [start, end) of the model's ``model_layers`` it holds.

    The first stage also holds the embedding, the last the final norm and the LM head (vLLM and SGLang
    ``make_layers`` / ``PPMissingLayer``); the engine's partition rule is kvplan.engines.pipeline.
    """

    rank: int
    size: int
    start: int
    end: int
    model_layers: int

    @property
    def layers(self) -> int:
        return self.end - self.start

    @property
    def first(self) -> bool:
        return self.rank == 0

    @property
    def last(self) -> bool:
        return self.rank == self.size - 1

    @property
    def held(self) -> str:
        """What the stage's GPUs hold: 'layers 0-39 (40) + embedding'."""
        ends = (["embedding"] if self.first else []) + (["final norm + LM head"] if self.last else [])
        return f"layers {self.start}-{self.end - 1} ({self.layers})" + "".join(f" + {e}" for e in ends)

    def __str__(self) -> str:
        return f"stage {self.rank} of {self.size}: {self.held}"


@record(kw_only=True)
class WeightPoint:
    """A measured weights-per-GPU figure for one parallel layout, with where it was published."""

    tp: int
    bytes: int
    source: str
    dp_attention: int = 1
    ep: int = 1
    pp: int = 1

    @property
    def split(self) -> Split:
        return Split.of(tp=self.tp, dp_attention=self.dp_attention, ep=self.ep, pp=self.pp)


@record(kw_only=True)
class ParamGroup:
    """A group of parameters, how many bytes each takes in the checkpoint, and how it is split."""

    name: str
    params: int
    bytes_per_param_num: int
    """Bytes per parameter as a fraction num/den (fp8 with fp32 block scales is not a whole number)."""
    bytes_per_param_den: int = 1
    split: str = "tp"
    """'tp' (tensor parallel), 'attn' (attention TP: tp / dp_attention), 'experts' (tp or ep), 'none'."""
    layer_span: tuple[int, int] | None = None
    """The decoder layers [first, end) the group's modules sit on, where known (a MoE model's dense MLP on its
    first layers, its experts on the rest): a pipeline stage holds the share of them it owns."""
    gemm: str = ""
    """The GEMM format its quantized weights run at where the checkpoint says (``quant.Scheme.gemm``: 'int4' W4A16,
    dequantized to bf16 in the GEMM; 'fp4' NVFP4 / MXFP4; 'fp8'); '' : kvplan.perf reads it from the bytes per
    parameter (a packed 4-bit tensor counts two values a byte, so its bytes alone misread it)."""
    values: int = 0
    """The values its GEMMs multiply where ``params`` counts packed elements (a tensor's U8 bytes of NVFP4 / MXFP4
    hold two 4-bit values, an I32 of an int4 packing eight); 0: ``params`` counts them (``gemm_params``)."""

    def gemm_params(self) -> int:
        """The parameters its GEMMs multiply (kvplan.perf): the packed tensors' values, else ``params``."""
        return self.values or self.params

    def bytes_per_gpu(self, split: Split) -> int:
        """Bytes on one GPU; layer groups also split over the pipeline stages (embeddings counted whole)."""
        stages = 1 if self.name == "embeddings" else split.pp
        total_num = self.params * self.bytes_per_param_num
        den = self.bytes_per_param_den * split.ways(self.split) * stages
        return -(-total_num // den)

    def bytes_on(self, split: Split, *, engine: str | None, with_mtp: bool, moe_backend: str | None = None) -> int:
        """Bytes on one GPU of ``engine`` (a group that differs by engine or by its MoE backend,
        kvplan.models.additions and kvplan.models.mxfp4_moe, overrides it)."""
        return self.bytes_per_gpu(split)

    def layers_owned(self, model_layers: int) -> tuple[int, int]:
        """The layers [first, end) the group sits on: its ``layer_span``, else every layer (a checkpoint group
        reads its tensor names: kvplan.models.sharding)."""
        return self.layer_span if self.layer_span is not None else (0, model_layers)

    def for_stage(self, stage: PipelineStage) -> ParamGroup:
        """The group as one pipeline stage builds it: itself (the engine's additions, kvplan.models.additions,
        count the stage's layers)."""
        return self

    def with_config(self, override: Mapping[str, Any]) -> ParamGroup:
        """The group under config fields overridden at start-up: itself (the engine's additions re-read them)."""
        return self

    def in_dtype(self, stored: int, loaded: int) -> ParamGroup:
        """The group as the engine builds it in a model dtype of ``loaded`` bytes, from a checkpoint whose
        torch_dtype is ``stored`` bytes (kvplan.engines.model_dtype): a group at exactly ``stored`` bytes a
        parameter is unquantized and is cast on load; a quantized or mixed one keeps its bytes."""
        if self.bytes_per_param_num != stored * self.bytes_per_param_den:
            return self
        return replace(self, bytes_per_param_num=loaded, bytes_per_param_den=1)


QWEN3_NEXT_FAMILY = ("Qwen3NextForCausalLM", "Qwen3_5ForConditionalGeneration", "Qwen3_5ForCausalLM",
                     "Qwen3_5MoeForConditionalGeneration", "Qwen3_5MoeForCausalLM")  # fmt: skip
"""Gated DeltaNet + gated attention models both engines build as Qwen3-Next (vLLM qwen3_next.py / qwen3_5.py /
qwen3_5_moe.py, SGLang models/qwen3_next.py / qwen3_5.py): one family record for the hybrid chains."""


@record(kw_only=True)
class ModelArch:
    """A model as far as memory is concerned, from a preset YAML or a Hugging Face config.json.

    Its layers (``layers``: each with the caches it owns, kvplan.models.cache) are what engines size; the
    fields below are the config values they are built from. A model with ``kv_lora_rank`` is MLA (DSA when
    it also has an indexer), else full attention (MHA / GQA / MQA) with ``num_kv_heads`` × ``head_dim``.
    """

    name: str
    source: str
    architecture: str
    num_layers: int
    num_mtp_layers: int
    max_position_embeddings: int
    mtp_layers_named: bool = True
    """False when config.json leaves ``num_nextn_predict_layers`` out and ``num_mtp_layers`` is the engine config
    class's default (GLM-5.3-Flash: SGLang ``Glm5NextTextConfig`` 1), which vLLM's config class does not share."""
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    num_attention_heads: int = 0
    num_kv_heads: int = 0
    """Full attention: total kv heads of the model (``num_key_value_heads``; the most of any layer when per layer)."""
    kv_heads_per_layer: tuple[int, ...] = ()
    """Full attention with kv heads chosen per layer (DeciLM ``block_configs``; 0 = no attention cache); () when
    every layer has ``num_kv_heads``."""
    head_dim: int = 0
    v_head_dim: int = 0
    index_head_dim: int = 0
    index_n_heads: int = 0
    index_topk: int = 0
    index_kpool: int = 1
    indexer_full: tuple[bool, ...] = ()
    """One flag per layer: True where the layer owns an indexer K cache. Empty for a plain MLA model."""
    indexer_rule: IndexerRule = IndexerRule.NONE
    index_topk_freq: int = 1
    index_skip_topk_offset: int | None = None
    index_topk_pattern: str | None = None
    """The raw fields: vLLM reads only these (never ``indexer_types``), with an offset default of 2."""
    param_groups: Sequence[ParamGroup] = ()
    """A tuple, or a preset's groups laid out on first use (kvplan.models.preset_weights.DeferredGroups)."""
    measured_weights: tuple[WeightPoint, ...] = field(default=())
    checkpoint_dtype_bytes: int = 2
    """Bytes of the config's torch_dtype (4 for float32): what the checkpoint stores unquantized tensors in; the
    engine casts them to the model dtype on load (kvplan.engines.model_dtype)."""
    documented_rope_scaling: RopeScaling | None = None
    """A RoPE scaling the model card documents and config.json leaves off (kvplan.models.rope)."""
    config_rope: ConfigRope | None = None
    """The RoPE scaling config.json ships, from which each engine derives its context length its own way."""
    description: str = ""
    weights_summary: str = ""
    """How the checkpoint stores its weights (quantization schemes), said on the weights line."""
    weights_assumptions: tuple[str, ...] = ()
    activation: ActivationDims | None = None
    """Hidden size, vocabulary and MLP widths that size vLLM's profiling run (kvplan.engines.vllm_profile)."""
    pp_stage: PipelineStage | None = None
    """Set on one pipeline stage's view of the model (kvplan.models.pipeline.stage_arch): ``num_layers`` and the
    per-layer fields are then that stage's, and its weights are what that stage loads."""
    shards: ShardDims | None = None
    """What the engines' loaders split by tp and ep, and the fp8 blocks each slice must hold whole
    (kvplan.engines.load_checks); None for a preset without a ``config:`` (no load-time checks)."""
    vision_tower: tuple[int, int] | tuple[()] = ()
    """A multimodal model's vision tower as SGLang's ``adjust_mem_fraction_for_vlm`` reads it: (``vision_config``
    ``num_hidden_layers``, else 24; ``hidden_size``, else 1024). Empty for a text model."""
    layers: tuple[Layer, ...] = ()
    """Each decoder layer with the caches it owns, built once by the loader. A uniform model (every layer the
    same attention, the indexer K on the full layers) may leave it empty: it is then built from the fields above
    here, and rebuilt from them by ``dataclasses.replace`` (so a changed field never leaves stale layers)."""

    def __post_init__(self) -> None:
        if not self.is_hybrid:
            object.__setattr__(self, "layers", self.uniform_layers())
        elif len(self.layers) != self.num_layers:
            raise ValueError(f"{self.name}: {len(self.layers)} layers built for num_layers {self.num_layers}")

    @property
    def is_hybrid(self) -> bool:
        """True when some layer owns a kind no uniform model has (sliding window, linear state, compressed)."""
        return any(isinstance(c, HYBRID_KINDS) for layer in self.layers for c in layer.caches)

    @property
    def hybrid_kinds(self) -> tuple[str, ...]:
        """The hybrid kinds' names, in layer order ('sliding-window', 'linear-attention state', ...)."""
        names: dict[str, None] = {}
        for layer in self.layers:
            for c in layer.caches:
                if isinstance(c, HYBRID_KINDS):
                    names[str(getattr(c, "kind_name", c.label))] = None
        return tuple(names)

    @property
    def is_dsa(self) -> bool:
        return self.is_mla and self.index_topk > 0 and self.index_head_dim > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def has_indexer(self) -> bool:
        return self.is_dsa

    @property
    def attention(self) -> FullAttention | MlaLatent:
        """The attention cache of a uniform model's layers (from the fields; a hybrid's kinds are in ``layers``)."""
        if self.is_mla:
            return MlaLatent(self.kv_lora_rank, self.qk_rope_head_dim)
        return FullAttention(self.num_kv_heads, self.head_dim, self.v_head_dim or self.head_dim,
                             self.num_attention_heads)  # fmt: skip

    @property
    def indexer(self) -> IndexerK | None:
        return IndexerK(self.index_head_dim, self.index_kpool) if self.is_dsa else None

    def uniform_layers(self) -> tuple[Layer, ...]:
        """Every layer the same attention, plus indexer K on the full layers: a uniform model's ``layers``."""
        att, idx = self.attention, self.indexer
        out = []
        for i in range(self.num_layers):
            full = idx is not None and i < len(self.indexer_full) and self.indexer_full[i]
            out.append(Layer(i, (att, idx) if full and idx is not None else (att,)))
        return tuple(out)

    @property
    def kind_label(self) -> str:
        """'DSA', 'MLA' or the full-attention label ('GQA', 'MHA', 'MQA'); a hybrid adds its kinds."""
        if not self.is_hybrid:
            return "DSA" if self.is_dsa else self.attention.label
        plain = (FullAttention, MlaLatent)
        uniform = {c.label: None for layer in self.layers for c in layer.caches if type(c) in plain}
        return " + ".join((*uniform, *self.hybrid_kinds))

    @property
    def full_indexer_layers(self) -> int:
        """Layers that own an indexer K: the DSA full layers, or a hybrid's indexer layers (DeepSeek-V4's C4)."""
        if self.is_hybrid:
            return sum(1 for layer in self.layers if layer.indexer is not None)
        return sum(self.indexer_full) if self.is_dsa else 0

    @property
    def shared_indexer_layers(self) -> int:
        if self.is_hybrid:  # the attention layers without their own indexer K (never a linear-state layer)
            return sum(1 for layer in self.layers if layer.indexer is None and isinstance(layer.caches[0], MlaLatent))
        return self.num_layers - self.full_indexer_layers if self.is_dsa else 0

    @property
    def full_layer_ids(self) -> tuple[int, ...]:
        if self.is_hybrid:
            return tuple(layer.index for layer in self.layers if layer.indexer is not None)
        return tuple(i for i, f in enumerate(self.indexer_full) if f)

    @property
    def total_params(self) -> int:
        return sum(g.params for g in self.param_groups)

    @property
    def weights_said(self) -> str:
        """How the weights were counted; a preset's groups laid out on first use say it once laid out (reading
        this lays them out: ask it only of an estimate)."""
        deferred = getattr(self.param_groups, "summary", None)  # kvplan.models.preset_weights.DeferredGroups
        return deferred if isinstance(deferred, str) else self.weights_summary

    def estimated_weights_per_gpu(
        self, split: Split, *, with_mtp: bool = False, engine: str | None = None, moe_backend: str | None = None
    ) -> int:
        """Checkpoint bytes on one GPU; the MTP layer counts only when speculative decoding loads it; with an
        ``engine``, what it holds beyond the checkpoint at load too (kvplan.models.additions), and MXFP4 experts
        as ``moe_backend`` lays them out (kvplan.models.mxfp4_moe)."""
        groups = (g for g in self.param_groups if with_mtp or g.name != "mtp")
        return sum(g.bytes_on(split, engine=engine, with_mtp=with_mtp, moe_backend=moe_backend) for g in groups)

    def measured_weights_for(self, split: Split) -> WeightPoint | None:
        """The measured point of the same effective split (not the same knobs: ep=8 on TP8 is TP8's split)."""
        for p in self.measured_weights:
            if p.split == split:
                return p
        return None
