"""VLM wrappers whose language model sits in a nested section of config.json (DeepSeek-VL2's ``language_config``,
Kimi-K2.5's ``text_config``): the section to read, the defaults the engines' config classes fill in, the attention
they build (MLA or MHA) and the vision tower's weights, counted from ``vision_config`` (and ``projector_config``)."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from kvplan import limits, record
from kvplan.models.arch import ModelArch, ParamGroup
from kvplan.models.reader import Reader

DEEPSEEK_VL2 = "DeepseekVLV2ForCausalLM"
DEEPSEEK_VL2_ARCHITECTURES = (DEEPSEEK_VL2, "DeepseekVL2ForCausalLM")
"""vLLM's class (its ``DeepseekVLV2Config`` sets it when config.json names none) and SGLang's
(``configs/deepseekvl2.py`` ``DeepseekVL2Config.architectures``). deepseek-ai's config.json has no
``architectures``: kvplan knows it by ``model_type: deepseek_vl_v2`` beside a ``language_config``."""
KIMI_K25 = "KimiK25ForConditionalGeneration"
"""Kimi-K2.5: a DeepseekV3ForCausalLM ``text_config`` beside a MoonViT ``vision_config`` (SGLang
``models/kimi_k25.py``: ``DeepseekV3ForCausalLM(config.text_config, quant_config)``)."""

_V2_DEFAULTS: dict[str, Any] = {
    "num_hidden_layers": 30, "num_attention_heads": 32, "num_key_value_heads": 32, "kv_lora_rank": 512,
    "q_lora_rank": 1536, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
}  # fmt: skip
"""``DeepseekV2Config`` defaults for the keys deepseek-vl2's ``language_config`` leaves out (it names neither its
30 layers nor its 32 heads): SGLang ``configs/deepseekvl2.py`` ``DeepseekV2Config.__init__`` and transformers'
``DeepseekV2Config`` (vLLM ``DeepseekVLV2Config.text_config``) agree on each."""

_MLA_ONLY = ("kv_lora_rank", "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
"""Read by neither engine's MHA language model (VL2-tiny's 0s here are not widths)."""


@record
class LanguageSection:
    """The language model's fields (defaults filled) and how the engines build it."""

    reader: Reader
    mla: bool
    """``use_mla`` (default True): SGLang ``deepseek_vl2.py`` builds DeepseekV2ForCausalLM (MLA), else
    DeepseekForCausalLM (MHA: "deepseek-vl2-tiny forbids mla"); vLLM ``deepseek_vl2.py`` DeepseekV3ForCausalLM
    (``topk_method`` noaux_tc) or DeepseekV2ForCausalLM, else DeepseekForCausalLM (head_dim hidden // heads)."""
    vision_params: int
    architecture: str = DEEPSEEK_VL2
    vision_tower: tuple[int, int] = (24, 1024)
    """(layers, hidden) as SGLang's ``adjust_mem_fraction_for_vlm`` reads them: ``getattr(vision_config,
    "num_hidden_layers", 24)`` and ``"hidden_size", 1024``. DeepseekVL2VisionEncoderConfig names them ``layers`` and
    ``width``, so the defaults; Kimi-K2.5's vision config aliases them to ``vt_num_hidden_layers`` / ``vt_hidden_size``
    (``KimiK25VisionConfig.__init__``: ``self.num_hidden_layers = vt_num_hidden_layers``)."""
    notes: tuple[str, ...] = ()
    """Weights assumptions the wrapper adds to the language model's."""

    def finish(self, arch: ModelArch) -> ModelArch:
        """``arch`` as the VLM: its class, the vision group, the engines' load-time additions of the language
        model (SGLang's absorbed MLA copies), and SGLang's VLM memory factor (``vision_tower``)."""
        from kvplan.models.additions import additions_group  # the per-tensor readers: a VLM config only

        groups = [g for g in arch.param_groups if g.name != "engine_additions"]
        if groups:  # no hidden_size: no groups, weights_per_gpu asked for
            # replicated: VL2's timm tower and projector are unsplit in both engines (deepseek_vl2.py); Kimi-K2.5's
            # MLPs and projector are (nn.Linear, ReplicatedLinear), its attention is counted whole too (the note)
            groups.append(ParamGroup(name="vision", params=self.vision_params, bytes_per_param_num=2, split="none"))
            groups.append(additions_group(self.reader.data))
        return replace(
            arch,
            architecture=self.architecture,
            param_groups=tuple(groups),
            vision_tower=self.vision_tower,
            weights_assumptions=(*arch.weights_assumptions, *self.notes),
        )


def language_section(r: Reader, architecture: str) -> LanguageSection | None:
    """DeepSeek-VL2's ``language_config`` with DeepseekV2Config's defaults, Kimi-K2.5's ``text_config``, or None
    for any other config."""
    if architecture == KIMI_K25:
        return _kimi_k25(r)
    vl2 = architecture in DEEPSEEK_VL2_ARCHITECTURES
    if not vl2 and not (architecture == "unknown" and r.data.get("model_type") == "deepseek_vl_v2"):
        return None
    if not isinstance(r.data.get("language_config"), dict):
        r.fail("language_config", "missing: a DeepSeek-VL2 config holds its language model's fields there")
    lang = r.sub("language_config")
    mla = lang.get_bool("use_mla", default=True)
    data = {**_V2_DEFAULTS, **lang.data}
    if mla:
        data["architectures"] = ["DeepseekV2ForCausalLM"]  # the MLA reader's class; the wrapper's is set after
    else:
        data = {k: v for k, v in data.items() if k not in _MLA_ONLY}
    return LanguageSection(Reader(lang.doc, lang.path, data), mla, _vision_params(r))


def _vision_params(r: Reader) -> int:
    """SigLIP ViT (timm ``VisionTransformer``: patch embed, positions, blocks, final norm, ``attn_pool``), the
    downsample-MLP projector and the two separator embeddings, from ``vision_config`` / ``projector_config`` with
    the defaults of SGLang's ``DeepseekVL2VisionEncoderConfig`` / ``DeepseekVL2MlpProjectorConfig``."""
    v = r.sub("vision_config") if isinstance(r.data.get("vision_config"), dict) else Reader(r.doc, (), {})
    p = r.sub("projector_config") if isinstance(r.data.get("projector_config"), dict) else Reader(r.doc, (), {})
    w: int = v.get_int("width", default=1024, maximum=limits.MAX_DIM)
    depth: int = v.get_int("layers", default=24, maximum=limits.MAX_LAYERS)
    patch: int = v.get_int("patch_size", default=16, maximum=limits.MAX_DIM)
    grid: int = v.get_int("image_size", default=384, maximum=limits.MAX_DIM) // patch
    ratio = v.data.get("mlp_ratio", 4)
    numeric = isinstance(ratio, (int, float)) and not isinstance(ratio, bool) and 0 < ratio <= 64
    m = int(w * ratio) if numeric else 4 * w  # timm Mlp hidden_features = int(width × mlp_ratio)
    block = 4 * w * w + 2 * m * w + 9 * w + m  # 2 LayerNorms, qkv + proj (biased), fc1 + fc2 (biased)
    pool = w + 4 * (w * w + w) + 2 * w + (m * w + m) + (w * m + w)  # latent, q, kv (2), proj, norm, mlp
    tower = 3 * patch * patch * w + w + grid * grid * w + depth * block + 2 * w + pool
    n_embed: int = p.get_int("n_embed", default=2048, maximum=limits.MAX_DIM)
    into: int = p.get_int("input_dim", default=1152, maximum=limits.MAX_DIM)
    down: int = p.get_int("downsample_ratio", default=2, maximum=limits.MAX_DIM)
    hidden: int = n_embed * p.get_int("mlp_ratio", default=1, maximum=limits.MAX_DIM)
    depth_p: int = p.get_int("depth", default=2, maximum=limits.MAX_LAYERS)
    if p.get_str("projector_type", default="downsample_mlp_gelu") == "linear":
        projector = into * n_embed + n_embed
    else:  # downsample_mlp_gelu: input_dim × ratio² -> hidden, (depth - 2) × hidden -> hidden, hidden -> n_embed
        projector = into * down * down * hidden + hidden + (depth_p - 2) * (hidden * hidden + hidden)
        projector += hidden * n_embed + n_embed
    return tower + projector + 2 * n_embed  # image_newline, view_seperator


def _kimi_k25(r: Reader) -> LanguageSection:
    """Kimi-K2.5's text model (MLA: its ``text_config`` names DeepseekV3ForCausalLM) and its MoonViT tower."""
    if not isinstance(r.data.get("text_config"), dict):
        r.fail("text_config", "missing: a Kimi-K2.5 config holds its language model's fields there")
    if not isinstance(r.data.get("vision_config"), dict):
        r.fail("vision_config", "missing: SGLang's and vLLM's Kimi-K2.5 build the vision tower from it")
    lang, v = r.sub("text_config"), r.sub("vision_config")
    layers: int = v.get_int("vt_num_hidden_layers", required=True, maximum=limits.MAX_LAYERS)
    hidden: int = v.get_int("vt_hidden_size", required=True, maximum=limits.MAX_DIM)
    data = {**lang.data, "architectures": ["DeepseekV3ForCausalLM"]}  # the MLA reader's class
    outer = r.data.get("quantization_config")
    if isinstance(outer, dict):  # the wrapper's first, the text config's only without it
        data["quantization_config"] = _text_quantization(outer)
    params = _moonvit_params(v, layers, hidden, lang.get_int("hidden_size", required=True, maximum=limits.MAX_DIM))
    return LanguageSection(Reader(lang.doc, lang.path, data), True, params, KIMI_K25, (layers, hidden), K25_TOWER)


def _text_quantization(q: dict[str, object]) -> dict[str, object]:
    """The wrapper's ``quantization_config`` as the text model reads it: the engines take the top-level one (vLLM
    ``ModelConfig._parse_quant_hf_config``: ``hf_config.quantization_config``, the text config's only without it) and
    build the text model under the prefix ``language_model.``, so its ignore patterns name modules with it
    (nvidia/Kimi-K2.5-NVFP4: ``language_model.model.layers.0.self_attn*``); kvplan names the text model's modules
    without it."""

    def strip(v: object) -> object:
        if isinstance(v, list):
            return [x.removeprefix("language_model.") if isinstance(x, str) else x for x in v]
        return v

    return {k: strip(v) if k in ("ignore", "exclude_modules", "modules_to_not_convert") else v for k, v in q.items()}


K25_TOWER = (
    "Kimi-K2.5's MoonViT tower and projector counted whole on every GPU in bf16 (SGLang kimi_k25.py builds them "
    "without the text model's quant_config); SGLang splits the tower's attention projections over the attention TP "
    "group, so at TP8 it holds about 0.25 GB less than counted",
)


def _moonvit_params(v: Reader, layers: int, h: int, text_hidden: int) -> int:
    """SGLang ``models/kimi_k25.py``: ``MoonVision3dPatchEmbed`` (Conv2d(3, h, patch) with bias and a learnable
    ``init_pos_emb_height`` × ``init_pos_emb_width`` × h table), ``layers`` × ``MoonViTEncoderLayer`` (two
    LayerNorms, ``VisionAttention`` qkv h -> 3h and proj h -> h with ``attn_bias=True``, ``MLP2`` fc0 h -> m and fc1
    m -> h with biases), the final LayerNorm, and ``K2VLMultiModalProjector`` (LayerNorm(h), ``linear_1`` kh → kh and
    ``linear_2`` kh → ``text_hidden_size`` with biases, k the merge kernel's cells; ``text_hidden_size`` defaults
    to the text model's hidden size, as Kimi-K3's config class forces it to)."""
    # required, as the published config names them all (no engine default read for Kimi-K2.5's config class)
    m: int = v.get_int("vt_intermediate_size", required=True, maximum=limits.MAX_DIM)
    patch: int = v.get_int("patch_size", required=True, maximum=limits.MAX_DIM)
    rows: int = v.get_int("init_pos_emb_height", required=True, maximum=limits.MAX_DIM)
    cols: int = v.get_int("init_pos_emb_width", required=True, maximum=limits.MAX_DIM)
    if "merge_kernel_size" not in v.data:
        v.fail("merge_kernel_size", "missing (required)")
    kernel = v.data["merge_kernel_size"]
    if not (isinstance(kernel, list) and len(kernel) == 2 and all(type(x) is int and 0 < x <= 16 for x in kernel)):
        v.fail("merge_kernel_size", "expected two integers from 1 to 16 (the patch merger's kernel)")
    k: int = math.prod(kernel)
    t: int = v.get_int("text_hidden_size", default=text_hidden, maximum=limits.MAX_DIM)
    embed = 3 * patch * patch * h + h + rows * cols * h
    block = 4 * h + (3 * h * h + 3 * h) + (h * h + h) + (h * m + m) + (m * h + h)
    projector = 2 * h + (k * h) ** 2 + k * h + k * h * t + t
    return embed + layers * block + 2 * h + projector
