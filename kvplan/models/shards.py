"""What the engines' loaders split by tp and ep, from config.json (pure data; the checks are
kvplan.engines.load_checks).

A model loads only if each shard it splits is whole: the query and kv heads over the attention TP ranks, the
experts over the EP ranks, and, in an fp8 checkpoint quantized in blocks (``quant_method: fp8`` with
``weight_block_size`` [block_n, block_k]), each projection's slice a whole number of blocks. ``shard_dims``
reads the widths those checks divide, leniently (the loaders have already validated the fields they read; a
field that is missing or not a plain non-negative integer counts as 0 here), and which of the three module
families (attention, dense MLP, routed experts) the checkpoint stores in fp8 blocks, by the same
``modules_to_not_convert`` matching the weights use (kvplan.models.quant).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvplan import limits, record
from kvplan.models.quant import resolve

Block = tuple[int, int]
"""(block_n, block_k): output rows and input columns of one fp8 scale block."""


@record(kw_only=True)
class ShardDims:
    num_attention_heads: int
    num_kv_heads: int
    """Full attention's ``num_key_value_heads``; 0 for MLA (one latent, replicated on every rank)."""
    head_dim: int
    """Query / output head width of full attention (o_proj takes heads × head_dim inputs); 0 for MLA."""
    mla_head_dims: tuple[int, int, int] = (0, 0, 0)
    """MLA's per-head widths (qk_nope, qk_rope, v): q_b_proj outputs heads × (nope + rope), kv_b_proj heads × (nope +
    v), o_proj takes heads × v; zeros for full attention."""
    dense_intermediate: int
    """The dense MLP width of the dense layers (``intermediate_size``); 0 when every layer is MoE."""
    expert_intermediate: int
    """One routed expert's width (``moe_intermediate_size``; Mixtral ``intermediate_size``); 0 for a dense model."""
    num_experts: int
    """Routed experts (``num_experts``, ``n_routed_experts``, ``num_local_experts``); 0 for a dense model."""
    first_layer_dense: bool
    """Layer 0's MLP is dense: the engines build it before any MoE layer, so its refusal is the one raised."""
    moe_block_precheck: tuple[int, int] | None = None
    """(``moe_intermediate_size``, ``weight_block_size[0]``) when the config has both keys, whatever the quant
    method and ignore list: what SGLang 0.5.4-0.5.5's ModelRunner pre-check reads (kvplan.engines.load_checks)."""
    attention_block: Block | None = None
    dense_block: Block | None = None
    expert_block: Block | None = None
    """fp8 block shape of each family's linear weights; None where they are not stored in fp8 blocks."""


def _int(config: Mapping[str, Any], key: str) -> int:
    v = config.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= limits.MAX_DIM:
        return 0
    return v


def _block(config: Mapping[str, Any]) -> Block | None:
    """``weight_block_size`` of an fp8 ``quantization_config`` ([n, k]; one value: square), else None."""
    q = config.get("quantization_config")
    if not isinstance(q, Mapping) or str(q.get("quant_method", "")).lower() != "fp8":
        return None
    raw = q.get("weight_block_size")
    if not isinstance(raw, list) or not 1 <= len(raw) <= 2:
        return None
    if not all(isinstance(v, int) and not isinstance(v, bool) and 0 < v <= limits.MAX_DIM for v in raw):
        return None
    n, k = [*raw, raw[0]][:2]
    return n, k


def _precheck(config: Mapping[str, Any]) -> tuple[int, int] | None:
    q = config.get("quantization_config")
    raw = q.get("weight_block_size") if isinstance(q, Mapping) else None
    moe = _int(config, "moe_intermediate_size")
    if not moe or not isinstance(raw, list) or not raw or not isinstance(raw[0], int) or isinstance(raw[0], bool):
        return None
    return (moe, raw[0]) if 0 < raw[0] <= limits.MAX_DIM else None


def shard_dims(config: Mapping[str, Any], source: str = "config.json") -> ShardDims | None:
    """The split dimensions of a config.json (or a preset's ``config:``); None without attention heads.

    >>> d = shard_dims({"num_attention_heads": 64, "num_key_value_heads": 4, "head_dim": 128,
    ...                 "num_experts": 128, "moe_intermediate_size": 1536, "intermediate_size": 12288,
    ...                 "num_hidden_layers": 94, "quantization_config": {"quant_method": "fp8",
    ...                 "weight_block_size": [128, 128]}})
    >>> (d.expert_intermediate, d.num_experts, d.dense_intermediate, d.expert_block)
    (1536, 128, 0, (128, 128))
    >>> shard_dims({"num_attention_heads": 64, "num_experts": 8, "moe_intermediate_size": 1536, "expert_dtype": "fp4",
    ...             "num_hidden_layers": 2, "quantization_config": {"quant_method": "fp8",
    ...             "weight_block_size": [128, 128]}}).expert_block is None
    True
    """
    heads = _int(config, "num_attention_heads")
    if not heads:
        return None
    mla = _int(config, "kv_lora_rank") > 0
    hidden = _int(config, "hidden_size")
    mixtral = _int(config, "num_local_experts")
    experts = mixtral or _int(config, "num_experts") or _int(config, "n_routed_experts")
    inter = _int(config, "intermediate_size")
    expert_inter = (inter if mixtral else _int(config, "moe_intermediate_size")) if experts else 0
    layers = _int(config, "num_hidden_layers")
    dense_first = _int(config, "first_k_dense_replace")
    step = _int(config, "decoder_sparse_step") or 1
    raw_only = config.get("mlp_only_layers")
    only = {v for v in raw_only if isinstance(v, int)} if isinstance(raw_only, list) else set()

    def is_moe(i: int) -> bool:  # kvplan.models.weights._gqa_groups' rule (Qwen3-MoE step / mlp_only, GLM dense-first)
        return bool(expert_inter) and i >= dense_first and i not in only and (i + 1) % step == 0

    moe_layers = [i for i in range(layers) if is_moe(i)]
    dense_layers = [i for i in range(layers) if not is_moe(i)]
    block = _block(config)
    quant = resolve(config, source) if block is not None else None

    def family_block(names: list[str]) -> Block | None:
        """The block, when some layer's module of the family is stored in fp8 blocks (the first one refuses); not
        where it stays in the checkpoint dtype or another scheme wins (DeepSeek-V4's ``expert_dtype: fp4``)."""
        if quant is None or block is None:
            return None
        fp8 = [quant.scheme_for(n) for n in names]
        return block if any(s.weight_bits == 8 and s.values_per_scale == block[0] * block[1] for s in fp8) else None

    moe = "block_sparse_moe" if mixtral else "mlp"
    down = "w2" if mixtral else "down_proj"
    nope, v = _int(config, "qk_nope_head_dim") or 128, _int(config, "v_head_dim") or 128
    return ShardDims(
        num_attention_heads=heads,
        num_kv_heads=0 if mla else _int(config, "num_key_value_heads") or heads,
        head_dim=0 if mla else _int(config, "head_dim") or (hidden // heads),
        # the loader's defaults (kvplan.models.from_hf): qk_nope and v 128 when the config leaves them out
        mla_head_dims=(nope, _int(config, "qk_rope_head_dim"), v) if mla else (0, 0, 0),
        dense_intermediate=inter if dense_layers else 0,
        expert_intermediate=expert_inter,
        num_experts=experts if expert_inter else 0,
        first_layer_dense=not is_moe(0),
        moe_block_precheck=_precheck(config),
        attention_block=family_block([f"model.layers.{i}.self_attn.o_proj" for i in range(layers)]),
        dense_block=family_block([f"model.layers.{i}.mlp.down_proj" for i in dense_layers]),
        expert_block=family_block([f"model.layers.{i}.{moe}.experts.0.{down}" for i in moe_layers]),
    )
