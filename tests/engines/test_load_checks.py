"""The load-time rules one by one (kvplan.engines.load_checks), on layouts the CLI tests do not reach.

SGLang ``FusedMoE.__init__`` (``srt/layers/moe/fused_moe_triton/layer.py``) asserts ``num_experts %
self.moe_ep_size == 0``; vLLM ``determine_expert_map`` (``model_executor/layers/fused_moe/layer.py``) gives the
first ``num_experts % ep`` ranks one expert more instead. SGLang's ``Fp8MoEMethod.create_weights`` skips its
block check under ROCm aiter padding (an environment switch): AMD GPUs are never refused by that rule here.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from kvplan.engines.load_checks import Layout, load_refusal
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from kvplan.models.gpus import find_gpu
from kvplan.models.shards import shard_dims

HF = Path(__file__).resolve().parents[1] / "data" / "hf"
QWEN_FP8 = str(HF / "qwen3-235b-a22b-fp8" / "config.json")


def _dep(engine: str, **knobs: object):  # type: ignore[no-untyped-def]
    return replace(load_deployment(f"glm-5.3-8xh200-{engine}"), **knobs)


def test_layout_moe_split_per_engine() -> None:
    # SGLang: moe_tp = tp / ep; vLLM --enable-expert-parallel: EP over every rank, experts whole
    assert Layout.of(_dep("sglang", tp=8, ep=2)).moe_tp == 4
    lay = Layout.of(_dep("vllm", tp=8, ep=2))
    assert (lay.moe_tp, lay.moe_ep) == (1, 8)
    assert Layout.of(_dep("vllm", tp=8)).moe_tp == 8


def test_sglang_needs_whole_experts_per_ep_rank_vllm_spreads_them() -> None:
    # 160 routed experts (DeepSeek-V2's count) over ep 6: 160 % 6 = 4
    arch = load_model("deepseek-v3")
    assert arch.shards is not None
    arch = replace(arch, shards=replace(arch.shards, num_experts=160, num_attention_heads=96, dense_block=None))
    r = load_refusal(arch, _dep("sglang", tp=6, ep=6))
    assert r is not None
    assert r.message == "AssertionError: assert num_experts % self.moe_ep_size == 0 (160 experts, ep 6)"
    # vLLM at tp 6 with EP: 27 experts on 4 ranks, 26 on 2; 2048-wide experts whole: 16 blocks
    assert load_refusal(arch, _dep("vllm", tp=6, ep=6)) is None


def test_block_rule_not_applied_to_sglang_on_amd() -> None:
    arch = load_model(QWEN_FP8)
    mi300x = find_gpu("mi300x")
    assert load_refusal(arch, _dep("sglang", tp=8, gpu=mi300x)) is None
    r = load_refusal(arch, _dep("vllm", tp=8, gpu=mi300x))
    assert r is not None and r.rule == "expert blocks" and r.experts


def test_vllm_down_proj_block_k_uses_the_tp_world_size() -> None:
    # a hypothetical 64 × 128 block and 1600-wide experts: 1600 % 64 = 0 (gate/up whole) but 1600 % 128 = 64, and
    # Fp8MoEMethod checks block_k whenever the TP world size is above 1, even with EP (experts whole)
    arch = load_model(QWEN_FP8)
    assert arch.shards is not None
    odd = replace(arch, shards=replace(arch.shards, expert_intermediate=1600, expert_block=(64, 128)))
    r = load_refusal(odd, _dep("vllm", tp=8, ep=8))
    assert r is not None
    assert r.message == "The input_size of down's weight = 1600 is not divisible by weight quantization block_k = 128."
    assert load_refusal(odd, _dep("vllm", tp=1)) is None


def test_fp4_experts_in_an_fp8_checkpoint_are_not_fp8_blocks() -> None:
    # DeepSeek-V4's config: quant_method fp8 with 128 × 128 blocks, but ``expert_dtype: fp4`` stores the routed
    # experts in MXFP4 (vLLM DeepseekV4FP8Config; kvplan.models.quant.resolve): no fp8 block rule for them
    cfg = {
        "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 128, "num_hidden_layers": 2,
        "n_routed_experts": 256, "moe_intermediate_size": 2048, "expert_dtype": "fp4",
        "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]},
    }  # fmt: skip
    d = shard_dims(cfg)
    assert d is not None and d.expert_block is None and d.attention_block == (128, 128)


def test_sglang_mla_heads_assertion_is_deepseek_v2s() -> None:
    # DeepSeek-V3: 128 heads over attention tp 24 (3 nodes of 8): 128 % 24 = 8; SGLang's MLA attention asserts
    # ``num_heads % attn_tp_size == 0`` (deepseek_v2.py), vLLM's config check names the same numbers
    arch = load_model("deepseek-v3")
    r = load_refusal(arch, _dep("sglang", tp=24, nodes=3))
    assert (
        r is not None
        and r.message == "AssertionError: assert num_heads % attn_tp_size == 0 (128 heads, attention tp 24)"
    )
    r = load_refusal(arch, _dep("vllm", tp=24, nodes=3))
    assert r is not None
    assert r.message == "Total number of attention heads (128) must be divisible by tensor parallel size (24)."


def test_sglang_0_5_4_prechecks_quantized_moe_before_the_model() -> None:
    # SGLang 0.5.4-0.5.5 ModelRunner.check_quantized_moe_compatibility (sgl-project/sglang#11442, #11702) runs
    # before the model is built: moe_tp = 8 / 1 = 8, 1536 / 8 = 192, 192 % 128 = 64. The same words as
    # ai-dynamo/aiconfigurator#311 quotes for this model at TP8. From #13876 on it runs after initialize(), so the
    # layers' own check (Fp8MoEMethod.create_weights) refuses first, as at 0.5.23.
    arch = load_model(QWEN_FP8)
    r = load_refusal(arch, _dep("sglang", tp=8, engine_version="0.5.4"))
    assert r is not None and r.experts
    assert r.message == (
        "For quantized MoE models, please make sure (moe_intermediate_size=1536 / moe_tp_size=8) % "
        "weight_block_size_n=128 == 0 where moe_tp_size is equal to tp_size (8) divided by ep_size (1). "
        "You can fix this by setting arguments `--tp` and `--ep` correctly."
    )
    r = load_refusal(arch, _dep("sglang", tp=8, engine_version="0.5.23"))
    assert r is not None and r.message.startswith("The output_size of gate's and up's weight = 192")
    # ep 3 does not divide tp 8 (the pre-check's first test); ep 2 at tp 8: 1536 / 4 = 384 loads
    r = load_refusal(arch, _dep("sglang", tp=8, ep=3, engine_version="0.5.5"))
    assert r is not None and r.message == "tp_size 8 must be divisible by ep_size 3"
    assert load_refusal(arch, _dep("sglang", tp=8, ep=2, engine_version="0.5.5")) is None
