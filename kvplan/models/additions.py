"""What an engine holds on the GPU after loading a checkpoint, beyond the checkpoint's own tensors.

The figure this completes is the engine's own load line: vLLM ``Model loading took X GiB`` (``DeviceMemoryProfiler``
around ``GPUModelRunner.load_model``: the torch-allocated bytes after the load minus before, so loader temporaries
that are freed do not count and the speculative drafter, loaded inside the same block, does) and SGLang ``Load
weight end ... mem usage=X GB`` (the drop in free device memory across ``ModelRunner.load_model``). Each term is
modelled only where the engine's source shows it, citing the file and function (listed above ``engine_additions``).

Not modelled (no source read shows them in the load figure): loader buffers that are freed before the line is
printed, expert-layout shuffles that replace (not copy) the checkpoint tensors.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from kvplan import limits
from kvplan.errors import ConfigError
from kvplan.models.arch import ParamGroup, PipelineStage, Split
from kvplan.models.config_tensors import FP8_BLOCK, config_int, config_tensors, mtp_ships_embed_head
from kvplan.models.quant import resolve
from kvplan.models.sharding import VOCAB_PADDING, shard

ENGINES = ("vllm", "sglang")
VLLM_MAX_NUM_BATCHED_TOKENS = 8192
"""vLLM's ``max_num_batched_tokens`` under ``vllm serve`` on a GPU of 70 GiB or more that is not an A100
(``engine/arg_utils.py``; reference/vllm-0.33.0.md section 6)."""
VLLM_MAX_NUM_SEQS = 1024
"""vLLM's ``max_num_seqs`` default on the same GPUs (same table)."""


@dataclass(frozen=True)
class Addition:
    """Bytes one rank holds after the load that the checkpoint sum does not say (negative: loaded less)."""

    name: str
    bytes: int
    source: str
    """The engine file and function it is read from."""


@dataclass(frozen=True, kw_only=True)
class Knobs:
    """The deployment knobs the additions depend on."""

    engine: str
    split: Split
    with_mtp: bool = False
    speculative_tokens: int = 0
    max_num_batched_tokens: int = VLLM_MAX_NUM_BATCHED_TOKENS
    max_num_seqs: int = VLLM_MAX_NUM_SEQS
    indexer_layers_shipped: int | None = None
    """Decoder layers (MTP excluded) whose indexer weights the checkpoint holds; None: every layer (what
    config_tensors.config_tensors derives). A snapshot's headers say how many it really ships."""


def _dtype_bytes(config: Mapping[str, Any]) -> int:
    """The model dtype's bytes (the buffers' dtype): fp32 4, anything else 2 (bf16/fp16, the engines' default)."""
    dt = str(config.get("torch_dtype", config.get("dtype", "bfloat16"))).removeprefix("torch.")
    return 4 if dt in ("float32", "fp32") else 2


def _rope_positions(config: Mapping[str, Any]) -> int:
    """Positions of the cos/sin cache: yarn caches original × factor, every other rope max_position_embeddings."""
    rs = config.get("rope_scaling") or config.get("rope_parameters") or {}
    positions = config_int(config, "max_position_embeddings")
    if isinstance(rs, Mapping) and str(rs.get("rope_type", rs.get("type", ""))) in ("yarn", "deepseek_yarn"):
        factor, original = rs.get("factor"), rs.get("original_max_position_embeddings")
        if (
            isinstance(factor, int | float)
            and isinstance(original, int)
            and not isinstance(original, bool)
            and 0 < factor <= 1024
            and 0 < original <= limits.MAX_TOKENS
        ):
            return int(original * factor)
    return positions


def rotary_cache_bytes(config: Mapping[str, Any]) -> int:
    """The cos/sin caches one process builds (``get_rope``: one per distinct rope, shared by every layer)."""
    positions = _rope_positions(config)
    size = _dtype_bytes(config)
    if config.get("kv_lora_rank") is not None:
        caches = 1
        if config.get("index_topk") and not config.get("indexer_rope_interleave", False):
            caches = 2  # indexer_rope_emb is neox-style: a second cache
        return caches * positions * config_int(config, "qk_rope_head_dim") * size
    h, heads = config_int(config, "hidden_size"), config_int(config, "num_attention_heads")
    head_dim = config_int(config, "head_dim") or (h // heads if heads else 0)
    factor = config.get("partial_rotary_factor", 1)
    if isinstance(factor, bool) or not isinstance(factor, int | float) or not 0 < factor <= 1:
        factor = 1
    return positions * int(head_dim * factor) * size


def _indexer_layers(config: Mapping[str, Any]) -> tuple[int, int]:
    """(layers that build an indexer in vLLM, layers the checkpoint ships indexer weights for), MTP excluded."""
    layers = config_int(config, "num_hidden_layers")
    if not config.get("index_topk"):
        return 0, 0
    pattern = config.get("index_topk_pattern")
    freq = config_int(config, "index_topk_freq", 1) or 1
    offset = config_int(config, "index_skip_topk_offset", 2)
    if isinstance(pattern, str) and pattern:
        built = sum(1 for i in range(layers) if not (i < len(pattern) and pattern[i] == "S"))
    else:
        built = sum(1 for i in range(layers) if max(i - offset + 1, 0) % freq == 0)
    return built, layers


# The terms, engine by engine.
#
# vLLM (``vllm/model_executor/models/deepseek_v2.py``, ``layers/attention/mla_attention.py``,
# ``layers/rotary_embedding``, ``v1/worker/gpu_model_runner.py``; the stored tree, commit 002d6073):
#
# - ``rotary_cache``: ``get_rope`` builds one ``cos_sin_cache`` buffer per distinct (dim, positions, rope
#   parameters, neox style), max positions × rotary dim in the model dtype, shared by every layer. MLA/DSA models
#   build the MLA rope (``is_neox_style=False``) and, for a DSA indexer, ``indexer_rope_emb`` with
#   ``is_neox_style = not indexer_rope_interleave``: the same cache when the config sets ``indexer_rope_interleave``
#   (GLM-5.x), a second one otherwise (DeepSeek-V3.2). Yarn (``rope_scaling.factor`` with
#   ``original_max_position_embeddings``) sizes it original × factor. GQA models: one cache of ``head_dim ×
#   partial_rotary_factor``.
# - ``mla_absorbed``: ``MLACommonImpl.process_weights_after_loading`` dequantizes a quantized ``kv_b_proj``
#   (``get_and_maybe_dequant_weights``) to a new bf16 tensor whose views are ``W_UV`` and ``W_UK_T``; ``kv_b_proj``
#   stays loaded. Per MLA layer: kv_lora_rank × heads per attention rank × (qk_nope + v_head_dim) × 2 B. A bf16
#   ``kv_b_proj`` is viewed, not copied (no addition).
# - ``topk_indices_buffer``: ``DeepseekV2Model.__init__`` allocates max_num_batched_tokens × index_topk int32 on a
#   DSA model; the MTP module allocates its own (``models/deepseek_v32/nvidia/mtp.py``).
# - ``physical_topk_indices``: one (rows + 1) × index_topk int32 a DSA index group (one a layer that builds an
#   indexer), rows = min(max_num_batched_tokens, max_num_seqs × (1 + speculative tokens))
#   (``v1/attention/backends/mla/index_group.py``, built with the model).
# - ``indexer_not_built`` (negative): with ``index_topk_freq`` > 1 or an ``index_topk_pattern`` only the layers that
#   keep top-k build an ``Indexer`` (``DeepseekV2MLAAttention.__init__``: ``not _skip_topk or is_mtp_layer``), and
#   ``DeepseekV2Model.load_weights`` drops the other layers' indexer weights ("this layer has no indexer").
# - ``indexer_wk_bf16``: ``Indexer.wk_weights_proj`` fuses ``wk`` and ``weights_proj`` in bf16 (``quant_config=None``;
#   ``_try_load_fp8_indexer_wk`` dequantizes an fp8 ``wk``): index_head_dim × hidden × 2 B instead of the
#   checkpoint's fp8 ``wk`` and its block scales, on every layer that builds an indexer.
# - MTP (``num_nextn_predict_layers``) with speculative decoding: the drafter is loaded inside the same
#   ``DeviceMemoryProfiler`` block (``GPUModelRunner.load_model``: ``self.drafter.load_model(self.model)``), and
#   ``EagleProposer.load_model`` shares the target's ``embed_tokens`` and ``lm_head`` with an MTP drafter ("Detected
#   MTP model. Sharing target model embedding weights with the draft model"): the layer's own copies are freed
#   (``mtp_shared_head`` removes them from the checkpoint sum).
#
# SGLang (``python/sglang/srt/models/deepseek_v2.py``):
#
# - ``rotary_cache``: as vLLM (``get_rope``, one cache per distinct rope).
# - ``mla_absorbed``: ``DeepseekV2ForCausalLM.post_load_weights`` makes ``w_kc = w_kc.transpose(1, 2).contiguous()
#   .transpose(1, 2)`` and ``w_vc = w_vc.contiguous().transpose(1, 2)`` from ``kv_b_proj`` (block-fp8 dequantized to
#   bf16 first; ``SGL_USE_DEEPGEMM_BMM`` off by default): two new bf16 tensors whatever the checkpoint dtype, and
#   ``kv_b_proj`` stays. Per MLA layer (and the nextn layer when it is loaded): kv_lora × heads per attention rank ×
#   (qk_nope + v) × 2 B.


def engine_additions(config: Mapping[str, Any], knobs: Knobs) -> tuple[Addition, ...]:
    """The terms above for ``knobs.engine`` on rank 0 of ``knobs.split`` (terms of 0 bytes left out)."""
    if knobs.engine not in ENGINES:
        raise ConfigError(f"engine {knobs.engine!r}: expected one of {', '.join(ENGINES)}", key="engine")
    out: list[Addition] = []
    vllm = knobs.engine == "vllm"
    rope_src = (
        "vllm layers/rotary_embedding get_rope (cos_sin_cache, cached per rope)"
        if vllm
        else "sglang srt/layers/rotary_embedding.py get_rope (cos_sin_cache, cached per rope)"
    )
    out.append(Addition("rotary_cache", rotary_cache_bytes(config), rope_src))
    if config.get("kv_lora_rank") is None:
        return tuple(a for a in out if a.bytes)
    mtp = config_int(config, "num_nextn_predict_layers") if knobs.with_mtp else 0
    mla_layers = config_int(config, "num_hidden_layers") + mtp
    if mtp and mtp_ships_embed_head(config):
        out.append(_mtp_embed_head(config, knobs, mtp))
    heads_here = -(-config_int(config, "num_attention_heads") // max(knobs.split.attention, 1))
    absorbed = (
        config_int(config, "kv_lora_rank")
        * heads_here
        * (config_int(config, "qk_nope_head_dim", 128) + config_int(config, "v_head_dim", 128))
        * 2
    )
    quant = resolve(config, "config.json")
    kv_b_quantized = quant.scheme_for("model.layers.0.self_attn.kv_b_proj").weight_bits < 16
    if not vllm:
        out.append(
            Addition(
                "mla_absorbed",
                mla_layers * absorbed,
                "sglang srt/models/deepseek_v2.py DeepseekV2ForCausalLM.post_load_weights (w_kc, w_vc bf16 copies)",
            )
        )
        return tuple(a for a in out if a.bytes)
    if kv_b_quantized:
        out.append(
            Addition(
                "mla_absorbed",
                mla_layers * absorbed,
                "vllm layers/attention/mla_attention.py process_weights_after_loading (W_UV/W_UK_T: bf16 kv_b_proj)",
            )
        )
    if not config.get("index_topk"):
        return tuple(a for a in out if a.bytes)
    out += _vllm_dsa(config, knobs, quant, mtp)
    return tuple(a for a in out if a.bytes)


def _mtp_embed_head(config: Mapping[str, Any], knobs: Knobs, mtp: int) -> Addition:
    """The MTP layers' embedding and head, shared with the target's where the checkpoint ships its own copies."""
    vllm = knobs.engine == "vllm"
    rows = -(-config_int(config, "vocab_size") // VOCAB_PADDING) * VOCAB_PADDING
    each = config_int(config, "hidden_size") * _dtype_bytes(config)
    embed = -(-rows // max(knobs.split.attention, 1)) * each + -(-rows // max(knobs.split.tp, 1)) * each
    return Addition(
        "mtp_shared_embed_head",
        -mtp * embed,
        "vllm v1/spec_decode/eagle.py EagleProposer.load_model (MTP: target embed_tokens and lm_head shared)"
        if vllm
        else "sglang srt/models/deepseek_nextn.py (the nextn layer uses the target's embed and head)",
    )


def _vllm_dsa(config: Mapping[str, Any], knobs: Knobs, quant: Any, mtp: int) -> list[Addition]:
    """vLLM's DSA buffers and the indexer weights as it builds them (top-k indices, layers not built, wk in bf16)."""
    out: list[Addition] = []
    topk = config_int(config, "index_topk")
    buffers = 1 + (1 if mtp else 0)
    out.append(
        Addition(
            "topk_indices_buffer",
            buffers * knobs.max_num_batched_tokens * topk * 4,
            "vllm models/deepseek_v2.py DeepseekV2Model.__init__ (+ the MTP module's own)",
        )
    )
    built, shipped = _indexer_layers(config)
    if knobs.indexer_layers_shipped is not None:
        shipped = knobs.indexer_layers_shipped
    mtp_indexers = mtp
    rows = min(knobs.max_num_batched_tokens, knobs.max_num_seqs * (1 + knobs.speculative_tokens))
    out.append(
        Addition(
            "physical_topk_indices",
            (built + mtp_indexers) * (rows + 1) * topk * 4,
            "vllm v1/attention/backends/mla/index_group.py (one (rows + 1) × index_topk int32 an index group)",
        )
    )
    h = config_int(config, "hidden_size")
    idx_dim = config_int(config, "index_head_dim", 128)
    idx_heads = config_int(config, "index_n_heads")
    q_in = config_int(config, "q_lora_rank") or h
    indexer_layer = _indexer_bytes(quant, h, q_in, idx_heads, idx_dim)
    out.append(
        Addition(
            "indexer_not_built",
            -max(shipped - built, 0) * indexer_layer,
            "vllm models/deepseek_v2.py DeepseekV2MLAAttention.__init__ (_skip_topk) and load_weights",
        )
    )
    wk = quant.scheme_for("model.layers.0.self_attn.indexer.wk")
    wk_ckpt = int(wk.bytes_for(idx_dim, h)) if wk.weight_bits < 16 else idx_dim * h * 2
    out.append(
        Addition(
            "indexer_wk_bf16",
            (built + mtp_indexers) * (idx_dim * h * 2 - wk_ckpt),
            "vllm models/deepseek_v2.py Indexer.wk_weights_proj (bf16) and _try_load_fp8_indexer_wk",
        )
    )
    return out


def _indexer_bytes(quant: Any, h: int, q_in: int, heads: int, dim: int) -> int:
    """Checkpoint bytes of one layer's indexer (replicated): wq_b, wk in their scheme, weights_proj and k_norm in
    the checkpoint dtype (as config_tensors.config_tensors lays them out)."""
    total = 0
    for module, rows, cols in (("wq_b", heads * dim, q_in), ("wk", dim, h)):
        s = quant.scheme_for(f"model.layers.0.self_attn.indexer.{module}")
        if s.weight_bits == 8 and s.values_per_scale == FP8_BLOCK * FP8_BLOCK:
            total += rows * cols + -(-rows // FP8_BLOCK) * -(-cols // FP8_BLOCK) * 4
        else:
            total += int(s.bytes_for(rows, cols))
    plain: int = quant.plain.weight_bits // 8  # the checkpoint dtype: bf16 / fp16 2 B, float32 4 B
    return total + heads * h * plain + 2 * dim * plain


@dataclass(frozen=True, kw_only=True)
class LoadFigure:
    """The engine's load figure for one rank: the checkpoint's bytes there plus the engine's additions."""

    checkpoint_bytes: int
    additions: tuple[Addition, ...]

    @property
    def bytes(self) -> int:
        return self.checkpoint_bytes + sum(a.bytes for a in self.additions)


def load_figure(config: Mapping[str, Any], knobs: Knobs, *, ep: int = 1, source: str = "config.json") -> LoadFigure:
    """Weights per GPU as the engine's load line reports them, from ``config.json`` alone.

    The checkpoint part is every tensor :func:`config_tensors.config_tensors` derives, placed by
    :func:`sharding.shard`; a config it cannot lay out per tensor raises ConfigError (the caller falls back to
    parameter groups).
    """
    tensors = config_tensors(config, source, runs=True)
    if tensors is None:
        raise ConfigError("kvplan cannot lay this config out per tensor", source=source)
    s = shard(
        tensors,
        knobs.split,
        num_layers=config_int(config, "num_hidden_layers"),
        num_kv_heads=config_int(config, "num_key_value_heads"),
        ep=ep,
        with_mtp=knobs.with_mtp,
    )
    return LoadFigure(checkpoint_bytes=s.bytes, additions=engine_additions(config, knobs))


@dataclass(frozen=True, kw_only=True)
class AdditionsGroup(ParamGroup):
    """The engine's additions as a parameter group of no parameters: 0 B without an engine, :func:`engine_additions`
    for vLLM or SGLang (with the split and whether the MTP drafter is loaded). ModelArch.estimated_weights_per_gpu
    adds it when the planner names the engine, so the planner's weights are the published-table test's."""

    config: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False, repr=False)
    indexer_layers_shipped: int | None = None
    _memo: dict[tuple[Split, str, bool], int] = field(default_factory=dict, compare=False, hash=False, repr=False)

    def bytes_per_gpu(self, split: Split) -> int:
        return 0

    def bytes_on(self, split: Split, *, engine: str | None, with_mtp: bool, moe_backend: str | None = None) -> int:
        if engine not in ENGINES:
            return 0
        key = (split, engine, with_mtp)
        if key not in self._memo:
            knobs = Knobs(
                engine=engine, split=split, with_mtp=with_mtp, indexer_layers_shipped=self.indexer_layers_shipped
            )
            self._memo[key] = sum(a.bytes for a in engine_additions(self.config, knobs))
        return self._memo[key]

    def for_stage(self, stage: PipelineStage) -> AdditionsGroup:
        """The engine's additions of the stage's layers (the per-MLA-layer absorbed copies, the indexer terms);
        the rotary cache stays one a process."""
        config = {**self.config, "num_hidden_layers": stage.layers}
        pattern = config.get("index_topk_pattern")
        if isinstance(pattern, str):
            config["index_topk_pattern"] = pattern[stage.start : stage.end]
        shipped = self.indexer_layers_shipped
        if shipped is not None:
            shipped = -(-shipped * stage.layers // max(stage.model_layers, 1))
        return replace(self, config=config, indexer_layers_shipped=shipped, _memo={})

    def in_dtype(self, stored: int, loaded: int) -> AdditionsGroup:
        """Built in the model dtype: ``get_rope`` takes torch's default dtype, which the loaders set to it (vLLM
        ``initialize_model`` / SGLang ``DefaultModelLoader.load_model``: ``set_default_torch_dtype``)."""
        return self.with_config({"torch_dtype": "float32" if loaded == 4 else "bfloat16"})

    def with_config(self, override: Mapping[str, Any]) -> AdditionsGroup:
        """A snapshot's engine additions read the overridden config (they size the rotary cache themselves)."""
        return replace(self, config={**self.config, **override}, _memo={})


def additions_group(config: Mapping[str, Any], *, indexer_layers_shipped: int | None = None) -> AdditionsGroup:
    return AdditionsGroup(
        name="engine_additions",
        params=0,
        bytes_per_param_num=0,
        split="none",
        config=dict(config),
        indexer_layers_shipped=indexer_layers_shipped,
    )
