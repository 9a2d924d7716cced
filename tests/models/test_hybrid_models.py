"""Hybrid models (issue 13, the model side): the stored per-layer model, the new cache kinds with goldens derived
from the configs and the engines' shape code, the hybrid presets, and the one refusal while the engine rules are
missing.

Engine formulas the goldens use (each cited where it is used):
- vLLM ``MambaStateShapeCalculator`` (``model_executor/layers/mamba/mamba_utils.py``, commit 02d71083):
  ``gated_delta_net_state_shape``: conv (K - 1 + spec) × (2 × nk × dk + nv × dv) / tp, recurrent nv / tp × dv × dk;
  ``kda_state_shape``: conv (K - 1 + spec) × (h × d + 2 × h × d) / tp, recurrent h / tp × d × d;
  ``MambaStateDtypeCalculator``: GDN (model dtype, model dtype unless --mamba-ssm-cache-dtype), KDA (model, fp32);
- SGLang ``configs/mamba_utils.py``: ``Mamba2StateShape.create`` / ``KimiLinearStateShape.create`` (the same
  shapes), ``mamba2_state_dtype``: conv bf16, recurrent config ``mamba_ssm_dtype`` else float32;
- vLLM ``layers/deepseek_v4_attention.py``: ``head_bytes = nope + rope × 2 + nope // 64 + 1`` per window token and
  per compressed state; the indexer ``k_cache_head_dim = head_dim + head_dim // 128 × 4`` per compressed token.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.engines import plan_pool
from kvplan.errors import ConfigError, InputError, PlanError
from kvplan.models.arch import ModelArch
from kvplan.models.cache import (
    CompressedAttention,
    FullAttention,
    IndexerK,
    Layer,
    LinearState,
    MlaLatent,
    SlidingWindow,
    describe_kinds,
    request_bytes_by_kind,
)
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from kvplan.models.presets import preset_names

HF = Path(__file__).resolve().parents[1] / "data" / "hf"
runner = CliRunner(env={"KVPLAN_FORMAT": None})
HYBRID_PRESETS = ("gpt-oss-120b", "deepseek-v4-flash", "deepseek-v4-pro", "glm-5.3-flash", "qwen3-next-80b-a3b",
                  "kimi-linear-48b-a3b", "kimi-k3", "qwen3.6-27b")  # fmt: skip


# --------------------------------------------------------------------------- the stored per-layer model


def _old_layers(m: ModelArch) -> tuple[Layer, ...]:
    """The derivation ``ModelArch.layers`` computed before it was stored (commit 4356756, arch.py): every layer the
    model's attention, plus the indexer K on the layers whose ``indexer_full`` flag is set."""
    att = (
        MlaLatent(m.kv_lora_rank, m.qk_rope_head_dim)
        if m.kv_lora_rank > 0
        else FullAttention(m.num_kv_heads, m.head_dim, m.v_head_dim or m.head_dim, m.num_attention_heads)
    )
    idx = IndexerK(m.index_head_dim, m.index_kpool) if m.is_dsa else None
    out = []
    for i in range(m.num_layers):
        full = idx is not None and i < len(m.indexer_full) and m.indexer_full[i]
        out.append(Layer(i, (att, idx) if full and idx is not None else (att,)))
    return tuple(out)


UNIFORM = [n for n in preset_names("models") if n not in HYBRID_PRESETS]
HYBRID_FIXTURES = (*HYBRID_PRESETS, "qwen3.6-35b-a3b")  # a hybrid fixture without a preset
FIXTURES = sorted(p.name for p in HF.iterdir() if (p / "config.json").is_file() and p.name not in HYBRID_FIXTURES)


@pytest.mark.parametrize("ref", [*UNIFORM, *(str(HF / f) for f in FIXTURES)])
def test_stored_layers_of_every_uniform_model_equal_the_old_derivation(ref: str) -> None:
    m = load_model(ref)
    assert not m.is_hybrid
    assert m.layers == _old_layers(m)
    assert len(m.layers) == m.num_layers


def test_the_uniform_presets_are_the_ten_of_before() -> None:
    # the hybrid presets are new; the ten uniform ones are the presets this change must leave identical, plus
    # deepseek-vl2 (added later: a VLM whose language model is uniform MLA, its layers checked by the test above)
    # and grok-2 (added later: 64 uniform GQA layers, SGLang grok.py Grok1Attention on every layer)
    assert len(UNIFORM) == 12 and "glm-5.3" in UNIFORM and "deepseek-vl2" in UNIFORM and "grok-2" in UNIFORM


def test_replace_rebuilds_a_uniform_models_layers() -> None:
    from dataclasses import replace

    m = load_model("llama-3.1-8b")
    wider = replace(m, num_kv_heads=16, num_layers=40)
    # a changed field never leaves stale layers: 40 layers of 16 kv heads × 128
    assert len(wider.layers) == 40 and wider.layers[0].attention == FullAttention(16, 128, 128, 32)


def test_a_hybrid_must_have_one_layer_per_num_layers() -> None:
    sw = SlidingWindow(8, 64, 64, 64, window=128)
    with pytest.raises(ValueError, match="2 layers built for num_layers 3"):
        ModelArch(name="x", source="t", architecture="a", num_layers=3, num_mtp_layers=0,
                  max_position_embeddings=1024, layers=(Layer(0, (sw,)), Layer(1, (sw,))))  # fmt: skip


# --------------------------------------------------------------------------- sliding window (gpt-oss)


def test_gpt_oss_layers_from_its_config() -> None:
    m = load_model(str(HF / "gpt-oss-120b"))
    # layer_types alternates sliding_attention, full_attention over 36 layers; sliding_window 128; 8 kv heads × 64
    sw = SlidingWindow(8, 64, 64, 64, window=128, sinks=True)
    full = FullAttention(8, 64, 64, 64)
    assert [layer.caches for layer in m.layers] == [(sw,), (full,)] * 18
    assert m.is_hybrid and m.hybrid_kinds == ("sliding-window",) and m.kind_label == "GQA + sliding-window"
    assert sw != full  # a window is not planned as full attention (dataclass equality is per class)


def test_sliding_window_golden() -> None:
    sw = SlidingWindow(8, 64, 64, 64, window=128, sinks=True)
    # per token per layer: kv heads per rank × (64 + 64) × 2 B: tp 1 → 8 × 256 = 2,048; tp 8 → 1 × 256 = 256
    assert sw.bytes_per_token(1, "bf16") == 2_048
    assert sw.bytes_per_token(8, "bf16") == 256
    # a 128K request: the window holds 128 tokens → 128 × 2,048 = 262,144 B per layer at tp 1
    assert sw.tokens_held(131_072) == 128
    assert sw.bytes_per_request(131_072, 1, "bf16") == 262_144
    # a short request holds itself: 100 tokens × 256 B at tp 8
    assert sw.bytes_per_request(100, 8, "bf16") == 25_600


def test_gpt_oss_request_by_kind_golden() -> None:
    m = load_model("gpt-oss-120b")
    rows = {type(c).__name__: (n, b) for c, n, b in request_bytes_by_kind(m.layers, 131_072, 8, "vllm")}
    # 18 window layers × 128 tokens × 256 B = 589,824; 18 full layers × 131,072 × 256 = 603,979,776
    assert rows == {"SlidingWindow": (18, 589_824), "FullAttention": (18, 603_979_776)}


def test_models_show_prints_one_line_per_kind_group() -> None:
    r = runner.invoke(app, ["models", "show", "gpt-oss-120b", "--format", "json"])
    assert r.exit_code == 0, r.output
    kinds = json.loads(r.output)["model"]["cache_kinds_at_tp8"]
    # 18 × 256 B = 4,608 B/token; × 128 tokens = 589,824 B per request
    assert kinds == [
        "18 × sliding window 128 + sinks, 8 kv heads × 64 → 1 per rank at tp 8 (4,608 B/token bf16, at most 128"
        " tokens: 589,824 B per request)",
        "18 × GQA, 8 kv heads × 64 → 1 per rank at tp 8 (4,608 B/token bf16)",
    ]


def test_sliding_window_without_layer_types_stays_refused(tmp_path: Path) -> None:
    cfg = {"architectures": ["MistralForCausalLM"], "num_hidden_layers": 2, "num_attention_heads": 8,
           "num_key_value_heads": 8, "hidden_size": 512, "max_position_embeddings": 4096,
           "sliding_window": 4096}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ConfigError, match="sliding_window: 4096: sliding-window attention without layer_types"):
        load_model(str(tmp_path))


def test_layer_types_of_the_wrong_length(tmp_path: Path) -> None:
    cfg = json.loads((HF / "gpt-oss-120b" / "config.json").read_text())
    cfg["layer_types"] = cfg["layer_types"][:35]
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ConfigError, match="layer_types: has 35 entries for 36 layers"):
        load_model(str(tmp_path))


# --------------------------------------------------------------------------- linear-attention state


def test_gated_deltanet_state_golden() -> None:
    # Qwen3-Next-80B-A3B's shape: linear_num_key_heads 16, linear_num_value_heads 32, key/value head dim 128,
    # linear_conv_kernel_dim 4 (SGLang mamba_utils.py: "e.g., QWen3-Next: (32, 128, 128)" for the recurrent state)
    s = LinearState("gated_deltanet", num_heads=32, num_k_heads=16, head_k_dim=128, head_v_dim=128, conv_kernel=4)
    # conv_dim = 2 × 16 × 128 + 32 × 128 = 8,192; conv elements (4 - 1) × 8,192 = 24,576
    assert s.conv_dim == 8_192 and s.conv_elements(1) == 24_576
    # recurrent 32 × 128 × 128 = 524,288 elements
    assert s.recurrent_elements(1) == 524_288
    # SGLang: conv bf16 + recurrent fp32 = 24,576 × 2 + 524,288 × 4 = 49,152 + 2,097,152 = 2,146,304 B per request
    assert s.bytes_per_request(1, "sglang") == 2_146_304
    # vLLM: both bf16 ("auto") = 49,152 + 1,048,576 = 1,097,728 B
    assert s.bytes_per_request(1, "vllm") == 1_097_728
    # tp 8: conv 3 × 1,024 × 2 = 6,144; recurrent 4 × 128 × 128 × 4 = 262,144 (SGLang) / × 2 = 131,072 (vLLM)
    assert s.bytes_per_request(8, "sglang") == 268_288
    assert s.bytes_per_request(8, "vllm") == 137_216
    # vLLM with 2 speculative tokens keeps 2 more conv rows: (3 + 2) × 8,192 × 2 + 1,048,576 = 1,130,496
    assert s.bytes_per_request(1, "vllm", spec_tokens=2) == 1_130_496


def test_mamba_ssm_dtype_from_the_config_is_sglangs() -> None:
    s = LinearState("gated_deltanet", 32, 16, 128, 128, 4, mamba_ssm_dtype="bfloat16")
    # SGLang reads mamba_ssm_dtype: 49,152 + 524,288 × 2 = 1,097,728; vLLM never read it (bf16 by default anyway)
    assert s.bytes_per_request(1, "sglang") == 1_097_728


def test_kda_state_golden() -> None:
    # Kimi-Linear-48B's linear_attn_config: num_heads 32, head_dim 128, short_conv_kernel_size 4
    s = LinearState("kda", num_heads=32, num_k_heads=32, head_k_dim=128, head_v_dim=128, conv_kernel=4)
    # conv_dim = 32 × 128 + 2 × 32 × 128 = 12,288 (q, k, v); conv 3 × 12,288 × 2 B = 73,728
    # recurrent 32 × 128 × 128 × 4 B (fp32 on both engines) = 2,097,152 → 2,170,880 B per request per layer
    assert s.conv_dim == 12_288
    assert s.bytes_per_request(1, "vllm") == s.bytes_per_request(1, "sglang") == 2_170_880
    assert s.label == "KDA state"


def test_state_heads_must_divide_tp() -> None:
    # the engines' divide() asserts at start-up: a PlanError (exit 2) since issue 25, no longer a ValueError (exit 4)
    with pytest.raises(PlanError, match="heads 32 is not divisible by tensor parallel 3"):
        LinearState("kda", 32, 32, 128, 128, 4).recurrent_elements(3)


def _qwen3_next_like(tmp_path: Path, **extra: object) -> Path:
    """A Qwen3NextForCausalLM config.json written by this test (NOT the real one: no verbatim copy was found, see
    tests/data/hf/README.md): the field names vLLM's qwen3_next.py reads, 8 layers, the released dims."""
    cfg = {"architectures": ["Qwen3NextForCausalLM"], "num_hidden_layers": 8, "num_attention_heads": 16,
           "num_key_value_heads": 2, "head_dim": 256, "hidden_size": 2048, "max_position_embeddings": 262144,
           "full_attention_interval": 4, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
           "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, **extra}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    return tmp_path


def test_qwen3_next_layers_from_full_attention_interval(tmp_path: Path) -> None:
    m = load_model(str(_qwen3_next_like(tmp_path)))
    state = LinearState("gated_deltanet", 32, 16, 128, 128, 4)
    full = FullAttention(2, 256, 256, 16)
    # full iff (i + 1) % 4 == 0: layers 3 and 7
    assert [layer.caches for layer in m.layers] == [(state,), (state,), (state,), (full,)] * 2
    assert m.kind_label == "GQA + linear-attention state"
    rows = {type(c).__name__: b for c, _, b in request_bytes_by_kind(m.layers, 1_000, 1, "sglang")}
    # 6 state layers × 2,146,304 = 12,877,824 (fixed); 2 full layers × 1,000 tokens × 2 × (256 + 256) × 2 B
    assert rows == {"LinearState": 12_877_824, "FullAttention": 4_096_000}


def test_qwen3_next_layer_types_win(tmp_path: Path) -> None:
    types = ["full_attention"] + ["linear_attention"] * 7
    m = load_model(str(_qwen3_next_like(tmp_path, layer_types=types)))
    assert [type(layer.caches[0]).__name__ for layer in m.layers] == ["FullAttention"] + ["LinearState"] * 7


def test_kimi_linear_layers_are_one_based(tmp_path: Path) -> None:
    # Kimi-Linear writes kda_layers / full_attn_layers 1-based (SGLang KimiLinearConfig.is_kda_layer:
    # layer_idx + 1 in kda_layers);
    # a config written by this test with the released 48B dims on 4 layers (no verbatim copy was found)
    cfg = {"architectures": ["KimiLinearForCausalLM"], "num_hidden_layers": 4, "num_attention_heads": 32,
           "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
           "max_position_embeddings": 1048576,
           "linear_attn_config": {"kda_layers": [1, 2, 3], "full_attn_layers": [4], "num_heads": 32, "head_dim": 128,
                                  "short_conv_kernel_size": 4}}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    m = load_model(str(tmp_path))
    kda = LinearState("kda", 32, 32, 128, 128, 4)
    assert [layer.caches for layer in m.layers] == [(kda,), (kda,), (kda,), (MlaLatent(512, 64),)]
    assert m.kind_label == "MLA + linear-attention state"
    cfg["linear_attn_config"]["kda_layers"] = [0, 1, 2]  # 0-based: layer 0 does not exist
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ConfigError, match=r"linear_attn_config\.kda_layers\[0\]: expected a layer number from 1 to 4"):
        load_model(str(tmp_path))


# --------------------------------------------------------------------------- DeepSeek-V4 compressed attention


def test_v4_entry_and_indexer_golden() -> None:
    c4 = CompressedAttention(512, 64, window=128, compress_ratio=4)
    # 448 fp8 NoPE + 64 bf16 RoPE × 2 + 448 // 64 = 7 scale bytes + 1 pad = 584 B per entry
    assert c4.entry_bytes == 584
    # 128K request: window 128 + 131,072 // 4 = 32,768 states → 32,896 × 584 = 19,211,264 B per layer
    assert c4.bytes_per_request(131_072) == 19_211_264
    # C128: 128 + 1,024 = 1,152 × 584 = 672,768; window only: 128 × 584 = 74,752
    assert CompressedAttention(512, 64, 128, 128).bytes_per_request(131_072) == 672_768
    assert CompressedAttention(512, 64, 128, 0).bytes_per_request(131_072) == 74_752
    # indexer: 128 fp8 + 128 // 128 × 4 scale = 132 B per compressed token: 32,768 × 132 = 4,325,376
    idx = IndexerK(128, compress_ratio=4)
    assert idx.bytes_per_state == 132 and idx.bytes_per_request(131_072) == 4_325_376


def test_deepseek_v4_flash_layers_and_request_golden() -> None:
    m = load_model("deepseek-v4-flash")
    ratios = [layer.attention.compress_ratio for layer in m.layers]  # type: ignore[union-attr]
    # compress_ratios (44 entries, the last for the MTP layer): 0, 0, then 4 / 128 alternating up to layer 42
    assert ratios == [0, 0] + [4, 128] * 20 + [4]
    assert [i for i, layer in enumerate(m.layers) if layer.indexer is not None] == list(range(2, 43, 2))
    assert m.full_indexer_layers == 21 and m.kind_label == "DeepSeek-V4 compressed-attention"
    total = sum(b for _, _, b in request_bytes_by_kind(m.layers, 131_072, 8, "vllm"))
    # 2 × 74,752 + 21 × (19,211,264 + 4,325,376) + 20 × 672,768 = 149,504 + 494,269,440 + 13,455,360
    assert total == 507_874_304


def test_deepseek_v4_pro_layers() -> None:
    m = load_model("deepseek-v4-pro")
    ratios = [layer.attention.compress_ratio for layer in m.layers]  # type: ignore[union-attr]
    # 62 entries: 128, 128, then 4 / 128 alternating; the 62nd (0) is the MTP layer's
    assert ratios == [128, 128] + [4, 128] * 29 + [4]
    assert m.num_layers == 61 and m.full_indexer_layers == 30


def test_v4_compress_ratios_too_short(tmp_path: Path) -> None:
    cfg = json.loads((HF / "deepseek-v4-flash" / "config.json").read_text())
    cfg["compress_ratios"] = cfg["compress_ratios"][:40]
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    # issue 25: exactly one ratio per decoder layer and per MTP layer (43 + 1), no longer "at least 43"
    with pytest.raises(ConfigError, match=r"compress_ratios: expected 44 ratios \(43 layers \+ 1 MTP\), got 40"):
        load_model(str(tmp_path))


# --------------------------------------------------------------------------- presets = the verbatim configs


@pytest.mark.parametrize("name", [n for n in HYBRID_PRESETS if (HF / n / "config.json").is_file()])
def test_preset_layers_equal_the_verbatim_config(name: str) -> None:
    preset, fixture = load_model(name), load_model(str(HF / name))
    assert preset.layers == fixture.layers
    assert (preset.num_layers, preset.max_position_embeddings) == (fixture.num_layers, fixture.max_position_embeddings)


def test_describe_kinds_of_v4() -> None:
    lines = describe_kinds(load_model("deepseek-v4-flash").layers, 8)
    # 21 × 584 = 12,264 B per window token; 21 × 33 = 693 B/token of indexer
    assert lines[1] == (
        "21 × compressed attention (CSA, 1 state per 4 tokens), 1 kv head × 512, window 128, replicated on every"
        " rank (12,264 B per window token fp8, + 12,264 B per 4 tokens)"
    )
    assert "693 B/token" in lines[2] and "C4-compressed" in lines[2]


# --------------------------------------------------------------------------- every hybrid planned, no refusal


PLANNED_HYBRIDS = {("sglang", "gpt-oss-120b"), ("vllm", "gpt-oss-120b"), ("sglang", "deepseek-v4-flash"),
                   ("sglang", "deepseek-v4-pro"), ("vllm", "deepseek-v4-flash"),
                   ("vllm", "deepseek-v4-pro"), ("sglang", "glm-5.3-flash"), ("vllm", "glm-5.3-flash"),
                   ("sglang", "qwen3-next-80b-a3b"), ("vllm", "qwen3-next-80b-a3b"),
                   ("sglang", "kimi-linear-48b-a3b"), ("vllm", "kimi-linear-48b-a3b"), ("sglang", "kimi-k3"),
                   ("vllm", "kimi-k3"), ("sglang", "qwen3.6-27b"), ("vllm", "qwen3.6-27b")}  # fmt: skip
"""(engine, preset) pairs the engine rules plan (SGLang: tests/engines/test_sglang_hybrid.py; vLLM:
tests/engines/test_vllm_hybrid.py). The test below replaces one that expected a refusal (exit 2) for the pairs
not listed here: once every pair was planned its parameter list was empty and it was skipped everywhere."""


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
@pytest.mark.parametrize("name", HYBRID_PRESETS)
def test_every_hybrid_preset_is_planned_with_a_verdict(name: str, engine: str) -> None:
    assert (engine, name) in PLANNED_HYBRIDS
    # the preset deployment's page_size 64 is dropped: the DeepSeek-V4 backends of vLLM take 256 only
    sets = ["--set", f"engine={engine}", "--set", "page_size=default"]
    r = runner.invoke(app, ["admit", "--ctx", "128K", "--model", name, *sets])
    assert r.exit_code in (0, 1), r.output  # a verdict, not kvplan's "does not yet plan" (exit 2)
    verdicts = [x for x in r.output.splitlines() if x.startswith(("ADMITTED", "REJECTED", "ENGINE WOULD NOT"))]
    assert verdicts and "does not yet plan" not in r.output, r.output


@pytest.mark.parametrize("command", [["budget"], ["workspace"], ["prefix", "--hit", "1K"]])
def test_other_planning_commands_plan_v4_on_sglang(command: list[str]) -> None:
    """DeepSeek-V4 is planned on SGLang now (tests/engines/test_sglang_v4.py); the presets count no weights."""
    r = runner.invoke(app, [*command, "--ctx", "8K", "--model", "deepseek-v4-flash", "--set", "weights_per_gpu=20GiB"])
    assert r.exit_code == 0, r.output


def test_plan_pool_refuses_what_kvplan_cannot_plan_and_plans_a_uniform_model() -> None:
    # every cache kind is planned on both engines (the per-kind guard is gone); a 4-byte KV cache on SGLang is not
    with pytest.raises(InputError, match="does not yet plan --dtype float32"):
        plan_pool(load_model("glm-5.3"), load_deployment(None, ["dtype=float32"]))
    assert plan_pool(load_model("glm-5.3"), load_deployment(None)).logged_tokens > 0


# --------------------------------------------------------------------------- GLM-5.3-Flash (glm5_next)


def _glm53_flash_like(tmp_path: Path, **text: object) -> str:
    """A Glm5NextForConditionalGeneration config.json written by this test (NOT the real one: no published copy
    was found, see tests/data/hf/README.md): the text_config fields SGLang's Glm5NextTextConfig reads, 8 layers,
    its default dims (KDA 64 heads × 128, kernel 4; MLA 512 with no rope) and index_kpool 4."""
    cfg = {"num_hidden_layers": 8, "num_attention_heads": 64, "kv_lora_rank": 512, "qk_rope_head_dim": 0,
           "max_position_embeddings": 1013760, "index_topk": 512, "index_n_heads": 32, "index_head_dim": 128,
           "index_kpool": 4,
           "linear_attn_config": {"kda_layers": [0, 1, 2, 4, 5, 6], "full_attn_layers": [3, 7], "num_heads": 64,
                                  "head_dim": 128, "short_conv_kernel_size": 4}, **text}  # fmt: skip
    (tmp_path / "config.json").write_text(
        json.dumps({"architectures": ["Glm5NextForConditionalGeneration"], "text_config": cfg})
    )
    return str(tmp_path)


def test_glm53_flash_layers_from_its_text_config(tmp_path: Path) -> None:
    m = load_model(_glm53_flash_like(tmp_path))
    kda = LinearState("kda", 64, 64, 128, 128, 4)
    full = (MlaLatent(512, 0), IndexerK(128, 4))
    # kda_layers are 0-based here (SGLang Glm5NextTextConfig.is_kda_layer: layer_idx in kda_layers)
    assert [layer.caches for layer in m.layers] == [(kda,), (kda,), (kda,), full] * 2
    assert m.full_indexer_layers == 2 and m.shared_indexer_layers == 0 and m.full_layer_ids == (3, 7)
    # pooled indexer K: ceil(132 / 4) = 33 B per token; KDA: conv 3 × (64 × 128 × 3) × 2 + 64 × 128 × 128 × 4
    # = 147,456 + 4,194,304 = 4,341,760 B per request per layer at tp 1
    assert IndexerK(128, 4).bytes_per_token == 33
    assert kda.bytes_per_request(1, "sglang") == kda.bytes_per_request(1, "vllm") == 4_341_760
    rows = {type(c).__name__: b for c, _, b in request_bytes_by_kind(m.layers, 131_072, 1, "sglang")}
    # 6 × 4,341,760; 2 × 131,072 × 512 × 2 (bf16 latent, no rope); 2 × 131,072 × 33
    assert rows == {"LinearState": 26_050_560, "MlaLatent": 268_435_456, "IndexerK": 8_650_752}


def test_glm53_flash_without_linear_attn_config_every_fourth_layer_is_full(tmp_path: Path) -> None:
    m = load_model(_glm53_flash_like(tmp_path, linear_attn_config=None))
    # SGLang: kda_layers = [i for i in range(layers) if i % 4 != 3] → full at 3 and 7
    assert [type(layer.caches[0]).__name__ for layer in m.layers] == ["LinearState"] * 3 + ["MlaLatent"] + [
        "LinearState"
    ] * 3 + ["MlaLatent"]


def test_glm53_flash_shared_indexers_without_indexer_types_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"text_config\.index_topk_freq: GLM-5\.3-Flash's shared indexer layers"):
        load_model(_glm53_flash_like(tmp_path, index_topk_freq=4))


def test_glm53_flash_is_planned_on_both_engines(tmp_path: Path) -> None:
    ref = _glm53_flash_like(tmp_path)
    # both engines plan it now (tests/engines/test_sglang_glm5_next.py, tests/engines/test_vllm_glm5_next.py): a
    # verdict;
    # weights given: the config has no hidden_size to count parameters by
    for engine in ("sglang", "vllm"):
        sets = ["--set", f"engine={engine}", "--set", "weights_per_gpu=20GiB"]
        r = runner.invoke(app, ["admit", "--ctx", "128K", "--model", ref, *sets])
        assert r.exit_code in (0, 1), r.output


@pytest.mark.parametrize("archs", ["0\n0", ["Qwen3NextForCausalLM\r\nX"], "two words"])
def test_an_architecture_that_is_not_one_word_fails_in_one_line(tmp_path: Path, archs: object) -> None:
    # regression (found by tests/fuzz/test_hybrid_kinds.py): a string "0\n0" was echoed raw in the
    # "is not a model kvplan plans" message, a two-line error
    cfg = {"architectures": archs, "num_hidden_layers": 2, "num_attention_heads": 8, "hidden_size": 512,
           "max_position_embeddings": 4096}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ConfigError, match="expected a") as e:
        load_model(str(tmp_path))
    assert "\n" not in str(e.value)


def test_glm53_flash_without_kda_layers_keeps_its_pooled_indexer(tmp_path: Path) -> None:
    # no KDA layer: the model is uniform (MLA + indexer K), and the stored layers are rebuilt from its fields; the
    # pooled indexer (kpool 4, 33 B/token) must survive that on every layer
    la = {"kda_layers": [], "full_attn_layers": list(range(8)), "num_heads": 64, "head_dim": 128}
    m = load_model(_glm53_flash_like(tmp_path, linear_attn_config=la))
    assert not m.is_hybrid
    assert all(layer.caches == (MlaLatent(512, 0), IndexerK(128, 4)) for layer in m.layers)
