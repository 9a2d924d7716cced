"""Survivors of the sampled mutation check (scripts/mutate.py, issue 26) on kvplan/models/quant.py, seed 56926.

Each expected size is derived in a comment from the checkpoint's tensors as the engine loads them (vLLM
``model_executor/layers/quantization/``: gptq.py ``GPTQConfig``, awq.py ``AWQConfig.from_config``, fp8.py
``Fp8LinearMethod.create_weights``, compressed_tensors/), never from kvplan's own output.
"""

from __future__ import annotations

from typing import Any

import pytest

from kvplan.errors import ConfigError
from kvplan.limits import MAX_MODULE_PATTERN_REPEATS, MAX_MODULE_PATTERNS
from kvplan.models.quant import NVFP4, resolve

GATE = "model.layers.3.mlp.experts.0.gate_proj"
Q_PROJ = "model.layers.3.self_attn.q_proj"


def _q(q: dict[str, Any], dtype: str = "bfloat16") -> Any:
    return resolve({"torch_dtype": dtype, "quantization_config": q}, "cfg")


def _ct(weights: dict[str, Any], targets: list[str] | None = None) -> dict[str, Any]:
    return {
        "quant_method": "compressed-tensors",
        "config_groups": {"group_0": {"targets": targets or ["Linear"], "weights": weights}},
    }


def test_gptq_int3_is_served_and_its_natural_fraction_is_exact() -> None:
    # vLLM gptq.py GPTQConfig.__init__: `if self.weight_bits not in [2, 3, 4, 8]: raise` — 3 bits load.
    gptq = {"quant_method": "gptq", "bits": 3, "group_size": 128, "sym": True}
    s = _q(gptq).scheme_for(Q_PROJ)
    # 4096 × 4096 int3: 16,777,216 × 3 / 8 = 6,291,456 B of qweight; 32 groups × 4096 rows × 2 B fp16 scales =
    # 262,144 B; qzeros 32 × 4096 × 3 bits = 49,152 B; g_idx 4096 × 4 B = 16,384 B → 6,619,136 B
    assert s.bytes_for(4096, 4096) == 6_291_456 + 262_144 + 49_152 + 16_384 == 6_619_136
    # a group of 128 values holds 128 × 3 + 16 (scale) + 3 (zero) = 403 bits, not a whole number of bytes:
    # 403 bits over 8 × 128 = 1,024 values-bytes, i.e. 403 / 1,024 B a value
    assert s.natural == (403, 1024)


def test_nvfp4_natural_is_9_bytes_a_16_value_group() -> None:
    # 16 e2m1 values (4 bits each, 8 B) + one fp8 e4m3 scale (1 B) = 9 B per 16 values
    assert NVFP4.natural == (9, 16)


def test_gptq_and_fp8_tensor_carry_bytes_beyond_the_per_value_ones() -> None:
    # GPTQ's g_idx (int32 an input column) and fp8's per-tensor fp32 scale are not per value
    assert _q({"quant_method": "gptq", "bits": 4, "group_size": 128}).scheme_for(Q_PROJ).has_extras
    assert _q({"quant_method": "fp8"}).scheme_for(Q_PROJ).has_extras
    assert not _q({"quant_method": "fp8", "weight_block_size": [128, 128]}).scheme_for(Q_PROJ).has_extras


def test_fp8_block_of_64_rows_by_128_columns() -> None:
    # vLLM fp8.py create_weights: weight_scale_inv is (ceil(out / block_n), ceil(in / block_k)) fp32.
    # 4096 × 4096 in 64 × 128 blocks: 64 × 32 = 2,048 scales × 4 B = 8,192 B + 16,777,216 B of e4m3
    s = _q({"quant_method": "fp8", "weight_block_size": [64, 128]}).scheme_for(Q_PROJ)
    assert s.bytes_for(4096, 4096) == 16_777_216 + 8_192
    assert s.name == "fp8 e4m3, fp32 scale per 64×128 block"


def test_awq_reads_w_bit_and_q_group_size() -> None:
    # AutoAWQ's quant_config spells bits and group w_bit / q_group_size (vLLM awq.py AWQConfig.from_config reads
    # ["w_bit", "bits"] and ["q_group_size", "group_size"]).
    # 4096 × 4096: 8,388,608 + 32 groups × 4096 × 2 B = 262,144 + zeros 32 × 4096 × 0.5 B = 65,536 → 8,716,288 B
    s = _q({"quant_method": "awq", "w_bit": 4, "q_group_size": 128}).scheme_for(Q_PROJ)
    assert s.bytes_for(4096, 4096) == 8_716_288


@pytest.mark.parametrize(
    ("q", "key"),
    [
        ({"quant_method": "awq", "w_bit": 4}, "quantization_config.group_size"),
        ({"quant_method": "awq", "q_group_size": 128}, "quantization_config.bits"),
        ({"quant_method": "gptq", "bits": 4}, "quantization_config.group_size"),
        ({"quant_method": "gptq", "group_size": 128, "w_bit": 4}, "quantization_config.bits"),
    ],
)
def test_awq_and_gptq_need_their_bits_and_group_size(q: dict[str, Any], key: str) -> None:
    # vLLM's AWQConfig / GPTQConfig.from_config read bits and group size with get_from_keys, which raises when no key
    # is found: no default (kvplan took 4 bits and a group of 128); GPTQ reads "bits" only, not AWQ's "w_bit"
    with pytest.raises(ConfigError) as e:
        _q(q)
    assert e.value.key == key and "missing (required" in str(e.value)


def test_the_weights_line_names_gptq_g_idx_and_not_awq() -> None:
    # what `kvplan weights` prints as the checkpoint's storage (Quantization.summary)
    gptq = _q({"quant_method": "gptq", "bits": 4, "group_size": 128})
    assert gptq.summary == "gptq: int4 GPTQ group 128 (fp16 scales, zero points, int32 g_idx); bf16 elsewhere"
    awq = _q({"quant_method": "awq", "bits": 4, "group_size": 64, "zero_point": False})
    assert awq.summary == "awq: int4 AWQ group 64 (fp16 scales); bf16 elsewhere"


def test_compressed_tensors_scale_dtype_fp8_is_one_byte_a_group() -> None:
    # a config's scale_dtype wins over the model dtype: int4 group 32 with float8_e4m3fn scales, 2048 × 7168:
    # weight_packed 7,340,032 B + 458,752 groups × 1 B = 7,798,784 B
    s = _q(_ct({"num_bits": 4, "type": "int", "strategy": "group", "group_size": 32, "scale_dtype": "float8_e4m3fn"}))
    assert s.scheme_for(Q_PROJ).bytes_for(2048, 7168) == 7_340_032 + 458_752 == 7_798_784


def test_compressed_tensors_re_targets_match_from_the_start() -> None:
    # compressed-tensors targets: "re:" + a regex matched from the start of the module name (vLLM
    # compressed_tensors/utils.py _is_equal_or_regex_match: re.match(target[3:], value))
    q = _q(_ct({"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128}, ["re:.*mlp\\.experts.*"]))
    assert q.scheme_for(GATE).weight_bits == 4
    assert q.scheme_for(Q_PROJ).weight_bits == 16  # not targeted: the checkpoint dtype


def test_compressed_tensors_block_default_and_block_shapes() -> None:
    fp8 = {"num_bits": 8, "type": "float", "strategy": "block"}
    # llm-compressor's FP8_BLOCK preset writes block_structure [128, 128]; absent, the same 128 × 128:
    # 7168 × 2048: 56 × 16 = 896 fp32 scales = 3,584 B + 14,680,064 B
    assert _q(_ct(fp8)).scheme_for(Q_PROJ).bytes_for(7168, 2048) == 14_680_064 + 3_584
    # [64, 128]: 4096 × 4096 → 64 × 32 = 2,048 scales × 4 B = 8,192 B + 16,777,216 B
    s = _q(_ct({**fp8, "block_structure": [64, 128]})).scheme_for(Q_PROJ)
    assert s.bytes_for(4096, 4096) == 16_777_216 + 8_192
    # one number is a square block: [256] → 16 × 16 = 256 scales × 4 B = 1,024 B
    s = _q(_ct({**fp8, "block_structure": [256]})).scheme_for(Q_PROJ)
    assert s.bytes_for(4096, 4096) == 16_777_216 + 1_024


def test_compressed_tensors_int8_channel_asymmetric_keeps_a_scale_and_zero_a_row() -> None:
    # per channel, asymmetric int8: one bf16 scale (2 B) and one int8 zero point (1 B) per output row:
    # 4096 × 4096 → 16,777,216 + 4096 × 3 = 16,789,504 B
    s = _q(_ct({"num_bits": 8, "type": "int", "strategy": "channel", "symmetric": False})).scheme_for(Q_PROJ)
    assert s.bytes_for(4096, 4096) == 16_777_216 + 12_288 == 16_789_504


def test_an_unknown_method_is_shown_up_to_64_characters() -> None:
    name = "m" * 64
    assert _q({"quant_method": name}).assumptions == (f"assumed bf16: quant_method {name!r} is not modelled",)
    longer = _q({"quant_method": name + "tail"}).assumptions
    assert longer == (f"assumed bf16: quant_method {name!r} is not modelled",)


@pytest.mark.parametrize("group", ["128", 0, 1.5])
def test_a_group_size_that_is_not_a_nonzero_integer_names_its_key(group: object) -> None:
    with pytest.raises(ConfigError) as e:
        _q({"quant_method": "gptq", "bits": 4, "group_size": group})
    assert e.value.key == "quantization_config.group_size"
    assert "expected an integer from -1 to 16,777,216" in str(e.value)


def test_module_lists_hold_up_to_4096_names() -> None:
    names = [f"model.layers.{i}.mlp.gate" for i in range(MAX_MODULE_PATTERNS)]
    q = _q({"quant_method": "fp8", "modules_to_not_convert": names})
    assert len(q.ignore) == 4096
    with pytest.raises(ConfigError) as e:
        _q({"quant_method": "fp8", "modules_to_not_convert": [*names, "lm_head"]})
    assert e.value.key == "quantization_config.modules_to_not_convert"
    assert "at most 4,096 module names" in str(e.value)


def test_the_repeat_limit_reads_the_pattern_after_re() -> None:
    # r"\*+a*b*c*": the escaped star is a literal, so the repeats are +, *, *, * — 4, the limit, accepted
    assert MAX_MODULE_PATTERN_REPEATS == 4
    q = _q({"quant_method": "compressed-tensors", "ignore": ["re:\\*+a*b*c*"]})
    assert q.ignore == ("re:\\*+a*b*c*",)
    with pytest.raises(ConfigError) as e:
        _q({"quant_method": "compressed-tensors", "ignore": ["re:\\*+a*b*c*d*"]})
    assert e.value.key == "quantization_config.ignore.0"
    assert "more than 4 repeats" in str(e.value)


@pytest.mark.parametrize(
    ("q", "key", "words"),
    [
        # vLLM gptq.py GPTQConfig: only 2/3/4/8 bits load
        (
            {"quant_method": "gptq", "bits": 5, "group_size": 128},
            "quantization_config.bits",
            "expected 2, 3, 4 or 8 bits, got 5",
        ),
        # a weight_block_size is one or two block sides, each 1 .. 65,536
        (
            {"quant_method": "fp8", "weight_block_size": [128, 65_537]},
            "quantization_config.weight_block_size",
            "expected one or two integers from 1 to 65,536, got [128, 65537]",
        ),
        # limits.MAX_MODULE_PATTERN_CHARS = 512
        (
            {"quant_method": "fp8", "ignored_layers": ["x" * 513]},
            "quantization_config.ignored_layers.0",
            "expected a module name of at most 512 characters",
        ),
    ],
)
def test_refusals_say_their_numbers(q: dict[str, Any], key: str, words: str) -> None:
    with pytest.raises(ConfigError) as e:
        _q(q)
    assert e.value.key == key and words in str(e.value)


def test_too_many_compressed_tensors_patterns_are_counted_in_the_refusal() -> None:
    # limits.MAX_MODULE_REGEXES = 64 re: patterns for ignore and targets together: 65 refused, each counted
    ignore = [f"re:model\\.layers\\.{i}\\." for i in range(65)]
    with pytest.raises(ConfigError) as e:
        _q({"quant_method": "compressed-tensors", "ignore": ignore})
    assert "65 module patterns (65 of them re:) are past kvplan's limits of 4,096 (64 re:)" in str(e.value)


def test_an_unmodelled_torch_dtype_is_shown_to_40_characters() -> None:
    q = resolve({"torch_dtype": "float8_e5m2_" + "x" * 40}, "cfg")
    # the first 40 characters: 'float8_e5m2_' (12) and 28 x
    assert q.assumptions == ("assumed bf16: torch_dtype 'float8_e5m2_" + "x" * 28 + "' is not modelled",)


# --- fresh seed 47349 (issue 26): survivors of the second sample


def test_compressed_tensors_nvfp4_weights_are_fp8_scales_per_16_and_one_fp32_global() -> None:
    # vLLM compressed_tensors_w4a16_nvfp4.py CompressedTensorsW4A16Fp4.create_weights: weight_packed uint8
    # (rows, cols / 2), weight_scale float8_e4m3fn (rows, cols / 16), weight_global_scale float32 (1 a matrix).
    # 4096 × 4096: 8,388,608 + 4096 × 256 × 1 = 1,048,576 + 4 = 9,437,188 B (no scale_dtype given: fp8, not fp32)
    q = _q(_ct({"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16, "symmetric": True}))
    assert q.scheme_for(Q_PROJ).bytes_for(4096, 4096) == 9_437_188
    # and the weights line names those scales as vLLM holds them: fp8 for fp4 weights, fp32 for fp8 weights
    assert q.summary == "compressed-tensors: fp4 group 16 (fp8 scales); bf16 elsewhere"
    fp8 = _q(_ct({"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True}))
    assert fp8.scheme_for(Q_PROJ).name == "fp8 channel (fp32 scales)"


def test_compressed_tensors_scale_dtype_float32_is_four_bytes_a_scale() -> None:
    # int8 per channel on a bf16 model with the config's own scale_dtype torch.float32: weight 4096 × 4096 × 1 B =
    # 16,777,216, one 4-byte scale a row: 4096 × 4 = 16,384 → 16,793,600 B (without it the scales are the model
    # dtype's 2 B: 16,785,408)
    ch = {"num_bits": 8, "type": "int", "strategy": "channel", "symmetric": True}
    assert _q(_ct({**ch, "scale_dtype": "torch.float32"})).scheme_for(Q_PROJ).bytes_for(4096, 4096) == 16_793_600
    assert _q(_ct(ch)).scheme_for(Q_PROJ).bytes_for(4096, 4096) == 16_785_408


def test_a_repeated_group_is_refused_showing_its_first_60_characters() -> None:
    # the refusal is one line: the pattern after "re:" shown to 60 characters
    pattern = "(a.*)*" + "b" * 100
    with pytest.raises(ConfigError) as e:
        _q({"quant_method": "compressed-tensors", "ignore": ["re:" + pattern]})
    assert e.value.detail == f"a repeated group in {pattern[:60]!r} is refused (its matching time can explode)"
    assert pattern[:60] == "(a.*)*" + "b" * 54


def test_a_bad_integer_is_said_in_at_most_120_characters() -> None:
    # the value's repr is cut so the detail line is 120 characters at most
    with pytest.raises(ConfigError) as e:
        _q({"quant_method": "gptq", "bits": "4" * 500})
    assert len(e.value.detail) == 120 and e.value.detail.startswith("expected an integer from 1 to 16,777,216, got '44")


def test_a_required_count_of_1_is_read() -> None:
    # Fields.required's minimum is 1: a model of one attention head and one layer is a model (vLLM reads any
    # positive count); 0 is refused
    from kvplan.models.weights import param_groups_from_hf

    cfg = {"hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 1, "intermediate_size": 128}
    w = param_groups_from_hf({**cfg, "vocab_size": 10}, "tiny")
    # q, k, v, o 64 × 64 each = 16,384; MLP 3 × 64 × 128 = 24,576; embeddings 2 × 10 × 64 = 1,280; norms 3 × 64 = 192
    assert w.total_params == 16_384 + 24_576 + 1_280 + 192
    with pytest.raises(ConfigError, match="expected an integer from 1"):
        param_groups_from_hf({**cfg, "num_attention_heads": 0}, "tiny")


@pytest.mark.parametrize(
    ("scale_dtype", "scale_bytes"),
    [("torch.bfloat16", 2), ("float16", 2), ("torch.float8_e4m3fn", 1), ("float8_e8m0fnu", 1), ("uint8", 1)],
)
def test_compressed_tensors_each_scale_dtype_sizes_its_scales(scale_dtype: str, scale_bytes: int) -> None:
    # torch's element sizes: bfloat16 / float16 2 B, float8_e4m3fn / float8_e8m0fnu / uint8 1 B (MXFP4's e8m0
    # scales ship as uint8). int8 per channel, 4096 × 4096: 16,777,216 B of weight + 4096 rows × the scale's bytes
    ch = {"num_bits": 8, "type": "int", "strategy": "channel", "symmetric": True, "scale_dtype": scale_dtype}
    assert _q(_ct(ch)).scheme_for(Q_PROJ).bytes_for(4096, 4096) == 16_777_216 + 4096 * scale_bytes


def test_gptq_per_channel_keeps_a_scale_and_zero_a_row_and_g_idx_a_column() -> None:
    # vLLM gptq.py GPTQLinearMethod.create_weights with group_size -1: scale_and_zero_size 1, so scales (1, out)
    # fp16 = 2 B a row, qzeros (1, out / 8) int32 = 4 bits a row, g_idx (in,) int32 = 4 B a column. 4096 × 4096
    # int4: qweight 8,388,608 + scales 8,192 + qzeros 2,048 + g_idx 16,384 = 8,415,232 B
    s = _q({"quant_method": "gptq", "bits": 4, "group_size": -1, "sym": True}).scheme_for(Q_PROJ)
    assert s.bytes_for(4096, 4096) == 8_415_232


def test_gptq_group_size_1_is_a_scale_and_zero_a_value() -> None:
    # group_size 1: scales (in / 1, out) fp16 and qzeros (in, out / 8): 4 + 16 + 4 = 24 bits = 3 B a value, and
    # g_idx 4 B a column: 4096 × 4096 × 3 + 16,384 = 50,348,032 B (no per-row scale: the scales are per group)
    s = _q({"quant_method": "gptq", "bits": 4, "group_size": 1, "sym": True}).scheme_for(Q_PROJ)
    assert s.bytes_for(4096, 4096) == 50_348_032


# --- second fresh seed 37409


def test_an_ignore_entry_naming_a_layer_leaves_only_that_layer_unquantized() -> None:
    # modules_to_not_convert matches as a substring of the module name (transformers' own matching):
    # "model.layers.3.mlp" is in layer 3's expert names and not in layer 30's ("layers.30.mlp")
    q = _q({"quant_method": "fp8", "weight_block_size": [128, 128], "modules_to_not_convert": ["model.layers.3.mlp"]})
    assert q.scheme_for(GATE).name == "bf16"
    assert q.scheme_for(GATE.replace("layers.3.", "layers.30.")).weight_bits == 8
    assert q.scheme_for(Q_PROJ).weight_bits == 8  # layer 3's attention is not under mlp


def test_modelopt_nvfp4_without_group_size_groups_16() -> None:
    # vLLM modelopt.py ModelOptNvFp4Config.from_config: quant_config.get("group_size", 16), 16 values a scale:
    # 4096 × 4096: 8,388,608 B of e2m1 + 4096 × 256 fp8 scales 1,048,576 + two fp32 globals 8 = 9,437,192 B
    s = _q({"quant_method": "modelopt", "quant_algo": "NVFP4"}).scheme_for(Q_PROJ)
    assert s.bytes_for(4096, 4096) == 9_437_192


def test_compressed_tensors_int8_per_tensor_asymmetric_keeps_one_scale_and_one_zero() -> None:
    # compressed-tensors initialize_qparams: weight_scale and weight_zero_point of the strategy's shape, (1,) per
    # tensor; the scale in the model dtype (bf16, 2 B), the zero point in the quantized type (int8, 1 B):
    # 4096 × 4096 → 16,777,216 + 3 = 16,777,219 B (symmetric: no zero point, 16,777,218)
    w = {"num_bits": 8, "type": "int", "strategy": "tensor"}
    assert _q(_ct({**w, "symmetric": False})).scheme_for(Q_PROJ).bytes_for(4096, 4096) == 16_777_219
    assert _q(_ct({**w, "symmetric": True})).scheme_for(Q_PROJ).bytes_for(4096, 4096) == 16_777_218
