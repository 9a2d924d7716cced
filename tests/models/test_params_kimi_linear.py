"""Kimi-Linear and Kimi-K3 parameters (kvplan.models.params_kimi_linear), each figure derived from the config.

Kimi-Linear-48B-A3B (the kimi-linear-48b-a3b preset): h 2304, 27 layers, KDA on the 20 layers whose 1-based number
is in kda_layers (H 32 heads × d 128, P = 4096, kernel 4), MLA on layers 4, 8, ..., 24, 27 (32 heads, nope 128,
rope 64, v 128, kv_lora 512, no q_lora), dense MLP 9216 on layer 0, 256 routed experts of 1024 + 1 shared on
the other 26, vocab 163,840 untied, bf16. Kimi-K3 (tests/data/hf/kimi-k3/config.json, verbatim): h 7168, 93
layers (69 KDA with H 96 and a full-rank g_proj, 24 MLA with q_lora 1536 and an output gate g_proj), 896
experts of 3072 in a 3584-wide latent, 2 shared, MXFP4 routed experts (compressed-tensors fp4 group 32, uint8
scales), everything else bf16.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from kvplan.errors import ConfigError
from kvplan.models.arch import ModelArch, Split
from kvplan.models.from_hf import load_model
from kvplan.models.quant import resolve
from kvplan.models.weights import param_groups_from_hf

DATA = Path(__file__).parents[1] / "data" / "hf"
K3 = DATA / "kimi-k3" / "config.json"


def by_name(arch: ModelArch) -> dict[str, Any]:
    return {g.name: g for g in arch.param_groups}


# --------------------------------------------------------------------------- Kimi-Linear-48B-A3B

# Per group, from the module shapes (the comment at params_kimi_linear.groups), h = 2304, P = 32 × 128 = 4096:
KIMI_LINEAR = {
    # 20 KDA layers × (q, k, v 3 × 4096 × 2304 = 28,311,552 + b_proj 32 × 2304 = 73,728 + f_b_proj and g_b_proj
    # 2 × 4096 × 128 = 1,048,576 + o_proj 2304 × 4096 = 9,437,184 + convs 3 × 4096 × 4 = 49,152 + dt_bias 4096
    # + A_log 32) = 20 × 38,924,320
    "linear_attention": 778_486_400,
    # 20 × (f_a_proj + g_a_proj 2 × 128 × 2304 = 589,824) + 7 MLA × kv_a_proj_with_mqa (512 + 64) × 2304
    # = 11,796,480 + 9,289,728
    "replicated_attention": 21_086_208,
    # 7 MLA × (q_proj 32 × 192 × 2304 = 14,155,776 + kv_b_proj 32 × 256 × 512 = 4,194,304 + o_proj 2304 × 4096
    # = 9,437,184) = 7 × 27,787,264
    "attention": 194_510_848,
    "dense_mlp": 63_700_992,  # layer 0: 3 × 9216 × 2304
    "routed_experts": 47_110_422_528,  # 26 × 256 × 3 × 1024 × 2304
    "shared_experts": 184_025_088,  # 26 × 3 × (1024 × 1) × 2304
    "router": 15_342_080,  # 26 × (256 × 2304 gate + 256 e_score_correction_bias)
    "embeddings": 754_974_720,  # 2 × 163,840 × 2304 (tie_word_embeddings false)
    # 27 × 2 layer norms × 2304 + the final 2304 + 20 o_norm × 128 + 7 kv_a_layernorm × 512
    "norms": 132_864,
}


def test_kimi_linear_parameter_groups_from_the_config() -> None:
    arch = load_model("kimi-linear-48b-a3b")
    assert {n: g.params for n, g in by_name(arch).items()} == KIMI_LINEAR
    # 778,486,400 + 21,086,208 + 194,510,848 + 63,700,992 + 47,110,422,528 + 184,025,088 + 15,342,080
    # + 754,974,720 + 132,864
    assert sum(g.params for g in arch.param_groups) == 49_122_681_728
    assert all((g.bytes_per_param_num, g.bytes_per_param_den) == (2, 1) for g in arch.param_groups)  # bf16


def test_kimi_linear_tp_splits() -> None:
    groups = by_name(load_model("kimi-linear-48b-a3b"))
    tp1, tp8 = Split.of(tp=1), Split.of(tp=8)
    # tp 1: every group whole, 2 B a parameter
    assert {n: g.bytes_per_gpu(tp1) for n, g in groups.items()} == {n: 2 * p for n, p in KIMI_LINEAR.items()}
    # tp 8: attention TP (KDA 32 heads, MLA 32 heads: 8 ways), vocab-parallel embeddings, TP dense and shared
    # experts, routed experts over max(tp, ep) = 8; replicated: f_a/g_a, kv_a, router, norms
    assert {n: g.bytes_per_gpu(tp8) for n, g in groups.items()} == {
        "linear_attention": 778_486_400 * 2 // 8,  # 194,621,600
        "replicated_attention": 21_086_208 * 2,
        "attention": 194_510_848 * 2 // 8,
        "dense_mlp": 63_700_992 * 2 // 8,
        "routed_experts": 47_110_422_528 * 2 // 8,
        "shared_experts": 184_025_088 * 2 // 8,
        "router": 15_342_080 * 2,
        "embeddings": 754_974_720 * 2 // 8,
        "norms": 132_864 * 2,
    }
    # 194,621,600 + 42,172,416 + 48,627,712 + 15,925,248 + 11,777,605,632 + 46,006,272 + 30,684,160
    # + 188,743,680 + 265,728 = 12,344,652,448 B (11.50 GiB): what admit prints as weights per GPU at tp 8
    assert sum(g.bytes_per_gpu(tp8) for g in groups.values()) == 12_344_652_448


def test_kda_heads_cap_the_attention_split() -> None:
    # attention TP 64 > 32 KDA heads: each rank still loads 1/32 of the head-sharded KDA weights (HeadsGroup)
    g = by_name(load_model("kimi-linear-48b-a3b"))["linear_attention"]
    assert g.bytes_per_gpu(Split.of(tp=64)) == 778_486_400 * 2 // 32


def test_kimi_linear_published_parameter_count() -> None:
    """No measured load line for Kimi-Linear was found; the model card and the vLLM recipe say "48B" total
    (vllm-project/recipes 8959cf64 models/moonshotai/Kimi-Linear-48B-A3B-Instruct.yaml parameter_count "48B";
    MoonshotAI/Kimi-Linear README "#Total Params 48B"). A two-significant-figure label covers 47.5–48.5 B; kvplan's
    non-embedding count lands in it (49,122,681,728 − 754,974,720 = 48,367,707,008: 0.77 % above 48 B); the
    whole count, 49.12 B, is what an "F16 98.4 GB" checkpoint size implies (98.25 GB)."""
    arch = load_model("kimi-linear-48b-a3b")
    non_embedding = sum(g.params for g in arch.param_groups if g.name != "embeddings")
    assert non_embedding == 48_367_707_008
    assert round(non_embedding / 1e9) == 48


# --------------------------------------------------------------------------- Kimi-K3


def test_k3_loads_its_text_config() -> None:
    """Before this change the config stopped with "num_hidden_layers: missing" (the fields sit in text_config)."""
    arch = load_model(str(K3))
    assert (arch.architecture, arch.num_layers, arch.max_position_embeddings) == ("KimiLinearForCausalLM", 93, 1 << 20)
    assert arch.weights_summary.startswith("compressed-tensors: fp4 group 32 (uint8 scales); bf16 elsewhere")


def test_k3_preset_is_the_config() -> None:
    a, b = load_model("kimi-k3"), load_model(str(K3))
    assert a.layers == b.layers
    assert a.param_groups == b.param_groups


def test_k3_parameter_groups() -> None:
    groups = by_name(load_model(str(K3)))
    # 24 MLA × (q_b_proj 96 × 192 × 1536 = 28,311,552 + kv_b_proj 96 × 256 × 512 = 12,582,912 + o_proj
    # 7168 × 12,288 = 88,080,384 + output gate g_proj 12,288 × 7168 = 88,080,384) = 24 × 217,055,232
    assert groups["attention"].params == 5_209_325_568
    # 69 KDA × (q, k, v 3 × 12,288 × 7168 = 264,241,152 + b 96 × 7168 = 688,128 + f_b 12,288 × 128 = 1,572,864
    # + full-rank g_proj 12,288 × 7168 = 88,080,384 + o 88,080,384 + convs 3 × 12,288 × 4 = 147,456 + dt_bias
    # 12,288 + A_log 96) = 69 × 442,822,752
    assert groups["linear_attention"].params == 30_554_769_888
    # 92 MoE layers (first_k_dense_replace 1) × 896 × 3 × 3072 × 3584 (the latent width)
    assert groups["routed_experts"].params == 92 * 896 * 3 * 3072 * 3584 == 2_722_740_830_208
    # MXFP4: 4 bits + one uint8 scale per 32 values = 1/2 + 1/32 = 17/32 B
    assert Fraction(groups["routed_experts"].bytes_per_param_num, groups["routed_experts"].bytes_per_param_den) == (
        Fraction(17, 32)
    )
    # 92 × (routed_expert_down_proj + up_proj 2 × 3584 × 7168 + the latent norm 3584), bf16 (quant_config=None)
    assert groups["latent_moe"].params == 92 * (2 * 3584 * 7168 + 3584) == 4_727_310_336
    assert (groups["latent_moe"].bytes_per_param_num, groups["latent_moe"].split) == (2, "none")
    # shared: 92 × 3 × (3072 × 2) × 7168, bf16 (ignore re:.*shared_experts.*)
    assert groups["shared_experts"].params == 12_155_092_992
    assert groups["shared_experts"].bytes_per_param_num == 2
    # 69 KDA × f_a_proj 128 × 7168 + 24 MLA × (q_a_proj 1536 × 7168 + kv_a_proj_with_mqa 576 × 7168)
    assert groups["replicated_attention"].params == 69 * 128 * 7168 + 24 * 2112 * 7168 == 426_639_360
    # norms: 93 × (2 layer norms + 2 attn-res norms + 2 attn-res projections h → 1) × 7168 + final norm 7168
    # + output_attn_res_norm and _proj 2 × 7168 + 69 o_norm × 128 + 24 × (kv_a 512 + q_a 1536 layernorms)
    assert groups["norms"].params == 93 * 6 * 7168 + 7168 + 2 * 7168 + 69 * 128 + 24 * 2048 == 4_079_232
    total = sum(g.params for g in groups.values())
    assert total == 2_779_484_476_000


def test_k3_published_parameter_count() -> None:
    """vLLM's Kimi-K3 recipe (vllm-project/recipes 8959cf64 models/moonshotai/Kimi-K3.yaml) gives
    parameter_count "2.8T"; its "~1.68 TB" checkpoint size is an estimate (2.8T × 0.5 B × 1.2), not a
    measurement, so the count is what is checked: 2,779,484,476,000 rounds to 2.8 T (0.7 % under), the vision
    tower (not counted) included or not."""
    total = sum(g.params for g in load_model(str(K3)).param_groups)
    assert round(total / 1e11) == 28


def test_k3_weights_per_gpu_tp8() -> None:
    groups = {g.name: g.bytes_per_gpu(Split.of(tp=8)) for g in load_model(str(K3)).param_groups}
    assert groups == {
        "routed_experts": 2_722_740_830_208 * 17 // (32 * 8),  # 180,807,008,256: MXFP4, 8 ways
        "linear_attention": 30_554_769_888 * 2 // 8,  # bf16, attention TP (96 KDA heads)
        "attention": 5_209_325_568 * 2 // 8,  # bf16, attention TP (96 MLA heads)
        "dense_mlp": 726_663_168 * 2 // 8,  # layer 0: 3 × 33,792 × 7168, TP
        "shared_experts": 12_155_092_992 * 2 // 8,  # TP
        "embeddings": 2 * 163_840 * 7168 * 2 // 8,  # vocab parallel
        "replicated_attention": 426_639_360 * 2,  # whole on every rank
        "router": 92 * (896 * 7168 + 896) * 2,
        "latent_moe": 4_727_310_336 * 2,
        "norms": 4_079_232 * 2,
    }
    # 190.97 GiB a GPU: more than an H200 holds (140.40 GiB), so admit on the 8×H200 presets says the engine
    # would not start; vLLM's recipe runs K3 on H200 from 16 GPUs (TP8 × DP2 or PP2)
    assert sum(groups.values()) == 205_053_641_592


def test_k3_quantization_resolves_per_module() -> None:
    """compressed-tensors ``mxfp4-pack-quantized`` (weight_packed: two e2m1 values a byte; weight_scale: one
    uint8 (e8m0) exponent per group of 32; no global scale, unlike nvfp4-pack-quantized's weight_global_scale):
    quant.py's generic float/group reader gives exactly MXFP4's 17/32 B, and the ignore list keeps attention,
    shared experts and the dense MLP in bf16."""
    text = json.loads(K3.read_text())["text_config"]
    q = resolve(text, str(K3))
    expert = q.scheme_for("language_model.layers.5.block_sparse_moe.experts.7.w1")
    assert (expert.bytes_per_param, expert.tensor_bits) == (Fraction(17, 32), 0)
    for name in (
        "language_model.layers.3.self_attn.o_proj",
        "language_model.layers.5.block_sparse_moe.shared_experts.down_proj",
        "language_model.layers.0.mlp.gate_proj",
        "lm_head",
    ):
        assert q.scheme_for(name).bytes_per_param == 2, name


# --------------------------------------------------------------------------- config.json reading


def kimi_linear_config() -> dict[str, Any]:
    """The preset's config section as a config.json (model_max_length, no max_position_embeddings: as the
    checkpoint's config names its context)."""
    import yaml

    preset = Path(__file__).parents[2] / "kvplan" / "configs" / "models" / "kimi-linear-48b-a3b.yaml"
    config: dict[str, Any] = yaml.safe_load(preset.read_text())["config"]
    return config


def test_model_max_length_is_the_context(tmp_path: Path) -> None:
    """Both engines read model_max_length when max_position_embeddings is absent; before this change the
    config.json stopped with "max_position_embeddings: missing"."""
    (tmp_path / "config.json").write_text(json.dumps(kimi_linear_config()))
    arch = load_model(str(tmp_path / "config.json"))
    assert arch.max_position_embeddings == 1_048_576
    assert sum(g.params for g in arch.param_groups) == 49_122_681_728


def test_bad_kda_layers_name_the_key(tmp_path: Path) -> None:
    config = kimi_linear_config()
    config["linear_attn_config"]["kda_layers"][3] = 28
    with pytest.raises(ConfigError, match=r"kda_layers\.3.*expected a layer number from 1 to 27, got 28"):
        param_groups_from_hf(config, "config.json")


def test_kimi_linear_tp4_shard_shapes_as_sglang_profiled_them() -> None:
    """Profiler input shapes of a real ``sglang serve --model-path moonshotai/Kimi-Linear-48B-A3B-Instruct --tp 4``
    run, published as kernel-task notes in a public repository (code-index find_string ids 54829487925 and
    55031834593): the fused MoE takes w13 ``[256, 512, 2304]`` and w2 ``[256, 2304, 256]`` per rank (256 experts,
    2 × 1024 / 4 and 1024 / 4 of the intermediate, hidden 2304), and a KDA projection ``[1024, 2304]`` (P 4096 / 4).
    kvplan's split gives the same bytes: routed experts a layer 256 × (512 × 2304 + 2304 × 256) × 2 B, KDA q, k, v
    and o a layer 4 × 1024 × 2304 × 2 B."""
    groups = by_name(load_model("kimi-linear-48b-a3b"))
    tp4 = Split.of(tp=4)
    assert groups["routed_experts"].bytes_per_gpu(tp4) == 26 * 256 * (512 * 2304 + 2304 * 256) * 2
    # the rest of the KDA shard: 20 × (b 73,728 + f_b and g_b 1,048,576 + convs, dt_bias, A_log 53,280) × 2 B / 4
    rest = 20 * (73_728 + 1_048_576 + 53_280) * 2 // 4
    assert groups["linear_attention"].bytes_per_gpu(tp4) - rest == 20 * 4 * 1024 * 2304 * 2  # 377,487,360 B


def test_a_config_without_its_mlp_counts_nothing(tmp_path: Path) -> None:
    """A config naming neither num_experts nor intermediate_size (the KV-only configs the engine tests write) gets
    no groups, as Qwen3-Next's: the plan then asks for weights_per_gpu instead of failing on the MLP."""
    config = kimi_linear_config()
    for key in ("num_experts", "intermediate_size"):
        del config[key]
    assert param_groups_from_hf(config, "config.json").groups == ()
