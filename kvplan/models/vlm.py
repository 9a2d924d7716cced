"""VLM wrappers whose language model sits in a nested section of config.json (DeepSeek-VL2's ``language_config``):
the section to read, the defaults the engines' config classes fill in, the attention they build (MLA or MHA) and
the vision tower's weights, counted from ``vision_config`` and ``projector_config``."""

from __future__ import annotations

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

    def finish(self, arch: ModelArch) -> ModelArch:
        """``arch`` as the VLM: its class, the vision group, the engines' load-time additions of the language
        model (SGLang's absorbed MLA copies), and SGLang's VLM memory factor (``vision_tower``)."""
        from kvplan.models.additions import additions_group  # the per-tensor readers: a VLM config only

        groups = [g for g in arch.param_groups if g.name != "engine_additions"]
        if groups:  # no hidden_size: no groups, weights_per_gpu asked for
            # replicated: both engines build the tower with timm and the projector unsplit (deepseek_vl2.py)
            groups.append(ParamGroup(name="vision", params=self.vision_params, bytes_per_param_num=2, split="none"))
            groups.append(additions_group(self.reader.data))
        return replace(
            arch,
            architecture=DEEPSEEK_VL2,
            param_groups=tuple(groups),
            # SGLang memory_hook.adjust_mem_fraction_for_vlm: getattr(vision_config, "num_hidden_layers", 24) and
            # "hidden_size", 1024; DeepseekVL2VisionEncoderConfig names them layers and width: the defaults
            vision_tower=(24, 1024),
        )


def language_section(r: Reader, architecture: str) -> LanguageSection | None:
    """DeepSeek-VL2's ``language_config`` with DeepseekV2Config's defaults, or None for any other config."""
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
