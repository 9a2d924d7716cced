"""Hybrid models from their Hugging Face config: each layer's cache kinds, as the engines read the config.

| architecture          | layers (config fields)                                                             |
|-----------------------|------------------------------------------------------------------------------------|
| GptOssForCausalLM     | ``layer_types`` sliding / full, ``sliding_window``; attention sinks (no cache)      |
| Qwen3NextForCausalLM  | ``layer_types`` (else every ``full_attention_interval``-th full), GDN ``linear_*``  |
| Qwen3_5(Moe)For…      | Qwen3.5 / 3.6 / 3.8: Qwen3-Next's fields in ``text_config`` (kvplan.models.from_hf) |
| KimiLinearForCausalLM | ``linear_attn_config`` ``kda_layers`` / ``full_attn_layers`` (1-based), MLA on full |
| DeepseekV4ForCausalLM | ``compress_ratios`` (0 window, 4 CSA + indexer, 128 HCA), ``sliding_window``        |
| Glm5NextForConditionalGeneration | GLM-5.3-Flash ``text_config``: KDA ``kda_layers`` (0-based), MLA + pooled indexer |

Each rule cites the engine code that reads the same fields; the engines' hybrid chains pool these kinds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvplan import limits
from kvplan.models import validate
from kvplan.models.activation import activation_dims
from kvplan.models.arch import QWEN3_NEXT_FAMILY, IndexerRule, ModelArch
from kvplan.models.cache import (
    CacheKind,
    CompressedAttention,
    FullAttention,
    IndexerK,
    Layer,
    LinearState,
    MlaLatent,
    SlidingWindow,
)
from kvplan.models.weights import hybrid_groups, param_groups_from_hf

if TYPE_CHECKING:
    from kvplan.models.reader import Reader

_SLIDING, _FULL, _LINEAR = "sliding_attention", "full_attention", "linear_attention"
NOT_MODELLED_WEIGHTS = (
    "the parameters of this architecture are not counted yet (kvplan models its caches only): give"
    " weights_per_gpu to plan with it",
)

VISION_NOT_COUNTED = (
    "the vision tower (vision_config) is not counted: both engines load it beside the language model (about"
    " 0.46 B parameters for Qwen3.5/3.6-27B's 27 blocks of 1152), so weights per GPU read low by its share"
)


def sliding_layers(
    r: Reader, num_layers: int, architecture: str, *, heads: int, kv_heads: int, head_dim: int
) -> tuple[Layer, ...]:
    """A full-attention model's layers when ``layer_types`` marks some of them sliding; () when none slides.

    gpt-oss (openai/gpt-oss ``gpt_oss/torch/model.py`` ``AttentionBlock``: "Only apply sliding window to every
    other layer", ``config.sliding_window if layer_idx % 2 == 0``, the layers the config's ``layer_types`` marks
    "sliding_attention"; ``self.sinks``, one learned logit per head on every layer: parameters, not cache). A
    ``sliding_window`` without ``layer_types`` (Mistral, Qwen2 with ``use_sliding_window``) does not say which
    layers slide the same way in every family: it stays refused.
    """
    types = r.get_str_list("layer_types", (_FULL, _SLIDING))
    window = r.data.get("sliding_window")
    active = window is not None and r.data.get("use_sliding_window", True) is not False
    if types is None:
        if active:
            r.fail(
                "sliding_window",
                f"{window!r}: sliding-window attention without layer_types is not modelled yet (kvplan reads"
                " which layers slide from layer_types: sliding_attention / full_attention)",
            )
        return ()
    if len(types) != num_layers:
        r.fail("layer_types", f"has {len(types)} entries for {num_layers} layers")
    if _SLIDING not in types:
        return ()
    if architecture == "unknown":  # SGLang picks its hybrid-SWA pools by model class (is_hybrid_swa_model)
        r.fail("architectures", "missing: layer_types marks sliding layers, and the engines pool them by model class")
    w = r.get_int("sliding_window", required=True, maximum=limits.MAX_TOKENS)
    full = FullAttention(kv_heads, head_dim, head_dim, heads)
    sliding = SlidingWindow(kv_heads, head_dim, head_dim, heads, window=w, sinks=architecture == "GptOssForCausalLM")
    return tuple(Layer(i, (sliding if t == _SLIDING else full,)) for i, t in enumerate(types))


def from_hf(r: Reader, *, name: str, source: str, description: str, architecture: str, num_layers: int) -> ModelArch:
    """Qwen3-Next, Kimi-Linear, DeepSeek-V4 or GLM-5.3-Flash from its config.json."""
    if architecture == "Glm5NextForConditionalGeneration":
        return _glm5_next(r, name=name, source=source, description=description, num_layers=num_layers)
    if architecture in QWEN3_NEXT_FAMILY:
        # Qwen3.5 / 3.6 / 3.8 (qwen3_5 dense, qwen3_5_moe): Qwen3-Next's GDN + gated attention layers (vLLM
        # qwen3_5.py / qwen3_5_moe.py and SGLang models/qwen3_5.py build the GDN layers and their state as
        # Qwen3-Next's; SGLang lists them in _MAMBA_EXTRA_BUFFER_ARCHS): planned as that family; vLLM reads the
        # ...ForConditionalGeneration classes' mamba_ssm_dtype (MODELS_CONFIG_MAP)
        return _qwen3_next(r, name=name, source=source, description=description, num_layers=num_layers,
                           architecture=architecture)  # fmt: skip
    if architecture == "KimiLinearForCausalLM":
        return _kimi_linear(r, name=name, source=source, description=description, num_layers=num_layers)
    return _deepseek_v4(r, name=name, source=source, description=description, num_layers=num_layers)


def _dim(r: Reader, key: str, **kw: Any) -> int:
    return int(r.get_int(key, maximum=limits.MAX_DIM, **kw))


def _common(
    r: Reader, *, name: str, source: str, description: str, architecture: str, num_layers: int
) -> dict[str, Any]:
    weights: dict[str, Any] = {"weights_assumptions": NOT_MODELLED_WEIGHTS}
    if hybrid_groups(architecture) is not None:  # the family's parameters are counted (kvplan.models.params_*)
        w = param_groups_from_hf(r.data, source, fail=r.fail)
        weights = {"param_groups": w.groups, "weights_summary": w.summary, "weights_assumptions": w.assumptions}
    return {
        "name": name,
        "source": source,
        "description": description,
        "architecture": architecture,
        "num_layers": num_layers,
        "num_mtp_layers": r.get_int("num_nextn_predict_layers", default=0, minimum=0, maximum=limits.MAX_LAYERS),
        # Kimi-Linear's config names its context only as model_max_length, a key both engines read when
        # max_position_embeddings is absent (vLLM _get_and_verify_max_len, SGLang CONTEXT_LENGTH_KEYS)
        "max_position_embeddings": r.get_tokens("max_position_embeddings", required=not r.has("model_max_length"))
        or r.get_tokens("model_max_length", required=True),
        "activation": activation_dims(r.data),
        **weights,
    }


def _qwen3_next(
    r: Reader, *, name: str, source: str, description: str, num_layers: int, architecture: str
) -> ModelArch:
    """Gated DeltaNet layers and gated full attention (vLLM ``qwen3_next.py``
    ``get_mamba_state_shape_from_config``: ``linear_num_key_heads``, ``linear_num_value_heads``,
    ``linear_key_head_dim``, ``linear_value_head_dim``, ``linear_conv_kernel_dim``). Which layers are full:
    ``layer_types``, else every ``full_attention_interval``-th (layer i full iff (i + 1) % interval == 0, the
    default ``Qwen3NextConfig`` builds)."""
    types = r.get_str_list("layer_types", (_LINEAR, _FULL))
    if types is not None and len(types) != num_layers:
        r.fail("layer_types", f"has {len(types)} entries for {num_layers} layers")
    if types is None:
        interval = r.get_int("full_attention_interval", default=4, maximum=limits.MAX_LAYERS)
        types = tuple(_FULL if (i + 1) % interval == 0 else _LINEAR for i in range(num_layers))
    if _FULL not in types:
        _no_attention(r, "layer_types" if r.has("layer_types") else "full_attention_interval", num_layers)
    heads = _dim(r, "num_attention_heads", required=True)
    kv_heads = _dim(r, "num_key_value_heads", default=heads)
    head_dim = _dim(r, "head_dim", required=True)
    full = FullAttention(kv_heads, head_dim, head_dim, heads)
    ssm_dtype = r.get_choice("mamba_ssm_dtype", ("float32", "bfloat16", "float16"))
    vllm_ssm = architecture.endswith("ForConditionalGeneration")  # vLLM MODELS_CONFIG_MAP: Qwen3.5's VLM classes
    state = LinearState(
        "gated_deltanet",
        num_heads=_dim(r, "linear_num_value_heads", required=True),
        num_k_heads=_dim(r, "linear_num_key_heads", required=True),
        head_k_dim=_dim(r, "linear_key_head_dim", required=True),
        head_v_dim=_dim(r, "linear_value_head_dim", required=True),
        conv_kernel=_dim(r, "linear_conv_kernel_dim", required=True),
        mamba_ssm_dtype=ssm_dtype,
        vllm_reads_ssm_dtype=vllm_ssm,
    )
    layers = tuple(Layer(i, (full if t == _FULL else state,)) for i, t in enumerate(types))
    common = _common(_glm5_next_weights_view(r), name=name, source=source, description=description,
                     architecture=architecture, num_layers=num_layers)  # fmt: skip
    # one MTP layer when the config names none, as both engines build it (vLLM qwen3_next_mtp.py:
    # getattr(config, "num_nextn_predict_layers", 1); SGLang configs/model_config.py: the draft-mode config sets
    # num_nextn_predict_layers = 1); the released config.json names none. Qwen3.5's text_config names it
    # mtp_num_hidden_layers (vLLM qwen3_5_mtp.py: getattr(config, "mtp_num_hidden_layers", 1))
    mtp = r.get_int("mtp_num_hidden_layers", default=1, minimum=0, maximum=limits.MAX_LAYERS)
    if vllm_ssm:  # ...ForConditionalGeneration: a VLM to SGLang (is_multimodal), sized by its vision_config
        common["vision_tower"] = _vision_tower(r)
    if r.path and r.path[-1] == "text_config" and common["weights_assumptions"] != NOT_MODELLED_WEIGHTS:
        common["weights_assumptions"] = (*common["weights_assumptions"], VISION_NOT_COUNTED)
    common["num_mtp_layers"] = r.get_int("num_nextn_predict_layers", default=mtp, minimum=0, maximum=limits.MAX_LAYERS)
    return ModelArch(
        **common, num_attention_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim, v_head_dim=head_dim,
        layers=layers,
    )  # fmt: skip


def _vision_tower(r: Reader) -> tuple[int, int] | tuple[()]:
    """(layers, hidden) of the ``vision_config`` beside this ``text_config``, as SGLang reads them (``getattr``
    ``num_hidden_layers`` 24, ``hidden_size`` 1024 by default); () without one."""
    if not r.path or r.path[-1] != "text_config":
        return ()
    outer: Any = r.doc.data
    for key in r.path[:-1]:
        outer = outer[key]
    if not isinstance(outer.get("vision_config"), dict):
        return ()
    v = type(r)(r.doc, (*r.path[:-1], "vision_config"), outer["vision_config"])
    return (_dim(v, "num_hidden_layers", default=24), _dim(v, "hidden_size", default=1024))


def _kimi_linear(r: Reader, *, name: str, source: str, description: str, num_layers: int) -> ModelArch:
    """KDA layers and MLA layers (SGLang ``configs/kimi_linear.py`` ``KimiLinearConfig``: a layer is KDA iff
    ``is_kda_layer``: ``(layer_idx + 1) in kda_layers``, 1-based as the config writes them; the state from
    ``linear_attn_config`` ``num_heads``, ``head_dim``, ``short_conv_kernel_size`` via ``KimiLinearStateShape``;
    the other layers are MLA with ``kv_lora_rank`` + ``qk_rope_head_dim``)."""
    la = r.sub("linear_attn_config")
    kda = _layer_list(la, "kda_layers", num_layers)
    full = _layer_list(la, "full_attn_layers", num_layers)
    if set(kda) & set(full) or len(kda) + len(full) != num_layers:
        la.fail("kda_layers", f"kda_layers and full_attn_layers must name each of the {num_layers} layers once")
    if not full:
        _no_attention(la, "full_attn_layers", num_layers)
    heads, head_dim = _dim(la, "num_heads", required=True), _dim(la, "head_dim", required=True)
    # required: SGLang KimiLinearConfig.mamba2_cache_params and vLLM's get_mamba_state_shape_from_config subscript
    # linear_attn_config["short_conv_kernel_size"] (no default; kvplan assumed 4)
    state = LinearState("kda", heads, heads, head_dim, head_dim, _dim(la, "short_conv_kernel_size", required=True))
    kv_lora_rank = _dim(r, "kv_lora_rank", required=True)
    rope = _dim(r, "qk_rope_head_dim", required=True, minimum=0)
    mla = MlaLatent(kv_lora_rank, rope)
    kda_set = set(kda)
    layers = tuple(Layer(i, ((state,) if i + 1 in kda_set else (mla,))) for i in range(num_layers))
    common = _common(r, name=name, source=source, description=description, architecture="KimiLinearForCausalLM",
                     num_layers=num_layers)  # fmt: skip
    return ModelArch(
        **common, kv_lora_rank=kv_lora_rank, qk_rope_head_dim=rope,
        # KimiLinearConfig's default (vLLM configs/kimi_linear.py, the checkpoint's configuration_kimi.py): 32
        num_attention_heads=_dim(r, "num_attention_heads", default=32),
        # required: KimiLinearConfig (vLLM / SGLang configs/kimi_linear.py) leaves both None, and the MLA layer
        # cannot be built without them (KimiMLAAttention: qk_nope_head_dim + qk_rope_head_dim)
        head_dim=_dim(r, "qk_nope_head_dim", required=True) + rope, v_head_dim=_dim(r, "v_head_dim", required=True),
        layers=layers,
    )  # fmt: skip


def _no_attention(r: Reader, key: str, num_layers: int) -> None:
    """Refuse a hybrid whose every layer is linear-attention state: no attention layer to size a pool by (vLLM's
    hybrid grouping divides by the attention layer count; SGLang's hybrid pools need one full layer)."""
    r.fail(key, f"leaves no attention layer among the {num_layers} layers: kvplan plans this family with at least one")


def _layer_list(r: Reader, key: str, last: int, *, first: int = 1) -> tuple[int, ...]:
    """A list of layer numbers from ``first`` to ``last`` (Kimi-Linear's 1-based ``kda_layers`` /
    ``full_attn_layers``; GLM-5.3-Flash's 0-based ``kda_layers``)."""
    value = r.data.get(key)
    if not isinstance(value, list):
        r.fail(key, f"expected a list of layer numbers ({first}-based)")
    for i, v in enumerate(value):
        if isinstance(v, bool) or not isinstance(v, int) or not first <= v <= last:
            r.fail((key, i), f"expected a layer number from {first} to {last}, got {v!r:.40}")
    return tuple(value)


def _deepseek_v4(r: Reader, *, name: str, source: str, description: str, num_layers: int) -> ModelArch:
    """One 512-wide KV head per layer with a sliding window; ``compress_ratios[i]`` 4 or 128 adds a compressed KV
    (vLLM ``DeepseekV4MultiHeadLatentAttentionWrapper``: ``compress_ratios[layer_id]``, ``sliding_window``), and
    ratio 4 an indexer K on the compressed tokens (``DeepseekV4Indexer``: ``index_head_dim`` fp8 + scale,
    ``compress_ratio`` 4). The list has one more entry per MTP layer; the first ``num_hidden_layers`` are the
    model's."""
    kv_heads = _dim(r, "num_key_value_heads", required=True)
    if kv_heads != 1:
        r.fail("num_key_value_heads", f"{kv_heads}: DeepSeek-V4 attention has one KV head")
    head_dim, rope = _dim(r, "head_dim", required=True), _dim(r, "qk_rope_head_dim", required=True)
    window = r.get_int("sliding_window", required=True, maximum=limits.MAX_TOKENS)
    ratios = validate.compress_ratios(r, num_layers)
    # required: no engine default found for DeepSeek-V4 (every published config names it, 128); kvplan assumed 128
    index_head_dim = _dim(r, "index_head_dim", required=True)
    indexer = IndexerK(index_head_dim, compress_ratio=4)
    layers = []
    for i in range(num_layers):
        ratio = ratios[i] if ratios[i] > 1 else 0
        caches: tuple[CacheKind, ...] = (CompressedAttention(head_dim, rope, window, ratio),)
        layers.append(Layer(i, (*caches, indexer) if ratio == 4 else caches))
    common = _common(r, name=name, source=source, description=description, architecture="DeepseekV4ForCausalLM",
                     num_layers=num_layers)  # fmt: skip
    return ModelArch(
        **common, qk_rope_head_dim=rope, num_attention_heads=_dim(r, "num_attention_heads", required=True),
        num_kv_heads=1, head_dim=head_dim, v_head_dim=head_dim, index_head_dim=index_head_dim,
        # the ratio-4 layers' indexer reads both with no default (as from_hf's DSA models): required, at least 1
        index_n_heads=_dim(r, "index_n_heads", required=True),
        index_topk=r.get_int("index_topk", required=True, maximum=limits.MAX_TOKENS), layers=tuple(layers),
    )  # fmt: skip


def _glm5_next(r: Reader, *, name: str, source: str, description: str, num_layers: int) -> ModelArch:
    """GLM-5.3-Flash (``glm5_next``), as SGLang's ``Glm5NextTextConfig`` reads its ``text_config``:

    - KDA layers: ``linear_attn_config.kda_layers``, **0-based** (``is_kda_layer``: ``layer_idx in kda_layers``,
      unlike Kimi-Linear's 1-based list); without ``linear_attn_config``, the ``layer_types`` entries
      "linear_attention", else every layer with ``layer_idx % 4 != 3``; heads ``num_heads`` (``linear_num_heads``,
      default 64) × ``head_dim`` (``linear_head_dim``, 128), kernel ``short_conv_kernel_size``
      (``linear_conv_kernel_dim``, 4); the state as Kimi-Linear's (``KimiLinearStateShape.create``);
    - the other layers: MLA (``kv_lora_rank`` 512, ``qk_rope_head_dim`` 0 by default) with the DSA indexer K
      pooled over ``index_kpool`` tokens (vLLM: ``tokens_per_state = index_kpool``, one 132 B key per pool), on
      every full layer, or on those ``indexer_types`` marks "full".

    Not modelled: the pooled indexer's compress-tail ring (vLLM ``Glm5NextTailCache``, SGLang's kpool-compress
    tail buffers), one small buffer per request and indexer layer.
    """
    la = r.sub("linear_attn_config") if r.has("linear_attn_config") else None
    if la is not None:
        kda = set(_layer_list(la, "kda_layers", num_layers - 1, first=0))
        heads = _dim(la, "num_heads", default=_dim(r, "linear_num_heads", default=64))
        head_dim = _dim(la, "head_dim", default=_dim(r, "linear_head_dim", default=128))
        kernel = _dim(la, "short_conv_kernel_size", default=_dim(r, "linear_conv_kernel_dim", default=4))
    else:
        types = r.get_str_list("layer_types", (_LINEAR, _FULL, "deepseek_sparse_attention"))
        if types is not None and len(types) != num_layers:
            r.fail("layer_types", f"has {len(types)} entries for {num_layers} layers")
        kda = {i for i in range(num_layers) if (types[i] == _LINEAR if types is not None else i % 4 != 3)}
        heads, head_dim = _dim(r, "linear_num_heads", default=64), _dim(r, "linear_head_dim", default=128)
        kernel = _dim(r, "linear_conv_kernel_dim", default=4)
    if len(kda) == num_layers:
        _no_attention(la or r, "kda_layers" if la is not None else "layer_types", num_layers)
    state = LinearState("kda", heads, heads, head_dim, head_dim, kernel)
    kv_lora_rank = _dim(r, "kv_lora_rank", default=512)
    rope = _dim(r, "qk_rope_head_dim", default=0, minimum=0)
    mla = MlaLatent(kv_lora_rank, rope)
    # SGLang model_config.is_deepseek_nsa: an indexer only where index_topk is not None (Glm5NextTextConfig's
    # default); a top-k of 0 selects nothing, so 0 is refused rather than read as "no indexer"
    index_topk = r.get_int("index_topk", default=0, maximum=limits.MAX_TOKENS)
    index_head_dim = _dim(r, "index_head_dim", default=128)
    kpool = _dim(r, "index_kpool", default=1)
    owners = _glm5_next_indexer_layers(r, num_layers) if index_topk else set()
    indexer = IndexerK(index_head_dim, kpool)
    layers = tuple(
        Layer(i, (state,) if i in kda else ((mla, indexer) if i in owners else (mla,))) for i in range(num_layers)
    )
    common = _common(_glm5_next_weights_view(r), name=name, source=source, description=description,
                     architecture="Glm5NextForConditionalGeneration", num_layers=num_layers)  # fmt: skip
    # one MTP layer when the config names none: SGLang 0.5.23 srt/configs/glm5_next.py Glm5NextTextConfig(
    # num_nextn_predict_layers=1); vLLM 0.33.0's class (transformers 5.16.1-5.20 Glm5NextTextConfig) has no such
    # field (kvplan.engines.vllm_glm5_next refuses its MTP draft then)
    common["num_mtp_layers"] = r.get_int("num_nextn_predict_layers", default=1, minimum=0, maximum=limits.MAX_LAYERS)
    return ModelArch(
        **common, kv_lora_rank=kv_lora_rank, qk_rope_head_dim=rope,
        mtp_layers_named=r.data.get("num_nextn_predict_layers") is not None,
        # Glm5NextTextConfig(num_attention_heads=64): SGLang srt/configs/glm5_next.py, vLLM the same
        num_attention_heads=_dim(r, "num_attention_heads", default=64),
        head_dim=_dim(r, "qk_nope_head_dim", default=256) + rope, v_head_dim=_dim(r, "v_head_dim", default=256),
        # Glm5NextTextConfig(index_n_heads=None), and the indexer asserts it is set: read beside index_topk only
        index_head_dim=index_head_dim, index_n_heads=_dim(r, "index_n_heads", required=True) if index_topk else 0,
        index_topk=index_topk, index_kpool=kpool, layers=layers,
        # the same owners as flags: a config without KDA layers is uniform, and its layers are rebuilt from these
        indexer_full=tuple(i in owners and i not in kda for i in range(num_layers)) if index_topk else (),
        indexer_rule=IndexerRule.INDEXER_TYPES if r.has("indexer_types") else IndexerRule.NONE,
    )  # fmt: skip


def _glm5_next_weights_view(r: Reader) -> Reader:
    """The ``text_config`` fields with what the parameter count needs from the outer config (SGLang
    ``Glm5NextConfig``: ``architectures`` and ``quantization_config`` at the top, ``vision_config`` beside the
    text config): the view kvplan.models.params_glm5_next counts. Errors keep the text config's key paths."""
    if not r.path or r.path[-1] != "text_config":
        return r
    outer: Any = r.doc.data
    for key in r.path[:-1]:
        outer = outer[key]
    merged = dict(r.data)
    for key in ("architectures", "quantization_config", "vision_config", "torch_dtype", "dtype"):
        if outer.get(key) is not None and merged.get(key) is None:
            merged[key] = outer[key]
    return type(r)(r.doc, r.path, merged)


def _glm5_next_indexer_layers(r: Reader, num_layers: int) -> set[int]:
    """Layers whose ``indexer_types`` entry is "full" (every layer without the list); a sharing rule given only
    by ``index_topk_freq`` / ``index_topk_pattern`` is refused: how GLM-5.3-Flash counts it over its KDA layers
    is not read from the engines yet."""
    types = r.get_str_list("indexer_types", ("full", "shared"))
    if types is not None:
        if len(types) != num_layers:
            r.fail("indexer_types", f"has {len(types)} entries for {num_layers} layers")
        return {i for i, t in enumerate(types) if t == "full"}
    if r.get_int("index_topk_freq", default=1, maximum=limits.MAX_LAYERS) > 1 or r.has("index_topk_pattern"):
        key = "index_topk_pattern" if r.has("index_topk_pattern") else "index_topk_freq"
        r.fail(key, "GLM-5.3-Flash's shared indexer layers without indexer_types are not modelled yet")
    return set(range(num_layers))
