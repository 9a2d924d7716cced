"""A checkpoint's GEMMs as it stores them: the values a packed 4-bit tensor holds (not its U8 bytes), and the
attention projections at the format the checkpoint keeps them in where it is not the MLPs' (NVIDIA's NVFP4
checkpoints keep attention bf16), priced as a part of their own (kvplan.perf.step "attention GEMMs")."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from kvplan.cli._common import load_plan
from kvplan.models.arch import Split
from kvplan.models.from_hf import load_model
from kvplan.models.safetensors import Tensor
from kvplan.models.sharding import param_groups_from_tensors
from kvplan.models.vlm import _text_quantization
from kvplan.perf.predict import GemmFormats, perf
from kvplan.perf.shape import step_shape, weight_bytes_per_gpu
from kvplan.perf.step import Batch, parts
from kvplan.render.perf_report import perf_data
from tests.core.test_evidence_provenance import git_blob_id
from tests.scripts._load import ROOT, load

HF = "tests/data/hf"


def test_a_packed_tensor_counts_the_values_it_holds() -> None:
    # an NVFP4 weight is stored as U8 bytes of two e2m1 values (config_tensors lays it out n_out × n_in // 2), an
    # int4 packing as I32 words of eight; the scales are not values of the GEMM
    w = "model.layers.0.mlp.experts.0.down_proj."
    nv = param_groups_from_tensors((Tensor(name=w + "weight", dtype="U8", shape=(64, 32)),
                                    Tensor(name=w + "weight_scale", dtype="F8_E4M3", shape=(64, 4))),
                                   num_layers=1)[0]  # fmt: skip
    assert (nv.params, nv.values, nv.gemm_params()) == (64 * 32, 64 * 64, 64 * 64)
    i4 = param_groups_from_tensors((Tensor(name=w + "weight_packed", dtype="I32", shape=(64, 8)),), num_layers=1)[0]
    assert (i4.params, i4.gemm_params()) == (64 * 8, 64 * 64)
    # an I32 tensor by another name is no packing: a value an element
    i32 = param_groups_from_tensors((Tensor(name=w + "weight", dtype="I32", shape=(64, 8)),), num_layers=1)[0]
    assert (i32.values, i32.gemm_params()) == (0, 64 * 8)
    f8 = param_groups_from_tensors((Tensor(name=w + "weight", dtype="F8_E4M3", shape=(64, 64)),), num_layers=1)[0]
    assert (f8.values, f8.gemm_params()) == (0, 64 * 64)  # an element a value: params counts them


def test_an_nvfp4_checkpoint_multiplies_what_its_fp8_twin_does() -> None:
    # nvidia/DeepSeek-V3.2-NVFP4 and nvidia/GLM-5-NVFP4 are the same models as their FP8 presets: the same GEMM
    # parameters and 256 routed experts (step_shape read the packed U8 elements before: half the experts' FLOPs and
    # 247 / 249 experts from a dense-MLP layer count of half its size)
    for nvfp4, twin in (("deepseek-v3.2-nvfp4", "deepseek-v3.2"), ("glm-5-nvfp4", "glm-5")):
        a, b = step_shape(load_model(f"{HF}/{nvfp4}")), step_shape(load_model(twin))
        assert (a.dense_params, a.attention_params, a.routed_params, a.num_experts) == (
            b.dense_params, b.attention_params, b.routed_params, 256)  # fmt: skip


def test_nvidias_nvfp4_checkpoints_keep_attention_bf16() -> None:
    # GLM-5-NVFP4's hf_quant_config excludes every layer's self_attn projections and indexer; Kimi-K2.5-NVFP4's ignore
    # list every language_model.model.layers.N.self_attn*; Kimi-K2.5's int4 quantizes only its routed experts
    assert GemmFormats.of(load_model(f"{HF}/glm-5-nvfp4"), True) == GemmFormats("bf16", "fp4", "fp4")
    assert GemmFormats.of(load_model(f"{HF}/kimi-k2.5-nvfp4"), True) == GemmFormats("bf16", "fp4", "fp4")
    assert GemmFormats.of(load_model(f"{HF}/kimi-k2.5/config.json"), True) == GemmFormats("bf16", "bf16", "int4")
    # DeepSeek-V3.1-NVFP4 excludes q_a / q_b / kv_a / kv_b (61 × (7,168 × 1,536 + 1,536 × 128 × 192 + 7,168 × 576 +
    # 512 × 128 × 256) = 4,249,550,848 bf16) and quantizes o_proj (61 × 128 × 128 × 7,168 = 7,163,871,232 values at
    # 9/16 B, + 8 B of fp32 scales each): 12,528,779,752 B over 11,413,422,080 values, 1.098 B a value, which the
    # bytes rule reads as fp8 (0.9 to 1.9), the group holding no one format
    ds = load_model(f"{HF}/deepseek-v3.1-nvfp4")
    g = next(g for g in ds.param_groups if g.name == "attention")
    assert g.gemm_params() == 4_249_550_848 + 7_163_871_232 == 11_413_422_080
    assert (
        g.bytes_per_param_num * g.params // g.bytes_per_param_den
        == 4_249_550_848 * 2 + 7_163_871_232 * 9 // 16 + 61 * 8
    )
    assert GemmFormats.of(ds, True) == GemmFormats("fp8", "fp4", "fp4")
    # an FP8 checkpoint quantizes them alike: nothing apart
    assert GemmFormats.of(load_model("glm-5"), True).apart == ""


def test_the_wrappers_quantization_is_the_text_models(tmp_path: Path) -> None:
    # vLLM and SGLang read hf_config.quantization_config (the wrapper's) and build the text model under
    # "language_model.": kvplan names its modules without the prefix
    q = {"quant_method": "modelopt", "ignore": ["language_model.model.layers.0.self_attn*", "vision_tower*", 3]}
    assert _text_quantization(q) == {"quant_method": "modelopt", "ignore": ["model.layers.0.self_attn*",
                                                                            "vision_tower*", 3]}  # fmt: skip
    # nvidia/Kimi-K2.5-NVFP4 planned: its experts at NVFP4's 9/16 B a value, not bf16's 2
    arch = load_model(f"{HF}/kimi-k2.5-nvfp4")
    experts = next(g for g in arch.param_groups if g.name == "routed_experts")
    assert (experts.bytes_per_param_num * 16) // experts.bytes_per_param_den == 9
    # the wrapper's wins over the text config's; with neither the checkpoint is its dtype's (bf16)
    doc = json.loads((ROOT / HF / "kimi-k2.5-nvfp4" / "config.json").read_text())
    plain = {k: v for k, v in doc.items() if k != "quantization_config"}
    both = {**doc, "text_config": {**doc["text_config"], "quantization_config": {"quant_method": "fp8"}}}
    for config, want in ((plain, "bf16"), (both, "fp4")):
        path = tmp_path / want / "config.json"
        path.parent.mkdir()
        path.write_text(json.dumps(config))
        assert GemmFormats.of(load_model(str(path)), True).experts == want


def test_attention_projections_apart_are_their_own_part() -> None:
    # GLM-5 at tp 8, a step of 1,000 prefill tokens and one sampled: 13,602,541,056 attention + indexer parameters of
    # 17,231,157,504 dense; the LM head (154,880 × 6,144 = 951,582,720) stays with the other dense GEMMs, bf16 bytes
    shape, split = step_shape(load_model("glm-5")), Split.of(tp=8)
    b = Batch(prefill_tokens=1000, sampled=1)
    apart = {p.name: p for p in parts(shape, b, split, "fp4", "fp4", attention_quant="bf16")}
    att, dense = apart["attention GEMMs"], apart["dense GEMMs"]
    assert (att.flops, att.bytes, att.dtype) == (2 * 1000 * 13_602_541_056 // 8, 13_602_541_056 * 2 // 8, "bf16")
    rest = 17_231_157_504 - 13_602_541_056
    assert dense.flops == 2 * (1000 * rest + 951_582_720) // 8 and dense.dtype == "fp4"
    # 3,628,616,448 at 9/16 B and the LM head at 2, each a ceiling over 8 GPUs
    assert dense.bytes == -(-rest * 9 // (16 * 8)) + 951_582_720 * 2 // 8
    # the weights a GPU reads: all dense at 9/16 B but the LM head, each part a ceiling over 8 GPUs; 724,775,731,200
    # routed-expert values over the 8 GPUs the experts split across (tp 8, no EP)
    routed = -(-724_775_731_200 * 9 // (16 * 8))
    assert weight_bytes_per_gpu(shape, split, "fp4", "fp4") == (
        -(-17_231_157_504 * 9 // (16 * 8)) + 951_582_720 * 2 // 8, routed)  # fmt: skip
    assert weight_bytes_per_gpu(shape, split, "fp4", "fp4", "fp4") == weight_bytes_per_gpu(shape, split, "fp4", "fp4")
    assert weight_bytes_per_gpu(shape, split, "fp4", "fp4", "bf16") == (dense.bytes + att.bytes, routed)
    # the same format: one part, as without the argument
    same = parts(shape, b, split, "fp4", "fp4", attention_quant="fp4")
    assert same == parts(shape, b, split, "fp4", "fp4") and "attention GEMMs" not in {p.name for p in same}


def test_perf_says_which_format_the_attention_ran_at() -> None:
    plan = load_plan(f"{HF}/glm-5-nvfp4", "glm-5.3-8xh200-sglang", ["gpu=b200"])
    r = perf(plan.arch, plan, isl=1024, osl=1024, concurrency=4)
    data = perf_data(r)
    assert (data["gemm_quant"], data["attention_gemm_quant"], data["expert_gemm_quant"]) == ("fp4", "bf16", "fp4")
    assert any(line.startswith("GEMMs at fp4 (attention projections bf16, experts fp4)") for line in r.assumptions)
    preset = load_plan("glm-5", "glm-5.3-8xh200-sglang", [])
    fp8 = perf(preset.arch, preset, isl=1024, osl=1024, concurrency=4)
    assert perf_data(fp8)["attention_gemm_quant"] is None
    assert any(line.startswith("GEMMs at fp8 (experts fp8) as the checkpoint's") for line in fp8.assumptions)


def test_the_calibration_prices_each_row_as_its_checkpoint() -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))  # perf_calibrate imports its sibling _silicon_rows
    pc = load("kvplan_perf_calibrate", "benchmarks/perf_calibrate.py")
    row = {"precision": "fp4", "gemm_quant_mode": "nvfp4", "moe_quant_mode": "nvfp4"}
    assert pc.formats_of(row, "glm-5") == GemmFormats("bf16", "fp4", "fp4")
    assert pc.formats_of(row, "deepseek-v3") == GemmFormats("fp8", "fp4", "fp4")
    assert pc.formats_of(row, "gpt-oss-120b") == GemmFormats("bf16", "bf16", "fp4")
    assert pc.formats_of(row, "llama-3.1-70b") == GemmFormats("fp4", "fp4", "fp4")  # no checkpoint named: the CSV's
    int4 = {"precision": "int4", "gemm_quant_mode": "int4_wo", "moe_quant_mode": "int4_wo"}
    assert pc.formats_of(int4, "kimi-k2") == GemmFormats("bf16", "bf16", "int4")
    fp8 = {"precision": "fp8", "gemm_quant_mode": "fp8", "moe_quant_mode": "fp8_block"}
    assert pc.formats_of(fp8, "glm-5") == GemmFormats("fp8", "fp8", "fp8")


def test_the_quantization_files_are_nvidias() -> None:
    # tests/data/hf/README.md: aiconfigurator snapshot 095f58a5, each hf_quant_config.json's blob (config.json's are
    # checked by tests/core/test_evidence_provenance.py)
    for folder, blob in (("glm-5-nvfp4", "cbf7a8fddb70"), ("deepseek-v3.1-nvfp4", "74d1fc37da95")):
        data = (ROOT / HF / folder / "hf_quant_config.json").read_bytes()
        assert git_blob_id(data).startswith(blob)
        assert json.loads(data)["quantization"]["quant_algo"] == "NVFP4"
