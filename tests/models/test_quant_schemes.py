"""Quantized checkpoints in the weights estimate (kvplan.models.quant): bytes per scheme, which modules stay plain.

Each expected size is derived in a comment from the checkpoint's tensors: packed weights (bits / 8 a value), one
scale per group (its dtype's bytes), a zero point per group where the scheme stores one.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from kvplan.errors import ConfigError
from kvplan.models.arch import Split
from kvplan.models.quant import Scheme, resolve
from kvplan.models.weights import param_groups_from_hf

HF = Path(__file__).parents[1] / "data" / "hf"
Q_PROJ = "model.layers.0.self_attn.q_proj"


def per_param(q: dict[str, Any], module: str = Q_PROJ, dtype: str = "bfloat16") -> Fraction:
    return resolve({"torch_dtype": dtype, "quantization_config": q}, "cfg").scheme_for(module).bytes_per_param


def scheme(q: dict[str, Any], module: str = Q_PROJ) -> Scheme:
    return resolve({"torch_dtype": "bfloat16", "quantization_config": q}, "cfg").scheme_for(module)


def test_awq_int4_group128_linear_4096x4096() -> None:
    # qweight 4096 × 4096 / 2 = 8,388,608 B (8 values an int32); scales 4096/128 = 32 groups × 4096 outputs × 2 B
    # (fp16) = 262,144 B; qzeros 32 × 4096 × 4 bits = 65,536 B → 8,716,288 B.
    awq = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"}
    assert 4096 * 4096 * per_param(awq) == 8_388_608 + 262_144 + 65_536 == 8_716_288
    # zero_point false drops the qzeros: 8,388,608 + 262,144 = 8,650,752 B.
    assert 4096 * 4096 * per_param({**awq, "zero_point": False}) == 8_650_752


def test_gptq_int4_and_int8_store_zeros_even_when_symmetric() -> None:
    gptq = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True}
    # the GPTQ format keeps qzeros (4 bits a group) with sym: the same 8,716,288 B as AWQ for 4096 × 4096
    assert 4096 * 4096 * per_param(gptq) == 8_716_288
    # int8: 16,777,216 B + scales 32 × 4096 × 2 = 262,144 + zeros 32 × 4096 × 1 = 131,072 → 17,170,432 B
    assert 4096 * 4096 * per_param({**gptq, "bits": 8}) == 17_170_432
    # a whole matrix adds GPTQ's g_idx, one int32 an input column: 8,716,288 + 4096 × 4 = 8,732,672 B
    assert scheme(gptq).bytes_for(4096, 4096) == 8_716_288 + 16_384 == 8_732_672
    # group_size -1 (per channel): 8,388,608 B of values + one fp16 scale and one 4-bit zero a row,
    # 4096 × 2.5 = 10,240 B, + g_idx 16,384 B → 8,415,232 B
    assert scheme({**gptq, "group_size": -1}).bytes_for(4096, 4096) == 8_388_608 + 10_240 + 16_384 == 8_415_232


def test_fp8_block_scales_one_fp32_per_128x128() -> None:
    fp8 = {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]}
    # a Kimi-K2 expert gate_proj 2048 × 7168: 14,680,064 B of e4m3 + (2048/128) × (7168/128) = 16 × 56 = 896
    # blocks × 4 B = 3,584 B → 14,683,648 B
    assert 2048 * 7168 * per_param(fp8) == 14_680_064 + 896 * 4 == 14_683_648
    # no weight_block_size: 1 B a value and one fp32 scale a tensor: 4096 × 4096 → 16,777,220 B; static
    # activations add an fp32 input scale: 16,777,224 B
    assert scheme({"quant_method": "fp8"}).bytes_for(4096, 4096) == 16_777_220
    assert scheme({"quant_method": "fp8", "activation_scheme": "static"}).bytes_for(4096, 4096) == 16_777_224
    # 61 such matrices at once: count multiplies every part (the 896 scales too)
    assert scheme(fp8).bytes_for(2048, 7168, 61) == 61 * 14_683_648


def test_nvfp4_and_mxfp4() -> None:
    # NVFP4 4096 × 4096: 8,388,608 B of e2m1 + 16,777,216 / 16 = 1,048,576 fp8 scales → 9,437,184 B
    nvfp4 = {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16}
    assert 4096 * 4096 * per_param(nvfp4) == 9_437_184
    # the whole tensor adds weight_scale_2 and input_scale, fp32 each: 9,437,192 B
    assert scheme(nvfp4).bytes_for(4096, 4096) == 9_437_192
    # MXFP4 (gpt-oss, 2880 × 2880): 4,147,200 B of e2m1 + 8,294,400 / 32 = 259,200 e8m0 scales → 4,406,400 B
    assert 2880 * 2880 * per_param({"quant_method": "mxfp4"}) == 4_406_400


def test_compressed_tensors_int4_group32_symmetric_and_asymmetric() -> None:
    group = {
        "targets": ["Linear"],
        "weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 32, "symmetric": True},
    }
    ct = {"quant_method": "compressed-tensors", "format": "pack-quantized", "config_groups": {"group_0": group}}
    # 2048 × 7168: weight_packed 7,340,032 B + weight_scale 14,680,064 / 32 = 458,752 bf16 scales × 2 = 917,504 B
    # → 8,257,536 B (9/16 B a value)
    assert 2048 * 7168 * per_param(ct) == 8_257_536
    # asymmetric adds a 4-bit zero point a group: + 458,752 × 0.5 = 229,376 B → 8,486,912 B
    asym = {**ct, "config_groups": {"g": {**group, "weights": {**group["weights"], "symmetric": False}}}}
    assert 2048 * 7168 * per_param(asym) == 8_486_912
    # fp16 checkpoint: fp16 scales, the same 2 B each
    assert 2048 * 7168 * per_param(ct, dtype="float16") == 8_257_536
    # fp8 per channel (RedHatAI "fp8-dynamic"): 1 B a value + one fp32 scale a row (vLLM holds them in fp32):
    # 2048 × 7168 → 14,680,064 + 2048 × 4 = 14,688,256 B
    fp8ch = {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float", "strategy": "channel"}}
    ch = {"quant_method": "compressed-tensors", "config_groups": {"group_0": fp8ch}, "ignore": ["lm_head"]}
    assert scheme(ch).bytes_for(2048, 7168) == 14_688_256


def test_unknown_method_is_said_and_planned_in_the_checkpoint_dtype() -> None:
    q = resolve({"torch_dtype": "bfloat16", "quantization_config": {"quant_method": "bitsandbytes"}}, "cfg")
    assert q.assumptions == ("assumed bf16: quant_method 'bitsandbytes' is not modelled",)
    assert q.scheme_for(Q_PROJ).bytes_per_param == 2
    w = param_groups_from_hf(
        {
            **json.loads((HF / "llama-3.1-8b" / "config.json").read_text()),
            "quantization_config": {"quant_method": "xyz"},
        },
        "cfg",
    )
    assert w.assumptions == ("assumed bf16: quant_method 'xyz' is not modelled",)
    # no torch_dtype at all: bf16, said
    assert resolve({}, "cfg").assumptions == ("assumed bf16: the config names no torch_dtype",)


def test_ignore_lists_each_in_their_own_matching() -> None:
    # compressed-tensors: 're:' patterns match from the start of the name, plain entries the whole name
    ct = resolve(
        {
            "torch_dtype": "bfloat16",
            "quantization_config": {
                "quant_method": "compressed-tensors",
                "config_groups": {
                    "g": {"targets": ["Linear"], "weights": {"num_bits": 4, "strategy": "group", "group_size": 32}}
                },
                "ignore": ["lm_head", "re:.*self_attn.*", r"re:.*mlp\.(gate|up|gate_up|down)_proj.*"],
            },
        },
        "cfg",
    )
    assert ct.scheme_for("model.layers.3.self_attn.kv_b_proj").name == "bf16"
    assert ct.scheme_for("model.layers.0.mlp.gate_proj").name == "bf16"  # the dense layer
    assert ct.scheme_for("model.layers.3.mlp.experts.7.gate_proj").name.startswith("int4 group 32")
    # modelopt: glob patterns
    mo = resolve(
        {
            "torch_dtype": "bfloat16",
            "quantization_config": {
                "quant_method": "modelopt",
                "quant_algo": "NVFP4",
                "exclude_modules": ["lm_head", "model.layers.*.self_attn*"],
            },
        },
        "cfg",
    )
    assert mo.scheme_for("model.layers.9.self_attn.o_proj").name == "bf16"
    assert mo.scheme_for("model.layers.9.mlp.experts.0.up_proj").name.startswith("NVFP4")
    # modules_to_not_convert: substrings, '*' any run (gpt-oss writes "model.layers.*.self_attn")
    mx = resolve(
        {
            "torch_dtype": "bfloat16",
            "quantization_config": {
                "quant_method": "mxfp4",
                "modules_to_not_convert": ["model.layers.*.self_attn", "lm_head"],
            },
        },
        "cfg",
    )
    assert mx.scheme_for("model.layers.12.self_attn.q_proj").name == "bf16"
    assert mx.scheme_for("model.layers.12.mlp.experts.0.up_proj").name.startswith("MXFP4")


def test_qwen3_fp8_router_list_does_not_catch_the_experts() -> None:
    """Qwen3-235B-A22B-FP8 lists 'model.layers.N.mlp.gate' (the router): its experts' gate_proj stay fp8."""
    cfg = json.loads((HF / "qwen3-235b-a22b-fp8" / "config.json").read_text())
    q = resolve(cfg, "qwen3-235b-a22b-fp8")
    assert q.scheme_for("model.layers.1.mlp.experts.0.gate_proj").name.startswith("fp8")
    assert q.scheme_for("model.layers.10.self_attn.k_proj").name.startswith("fp8")
    assert q.scheme_for("lm_head").name == "bf16"


@pytest.mark.parametrize(
    ("q", "key"),
    [
        ({"quant_method": "awq", "bits": 4, "group_size": "128"}, "quantization_config.group_size"),
        ({"quant_method": "gptq", "bits": 5, "group_size": 128}, "quantization_config.bits"),
        ({"quant_method": "fp8", "weight_block_size": [128, 0]}, "quantization_config.weight_block_size"),
        ({"quant_method": "compressed-tensors", "ignore": ["re:(unclosed"]}, "quantization_config.ignore.0"),
        ({"quant_method": "compressed-tensors", "config_groups": []}, "quantization_config.config_groups"),
        ({"quant_method": 7}, "quantization_config.quant_method"),
        ("fp8", "quantization_config"),
    ],
)
def test_bad_quantization_values_name_the_key(q: Any, key: str) -> None:
    with pytest.raises(ConfigError) as e:
        resolve({"torch_dtype": "bfloat16", "quantization_config": q}, "m/config.json")
    assert e.value.key == key and e.value.source == "m/config.json"
    assert "\n" not in str(e.value)


# --------------------------------------------------------------------------- whole checkpoints


def per_gpu(w: Any, split: Split) -> int:
    return sum(g.bytes_per_gpu(split) for g in w.groups)


def test_qwen3_235b_bf16_and_fp8_at_tp8_kv_heads_replicated() -> None:
    bf16 = param_groups_from_hf(json.loads((HF / "qwen3-235b-a22b" / "config.json").read_text()), "q")
    fp8 = param_groups_from_hf(json.loads((HF / "qwen3-235b-a22b-fp8" / "config.json").read_text()), "q8")
    # 94 layers, h 4096, 64 heads × 128, 4 kv heads, 128 experts × 1536, vocab 151,936, every layer MoE:
    # q + o 2 × 4096 × 8192 × 94 = 6,308,233,216; k + v 2 × 4096 × 512 × 94 = 394,264,576;
    # experts 128 × 3 × 4096 × 1536 × 94 = 227,096,395,776; routers 128 × 4096 × 94 = 49,283,072;
    # embeddings 2 × 151,936 × 4096 = 1,244,659,712; norms (2 × 94 + 1) × 4096 + q/k norms 2 × 128 × 94 = 798,208
    # → 235,093,634,560 parameters (the published 235 B).
    assert bf16.total_params == fp8.total_params == 235_093_634_560
    # bf16 at TP8: q/o 12,616,466,432 / 8 = 1,577,058,304; k/v 788,529,152 over min(8, 4 kv heads) = 4 ranks
    # = 197,132,288 (replicated: 2 ranks share each head); experts 454,192,791,552 / 8 = 56,774,098,944;
    # routers whole 98,566,144; embeddings 2,489,319,424 / 8 = 311,164,928; norms whole 1,596,416; the rotary
    # cache whole, 40,960 positions × 128 × 2 B = 10,485,760 → 58,970,102,784 B.
    parts = (1_577_058_304, 197_132_288, 56_774_098_944, 98_566_144, 311_164_928, 1_596_416, 10_485_760)
    assert per_gpu(bf16, Split.of(tp=8)) == sum(parts) == 58_970_102_784
    # fp8 (128×128 blocks, 4,097/4,096 B a value): q/o 6,309,773,312 / 8 = 788,721,664; k/v 394,360,832 / 4 =
    # 98,590,208; experts 227,151,839,232 / 8 = 28,393,979,904; routers, embeddings, norms and rotary cache
    # bf16 as above → 29,703,105,024 B.
    parts = (788_721_664, 98_590_208, 28_393_979_904, 98_566_144, 311_164_928, 1_596_416, 10_485_760)
    assert per_gpu(fp8, Split.of(tp=8)) == sum(parts) == 29_703_105_024


def test_glm_45_air_tp4_dp_attention_2() -> None:
    w = param_groups_from_hf(json.loads((HF / "glm-4.5-air" / "config.json").read_text()), "glm-4.5-air")
    assert w.family == "GQA MoE"
    g = {x.name: x for x in w.groups}
    # 46 layers (layer 0 dense), h 4096, 96 heads × 128, 8 kv heads, 128 routed + 1 shared experts × 1408,
    # dense 10,944, vocab 151,552, one MTP layer.
    # q + o: 2 × 4096 × 12,288 × 46 = 4,630,511,616 + q bias 12,288 × 46 = 565,248 → 4,631,076,864;
    # k + v: 2 × 4096 × 1024 × 46 = 385,875,968 + k/v biases 2 × 1024 × 46 = 94,208 → 385,970,176
    assert g["attention"].params == 4_631_076_864 and g["kv_proj"].params == 385_970_176
    # dense 3 × 4096 × 10,944 = 134,479,872; experts 128 × 3 × 4096 × 1408 × 45 = 99,656,663,040;
    # shared 3 × 4096 × 1408 × 45 = 778,567,680; routers 128 × 4096 × 45 = 23,592,960;
    # embeddings 2 × 151,552 × 4096 = 1,241,513,984;
    # norms 93 × 4096 = 380,928; MTP: q/o 100,663,296 + k/v 8,388,608 + biases 14,336 + experts 2,214,592,512
    # + shared 17,301,504 + eh_proj 2 × 4096² = 33,554,432 → 2,374,514,688
    assert g["dense_mlp"].params == 134_479_872 and g["routed_experts"].params == 99_656_663_040
    assert g["shared_experts"].params == 778_567_680 and g["router"].params == 23_592_960
    assert g["embeddings"].params == 1_241_513_984 and g["mtp"].params == 2_374_514_688
    assert g["norms"].params == 380_928
    # TP4 with DP attention 2: attention over 4 / 2 = 2 ranks, everything else over 4 (experts max(tp, ep) = 4):
    # attention 9,262,153,728 / 2 = 4,631,076,864; k/v 771,940,352 / 2 = 385,970,176 (8 kv heads ≥ 2: no
    # replication); dense 268,959,744 / 4 = 67,239,936; experts 199,313,326,080 / 4 = 49,828,331,520;
    # shared 1,557,135,360 / 4 = 389,283,840; routers 47,185,920 whole; embeddings 2,483,027,968 / 4 =
    # 620,756,992; norms 761,856 whole; rotary cache whole, 131,072 positions × (128 × partial_rotary_factor 0.5)
    # × 2 B = 16,777,216 → 55,987,384,320 B without the MTP layer
    split = Split.of(tp=4, dp_attention=2)
    assert sum(x.bytes_per_gpu(split) for x in w.groups if x.name != "mtp") == 55_987_384_320
    # + MTP (split like the experts) 4,749,029,376 / 4 = 1,187,257,344 when speculative decoding loads it
    assert g["mtp"].bytes_per_gpu(split) == 1_187_257_344


def test_kimi_k2_thinking_int4_experts_fit_tp8_on_h200() -> None:
    """Kimi-K2-Thinking: Kimi-K2's architecture with int4 experts (compressed-tensors, group 32), the rest bf16.

    Architecture: tests/data/hf/kimi-k2/config.json (verbatim Kimi-K2-Instruct; K2-Thinking has the same shapes).
    quantization_config: as printed from moonshotai/Kimi-K2-Thinking's config.json in a public tutorial found in
    the code index (a verbatim config.json was not found: tests/data/hf/README.md); it is the config vLLM's recipe
    vllm-project/recipes moonshotai/Kimi-K2-Think.md serves with `--tensor-parallel-size 8` on 8×H200, logging
    "Available KV cache memory: 46.80 GiB".
    """
    cfg = json.loads((HF / "kimi-k2" / "config.json").read_text())
    cfg["quantization_config"] = {
        "config_groups": {
            "group_0": {
                "input_activations": None,
                "output_activations": None,
                "targets": ["Linear"],
                "weights": {
                    "actorder": None,
                    "block_structure": None,
                    "dynamic": False,
                    "group_size": 32,
                    "num_bits": 4,
                    "observer": "minmax",
                    "observer_kwargs": {},
                    "strategy": "group",
                    "symmetric": True,
                    "type": "int",
                },
            }
        },
        "format": "pack-quantized",
        "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*", "re:.*mlp\\.(gate|up|gate_up|down)_proj.*"],
        "kv_cache_scheme": None,
        "quant_method": "compressed-tensors",
        "quantization_status": "compressed",
    }
    w = param_groups_from_hf(cfg, "kimi-k2-thinking")
    assert w.summary == "compressed-tensors: int4 group 32 (bf16 scales); bf16 elsewhere"
    g = {x.name: x for x in w.groups}
    # attention (bf16, ignored): q_a 7168 × 1536 + q_b 1536 × 64 × 192 + kv_a 7168 × 576 + kv_b 512 × 64 × 256
    # + o 64 × 128 × 7168 = 101,122,048 a layer × 61 = 6,168,444,928 params → 12,336,889,856 B
    # dense layer 0 (bf16, ignored): 3 × 7168 × 18,432 = 396,361,728 → 792,723,456 B
    # routed experts (int4 g32, 9/16 B): 60 × 384 × 3 × 7168 × 2048 = 1,014,686,023,680 → 570,760,888,320 B
    # shared experts (bf16, ignored): 60 × 3 × 7168 × 2048 = 2,642,411,520 → 5,284,823,040 B
    # routers (bf16): 60 × 384 × 7168 = 165,150,720 → 330,301,440 B
    # embeddings + lm_head (bf16): 2 × 163,840 × 7168 = 2,348,810,240 → 4,697,620,480 B
    total = 12_336_889_856 + 792_723_456 + 570_760_888_320 + 5_284_823_040 + 330_301_440 + 4_697_620_480
    assert per_gpu(w, Split.of(tp=1)) == total == 594_203_246_592  # 594.2 GB: the ~594 GB checkpoint
    assert g["routed_experts"].bytes_per_param_num * 16 == 9 * g["routed_experts"].bytes_per_param_den
    # TP8: everything / 8 but the routers (whole): (594,203,246,592 - 330,301,440) / 8 + 330,301,440
    # = 74,234,118,144 + 330,301,440 = 74,564,419,584 B (74.6 GB, 69.4 GiB)
    tp8 = per_gpu(w, Split.of(tp=8))
    assert tp8 == (total - 330_301_440) // 8 + 330_301_440 == 74_564_419_584
    # The recipe's run: 0.9 × H200 CUDA total 143,156 MiB = 135,107,788,390 B; minus these weights and the
    # 46.80 GiB (50,251,117,363 B) of KV cache it logged leaves 10.3 GB for activations and graphs: it fits.
    budget = 143_156 * 2**20 * 9 // 10
    assert 0 < budget - tp8 - int(46.80 * 2**30) < 11 * 10**9
    # Read as bf16 (what an unquantized estimate claims): 1,026,407,202,816 params × 2 B; at TP8 all but the routers
    # / 8: (2,052,814,405,632 - 330,301,440) / 8 + 330,301,440 = 256,890,814,464 B, more than an H200 holds.
    as_bf16 = param_groups_from_hf({**cfg, "quantization_config": None}, "k")
    assert per_gpu(as_bf16, Split.of(tp=8)) == (2 * 1_026_407_202_816 - 330_301_440) // 8 + 330_301_440
    assert per_gpu(as_bf16, Split.of(tp=8)) == 256_890_814_464 > 143_771 * 2**20
