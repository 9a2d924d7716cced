"""The GEMM format a checkpoint's weights run at, and the coefficients it is priced with: the format the checkpoint
names (kvplan.models.quant.Scheme.gemm, ParamGroup.gemm), not what its bytes per parameter suggest, so a deployment
a coefficient row was fitted on is priced by that row as its own."""

from __future__ import annotations

from dataclasses import replace

from kvplan.cli._common import load_plan
from kvplan.models.from_hf import load_model
from kvplan.models.quant import BF16, FP8_BLOCK, MXFP4, NVFP4, Scheme
from kvplan.models.safetensors import Tensor
from kvplan.models.sharding import param_groups_from_tensors
from kvplan.perf.coeffs import TABLE, coefficients_for
from kvplan.perf.predict import _quant, perf

HF = "tests/data/hf"


def test_a_scheme_names_the_gemm_it_runs_at() -> None:
    # 4-bit integers are dequantized to bf16 in the GEMM (vLLM's Marlin / fused_marlin_moe: W4A16); NVFP4, MXFP4 and
    # fp8 the tensor cores multiply; an 8-bit integer is W8A8 or W8A16 as the config says: not read from the scheme
    int4 = Scheme(name="int4 group 32 (bf16 scales)", weight_bits=4, values_per_scale=32, scale_bits=16)
    assert [s.gemm for s in (int4, NVFP4, MXFP4, FP8_BLOCK, BF16)] == ["int4", "fp4", "fp4", "fp8", ""]
    assert replace(int4, name="int8 GPTQ per channel (fp16 scales)", weight_bits=8).gemm == ""
    # GPTQ's 3-bit integers (quant.resolve takes 2, 3, 4 or 8 bits) run the same weight-only kernels
    assert replace(int4, name="int3 GPTQ group 128 (fp16 scales)", weight_bits=3).gemm == "int4"


def test_the_checkpoints_format_not_its_bytes_names_the_gemm() -> None:
    # Kimi-K2.5: compressed-tensors int4 group 32 on the routed experts (its config's quantization_config), bf16
    # elsewhere; its experts take 18/32 B a parameter, which bytes alone would call fp4
    kimi = load_model(f"{HF}/kimi-k2.5/config.json")
    assert (_quant(kimi, "attention"), _quant(kimi, "routed_experts")) == ("bf16", "int4")
    # DeepSeek-V3.2-NVFP4 (hf_quant_config.json: NVFP4 experts and MLPs): its packed U8 weights count two values a
    # byte, so the group's bytes over its counted elements are 9/8 (a U8 byte and an eighth of an fp8 scale per 16
    # values), plus the fp32 weight_scale_2 and input_scale of each of 58 MoE layers × 256 experts × 3 projections:
    # about 1.125 B a counted element, which bytes alone would call fp8
    nv = load_model(f"{HF}/deepseek-v3.2-nvfp4")
    g = next(g for g in nv.param_groups if g.name == "routed_experts")
    assert g.bytes_per_param_num == g.bytes_per_param_den * 9 // 8 + 58 * 256 * 3 * (4 + 4)
    assert _quant(nv, "routed_experts") == "fp4"
    # gpt-oss-120b: MXFP4 experts (a group whose bytes per parameter is a placeholder), bf16 attention
    oss = load_model("gpt-oss-120b")
    assert (_quant(oss, "attention"), _quant(oss, "routed_experts")) == ("bf16", "fp4")
    # DeepSeek-V3: fp8 blocks everywhere but the embeddings; Qwen3-235B-A22B: bf16, no format named
    assert _quant(load_model("deepseek-v3"), "routed_experts") == "fp8"
    assert _quant(load_model("qwen3-235b-a22b"), "routed_experts") == "bf16"


def test_a_group_of_tensors_names_its_format_where_its_weights_agree() -> None:
    def groups(*ts: Tensor) -> str:
        return param_groups_from_tensors(ts, num_layers=1)[0].gemm

    w = "model.layers.0.self_attn.q_proj."
    assert groups(Tensor(name=w + "weight_packed", dtype="I32", shape=(8, 2))) == "int4"
    assert groups(Tensor(name=w + "qweight", dtype="I32", shape=(2, 8))) == "int4"
    assert groups(Tensor(name=w + "weight", dtype="U8", shape=(8, 8)),
                  Tensor(name=w + "weight_scale", dtype="F8_E4M3", shape=(8, 1))) == "fp4"  # fmt: skip
    assert groups(Tensor(name=w + "weight", dtype="F8_E4M3", shape=(8, 8))) == "fp8"
    assert groups(Tensor(name=w + "weight", dtype="BF16", shape=(8, 8))) == ""
    # fp8 beside bf16 in one group: no one format
    k = "model.layers.0.self_attn.k_proj.weight"
    assert (
        groups(Tensor(name=w + "weight", dtype="F8_E4M3", shape=(8, 8)), Tensor(name=k, dtype="BF16", shape=(8, 8)))
        == ""
    )


def test_kimi_k25_int4_is_priced_by_the_rows_fitted_on_it() -> None:
    # Hopper vLLM MLA was fitted on Kimi-K2.5 int4 on H200 under vLLM 0.16.0 (coeffs.TABLE): that deployment is the
    # row's own, nothing borrowed (read as fp4 it was priced as another weight format, its band 11.6 × wide)
    h200 = load_plan(f"{HF}/kimi-k2.5/config.json", "glm-5.3-8xh200-vllm", ["engine_version=0.16.0"])
    r = perf(h200.arch, h200, isl=1024, osl=1024, concurrency=4)
    assert r.borrowed == "" and r.coefficients.quants == ("int4",)
    # Blackwell vLLM MLA: the int4 rows' own GEMM and HBM shares (perf_calibrate.py "int4:mem_eff=0.423")
    b200 = load_plan(f"{HF}/kimi-k2.5/config.json", "glm-5.3-8xh200-vllm", ["engine_version=0.15.1", "gpu=b200"])
    r = perf(b200.arch, b200, isl=1024, osl=1024, concurrency=4)
    c = r.coefficients
    assert r.borrowed == "" and c.format == "int4" and c.key.endswith("/ mla (int4 GEMMs)")
    assert (c.gemm_eff, c.prefill_eff, c.mem_eff) == (1.0, 0.106, 0.423)
    own = TABLE[3]
    assert replace(c, gemm_eff=own.gemm_eff, prefill_eff=own.prefill_eff, mem_eff=own.mem_eff, format="") == own


def test_gpt_oss_mxfp4_is_priced_by_the_row_fitted_on_it() -> None:
    # Hopper vLLM GQA was fitted on gpt-oss-120b (MXFP4 experts, the CSV's "fp4") on H200 under vLLM 0.18.0
    plan = load_plan("gpt-oss-120b", "glm-5.3-8xh200-vllm", ["engine_version=0.18.0", "tp=1"])
    r = perf(plan.arch, plan, isl=1024, osl=1024, concurrency=4)
    assert r.borrowed == "" and r.coefficients.quants == ("fp4",)


def test_a_row_without_a_formats_own_efficiencies_is_itself() -> None:
    # the NVFP4 rows of Blackwell vLLM MLA are the row's own efficiencies; a row fitted on one format has no others
    row, said = coefficients_for("blackwell", "vllm", "0.17.0", "mla", "fp4")
    assert said == "" and row is TABLE[3] and row.format == "" and row.key == "blackwell / vllm 0.15.1-0.17.0 / mla"
    assert all(r.for_quant("int4") is r for r in TABLE if not r.formats)


def test_a_group_that_names_no_format_is_read_from_its_bytes() -> None:
    # no format named (gemm ''): 2 B a parameter bf16, 1 fp8, under 1 a 4-bit format, with room either side for
    # scales and a few tensors in another dtype (predict._quant: bf16 from 1.9 B, fp8 from 0.9 B)
    base = load_model("qwen3-235b-a22b")
    g = next(g for g in base.param_groups if g.name == "routed_experts")

    def at(num: int, den: int) -> str:
        groups = tuple(replace(x, bytes_per_param_num=num, bytes_per_param_den=den) if x is g else x
                       for x in base.param_groups)  # fmt: skip
        return _quant(replace(base, param_groups=groups), "routed_experts")

    assert [at(39, 20), at(19, 10), at(37, 20), at(19, 20), at(9, 10), at(17, 20), at(9, 16)] == [
        "bf16", "bf16", "fp8", "fp8", "fp8", "fp4", "fp4"]  # fmt: skip


def test_the_json_names_the_experts_format() -> None:
    # the experts' format is what the coefficient row is chosen by (coefficients_for's quant): Kimi-K2.5 int4 (its
    # attention bf16, gemm_quant), gpt-oss MXFP4 fp4; a dense model has no experts, null
    from kvplan.render.perf_report import perf_data

    got = []
    for model, deploy, over in ((f"{HF}/kimi-k2.5/config.json", "glm-5.3-8xh200-vllm", ["engine_version=0.16.0"]),
                                ("gpt-oss-120b", "glm-5.3-8xh200-vllm", ["engine_version=0.18.0", "tp=1"]),
                                ("llama-3.1-8b", "glm-5.3-8xh200-vllm", ["tp=1"])):  # fmt: skip
        plan = load_plan(model, deploy, over)
        data = perf_data(perf(plan.arch, plan, isl=1024, osl=64, concurrency=1))
        got.append((data["gemm_quant"], data["expert_gemm_quant"]))
    assert got == [("bf16", "int4"), ("bf16", "fp4"), ("bf16", None)]
