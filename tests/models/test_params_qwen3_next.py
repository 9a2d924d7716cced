"""Qwen3-Next's parameters (kvplan/models/params_qwen3_next.py) and the ``qwen3-next-80b-a3b`` preset.

Shapes (the preset's config, Qwen/Qwen3-Next-80B-A3B-Instruct): h = 2,048; 48 layers, every 4th full
(full_attention_interval 4: layers 3, 7, ..., 47 = 12 full, 36 Gated DeltaNet); attention 16 heads, 2 kv heads,
head_dim 256; GDN nk = 16 key heads × dk 128, nv = 32 value heads × dv 128, conv kernel 4; 512 experts of 512,
a shared expert of 512, vocab 151,936 untied; bf16 (2 B a parameter).

Published figure: the released bf16 checkpoint's tensor listing (41 safetensors shards) sums to 81,324,862,720
parameters (79,674,391,296 in the decoder, embeddings and head, 1,650,471,424 in ``mtp.*``), the shard index's
``metadata.total_size`` 162,649,725,440 B = 2 B × 81,324,862,720. Seen identically in several public files of
the GitHub code index (a model report quoting the repo's config.json and listing every tensor: "参数总量:
81,324,862,720", "张量累计大小: 151.48 GB" [GiB: 162,649,725,440 / 2^30 = 151.48]; a parameter ledger "All BF16
tensor-name parameters 81,324,862,720 | Actual tensor-value extent 162,649,725,440 B"; a script asserting
``CKPT_TOTAL_ELEMENTS = 162_649_725_440 // 2``; a model table row "Qwen/Qwen3-Next-80B-A3B-Instruct | 80B total,
3B active | 81,324,862,720"); the index lists them without their repositories. The model card says "80B".
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.errors import ConfigError
from kvplan.models.arch import Split
from kvplan.models.from_hf import load_model
from kvplan.models.params_qwen3_next import full_attention_layers
from kvplan.models.presets import resolve_preset as _resolve
from kvplan.models.quant import Fields
from kvplan.models.weights import param_groups_from_hf

PRESET = "qwen3-next-80b-a3b"
BF16 = 2

# one layer's modules, from the shapes above
QKVZ = (2 * 16 * 128 + 2 * 32 * 128) * 2048  # in_proj_qkvz 12,288 × 2,048 = 25,165,824
BA = 2 * 32 * 2048  # in_proj_ba 64 × 2,048 = 131,072
OUT = 2048 * 32 * 128  # out_proj 2,048 × 4,096 = 8,388,608
CONV = (2 * 16 * 128 + 32 * 128) * 4  # conv1d: conv_dim 8,192 × kernel 4 = 32,768
A_DT = 2 * 32  # A_log + dt_bias: 32 each
GDN = QKVZ + BA + OUT + CONV + A_DT  # 33,718,336
Q_O = 2 * 16 * 256 * 2048 + 2048 * 16 * 256  # q_proj (query + gate) 8,192 × 2,048 + o_proj 2,048 × 4,096 = 25,165,824
KV = 2 * (2 * 256) * 2048  # k_proj + v_proj: 512 × 2,048 each = 2,097,152
EXPERTS = 512 * 3 * 512 * 2048  # 1,610,612,736 a layer
SHARED = 3 * 512 * 2048  # 3,145,728
ROUTER = 512 * 2048 + 2048  # mlp.gate 512 × 2,048 + shared_expert_gate 1 × 2,048 = 1,050,624
EMBED = 2 * 151_936 * 2048  # embed_tokens + lm_head = 622,329,856
NORMS = 2048 + 48 * 2 * 2048 + 12 * 2 * 256 + 36 * 128  # final + 2 a layer + q/k_norm + linear_attn.norm = 209,408
MTP = 2048 * 4096 + Q_O + KV + EXPERTS + SHARED + ROUTER + 2 * 256 + 2 * 2048 + 3 * 2048
"""mtp.fc 2,048 × 4,096, one full-attention MoE layer, its q/k norms and 2 layer norms, pre_fc_norm_embedding,
pre_fc_norm_hidden and mtp.norm: 1,650,471,424."""
ROTARY = 262_144 * int(256 * 0.25) * BF16  # max positions × rotary dim 64 × 2 B = 33,554,432 (32 MiB)

PARAMS = {
    "linear_attention": 36 * GDN,  # 1,213,860,096
    "routed_experts": 48 * EXPERTS,  # 77,309,411,328
    "shared_experts": 48 * SHARED,  # 150,994,944
    "router": 48 * ROUTER,  # 50,429,952
    "attention": 12 * Q_O,  # 301,989,888
    "kv_proj": 12 * KV,  # 25,165,824
    "embeddings": EMBED,
    "norms": NORMS,
    "mtp": MTP,
    "rotary_cache": 0,  # a buffer, not a parameter
}
PUBLISHED_TOTAL_SIZE = 162_649_725_440
"""The checkpoint shard index's metadata.total_size in bytes (see the module docstring for where it is quoted)."""


@pytest.fixture(scope="module")
def arch() -> Any:
    return load_model(PRESET)


def _config() -> dict[str, Any]:
    """The preset's Hugging Face fields, as a config.json would carry them."""
    return dict(_resolve("models", PRESET).data["config"])


def test_parameters_per_group(arch: Any) -> None:
    assert {g.name: g.params for g in arch.param_groups} == PARAMS
    assert {g.name: g.split for g in arch.param_groups} == {
        "linear_attention": "attn", "routed_experts": "experts", "shared_experts": "tp", "router": "none",
        "attention": "attn", "kv_proj": "attn", "embeddings": "tp", "norms": "none", "mtp": "experts",
        "rotary_cache": "none",
    }  # fmt: skip


def test_the_published_checkpoint_total(arch: Any) -> None:
    # decoder + embeddings + head 79,674,391,296 (the model card's "80B") and MTP 1,650,471,424
    assert arch.total_params - MTP == 79_674_391_296
    assert arch.total_params == PUBLISHED_TOTAL_SIZE // BF16 == 81_324_862_720
    # the whole checkpoint in bf16 on one GPU, MTP included, without the rotary buffer (not in the checkpoint)
    assert arch.estimated_weights_per_gpu(Split.of(tp=1), with_mtp=True) - ROTARY == PUBLISHED_TOTAL_SIZE  # 0 % off


def test_tp_split_of_each_group(arch: Any) -> None:
    tp1 = {g.name: g.bytes_per_gpu(Split.of(tp=1)) for g in arch.param_groups}
    tp8 = {g.name: g.bytes_per_gpu(Split.of(tp=8)) for g in arch.param_groups}
    assert tp1 == {name: n * BF16 for name, n in PARAMS.items()} | {"rotary_cache": ROTARY}
    assert tp8 == {
        "linear_attention": 36 * GDN * BF16 // 8,  # GDN heads over attention TP: 303,465,024
        "routed_experts": 48 * EXPERTS * BF16 // 8,  # max(tp, ep) = 8: 19,327,352,832
        "shared_experts": 48 * SHARED * BF16 // 8,  # 37,748,736
        "router": 48 * ROUTER * BF16,  # ReplicatedLinear: 100,859,904 on every rank
        "attention": 12 * Q_O * BF16 // 8,  # 75,497,472
        "kv_proj": 12 * KV * BF16 // 2,  # 2 kv heads: each of the 8 ranks holds one, half of them: 25,165,824
        "embeddings": EMBED * BF16 // 8,  # vocab parallel: 155,582,464
        "norms": NORMS * BF16,  # replicated: 418,816
        "mtp": MTP * BF16 // 8,  # 412,617,856, only with speculative decoding
        "rotary_cache": ROTARY,  # on every GPU
    }
    # the weights line of the default TP8 deployments: everything but the MTP layer = 20,059,645,504 B (18.68 GiB)
    assert arch.estimated_weights_per_gpu(Split.of(tp=8)) == sum(tp8.values()) - tp8["mtp"] == 20_059_645_504
    assert arch.estimated_weights_per_gpu(Split.of(tp=8), with_mtp=True) == 20_059_645_504 + MTP * BF16 // 8
    # DP attention 8 on TP8: the GDN and attention projections are whole on each DP rank, the kv heads too
    dp = {g.name: g.bytes_per_gpu(Split.of(tp=8, dp_attention=8)) for g in arch.param_groups}
    assert (dp["linear_attention"], dp["attention"], dp["kv_proj"]) == (
        36 * GDN * BF16,
        12 * Q_O * BF16,
        12 * KV * BF16,
    )


def test_which_layers_are_full() -> None:
    c = _config()
    fields = Fields(c, (), lambda path, msg: ConfigError(msg, source="t", key=".".join(map(str, path))))
    interval = full_attention_layers(fields, 48)
    assert [i for i, f in enumerate(interval) if f] == list(range(3, 48, 4))  # (i + 1) % 4 == 0: 12 layers
    # an explicit layer_types wins: one more full layer moves one GDN layer's parameters to attention
    types = ["full_attention" if f else "linear_attention" for f in interval]
    types[0] = "full_attention"
    w = param_groups_from_hf(c | {"layer_types": types}, "t")
    got = {g.name: g.params for g in w.groups}
    assert got["linear_attention"] == 35 * GDN and got["attention"] == 13 * Q_O and got["kv_proj"] == 13 * KV
    assert w.total_params == PARAMS_TOTAL - GDN + Q_O + KV + 2 * 256 - 128


PARAMS_TOTAL = sum(PARAMS.values())


def test_dense_layers_and_no_gate() -> None:
    c = _config()
    # mlp_only_layers [0]: layer 0 is a dense MLP of intermediate_size 5,120 (3 × 5,120 × 2,048 = 31,457,280)
    w = param_groups_from_hf(c | {"mlp_only_layers": [0]}, "t")
    got = {g.name: g.params for g in w.groups}
    assert got["dense_mlp"] == 3 * 5120 * 2048
    assert got["routed_experts"] == 47 * EXPERTS and got["router"] == 47 * ROUTER
    # attn_output_gate false: q_proj is heads × head_dim only (4,096 × 2,048 fewer a full layer and in MTP)
    w = param_groups_from_hf(c | {"attn_output_gate": False}, "t")
    assert w.total_params == PARAMS_TOTAL - 13 * 4096 * 2048


def test_fp8_names_resolve() -> None:
    # fp8 128×128 blocks with in_proj_ba left bf16 by name: one layer's GDN = qkvz 25,165,824 B + 96 × 16 blocks
    # × 4 B (6,144) + out_proj 8,388,608 + 16 × 32 × 4 (2,048) + in_proj_ba bf16 131,072 × 2 + conv1d, A_log,
    # dt_bias in the checkpoint dtype (32,768 + 64) × 2 = 33,890,432 B; 36 layers: 1,220,055,552 B
    c = _config() | {
        "quantization_config": {
            "quant_method": "fp8",
            "weight_block_size": [128, 128],
            "modules_to_not_convert": ["linear_attn.in_proj_ba"],
        }
    }
    w = param_groups_from_hf(c, "t")
    gdn = next(g for g in w.groups if g.name == "linear_attention")
    per_layer = (QKVZ + 96 * 16 * 4) + (OUT + 16 * 32 * 4) + BA * BF16 + (CONV + A_DT) * BF16
    assert per_layer == 33_890_432
    assert gdn.bytes_per_gpu(Split.of(tp=1)) == 36 * per_layer == 1_220_055_552


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"layer_types": ["full_attention"] * 47}, "layer_types"),
        ({"layer_types": ["sliding_attention"] * 48}, "layer_types"),
        ({"linear_num_value_heads": 24}, "linear_num_value_heads"),
        ({"num_key_value_heads": 3}, "num_attention_heads"),
        ({"partial_rotary_factor": 1.5}, "partial_rotary_factor"),
    ],
)
def test_bad_config_names_the_key(change: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as e:
        param_groups_from_hf(_config() | change, "config.json")
    assert e.value.key == key


def test_preset_loads_as_hybrid(arch: Any) -> None:
    assert arch.architecture == "Qwen3NextForCausalLM"
    assert (arch.num_layers, arch.max_position_embeddings) == (48, 262_144)
    assert "bf16 checkpoint" in arch.weights_summary and not arch.weights_assumptions


def test_a_config_without_mlp_fields_has_no_groups(tmp_path: Any) -> None:
    # neither num_experts nor intermediate_size: the MLP is not described, so no parameter is counted (never a
    # silent undercount); the loader then asks for weights_per_gpu and says why
    mlp = ("num_experts", "moe_intermediate_size", "shared_expert_intermediate_size", "intermediate_size")
    c = {k: v for k, v in _config().items() if k not in mlp}
    w = param_groups_from_hf(c, "t")
    assert (w.groups, w.family) == ((), "")
    (tmp_path / "config.json").write_text(json.dumps(c))
    r = CliRunner().invoke(app, ["admit", "--ctx", "4K", "--model", str(tmp_path / "config.json")])
    assert r.exit_code == 2
    assert "no hidden_size or leaves the MLP out" in r.stderr and "weights_per_gpu" in r.stderr
    # with the weights given, it plans (exit 0 or 1 is a verdict)
    r = CliRunner().invoke(
        app, ["admit", "--ctx", "4K", "--model", str(tmp_path / "config.json"), "--set", "weights_per_gpu=19GiB"]
    )
    assert r.exit_code == 0, r.stdout[-500:]
