"""The vLLM knobs of kvplan/engines/vllm_knobs.py on input: each validated (bad value: one line, exit 2), each in
the plan's knob table, refused on SGLang; the engine refusals they bring (vLLM source cited per test)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from kvplan.cli import app
from kvplan.engines import plan_pool
from kvplan.errors import PlanError
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model

runner = CliRunner(env={"KVPLAN_FORMAT": None})
VLLM = "glm-5.3-8xh200-vllm"
SGLANG = "glm-5.3-8xh200-sglang"


def _admit(*args: str) -> Result:
    return runner.invoke(app, ["admit", "--ctx", "8K", *args])


def _error_line(r: Result) -> str:
    assert r.exit_code == 2, (r.stdout, r.stderr, r.exception)
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kvplan: error: "), r.stderr
    assert "Traceback" not in r.stdout + r.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("item", "words"),
    [
        ("async_scheduling=maybe", ["async_scheduling", "'maybe'"]),
        ("disable_hybrid_kv_cache_manager=2", ["disable_hybrid_kv_cache_manager"]),
        ("dtype=float64", ["dtype", "'float64'"]),
        ("num_gpu_blocks_override=0", ["num_gpu_blocks_override", ">= 1"]),
        ("max_model_len=-2", ["context_length"]),
        ("kv_cache_memory=0B", ["kv_cache_memory", "at least 1 B"]),
    ],
)
def test_bad_vllm_knob_is_one_line(item: str, words: list[str]) -> None:
    msg = _error_line(_admit("--deploy", VLLM, "--set", item))
    for w in words:
        assert w in msg


@pytest.mark.parametrize(
    "item", ["async_scheduling=false", "num_gpu_blocks_override=100", "disable_hybrid_kv_cache_manager=true"]
)
def test_vllm_only_knobs_are_refused_on_sglang(item: str) -> None:
    msg = _error_line(_admit("--deploy", SGLANG, "--set", item))
    assert "is a vLLM knob" in msg


def test_auto_fit_length_is_refused_on_sglang() -> None:
    # SGLang's --context-length has no -1: auto-fit is vLLM's (_auto_fit_max_model_len)
    msg = _error_line(_admit("--deploy", SGLANG, "--set", "context_length=-1"))
    assert "auto-fit" in msg and "vLLM" in msg


def test_kv_cache_memory_below_one_mib_is_accepted() -> None:
    # vLLM takes any positive --kv-cache-memory-bytes (CacheConfig.kv_cache_memory_bytes, a plain int)
    dep = load_deployment(VLLM, ["kv_cache_memory=512KiB"])
    assert dep.kv_cache_memory == 512 * 1024


def test_knob_table_shows_the_new_knobs() -> None:
    r = runner.invoke(
        app,
        ["admit", "--ctx", "8K", "--deploy", VLLM, "--format", "json", "--set", "num_gpu_blocks_override=9000",
         "--set", "async_scheduling=false"],
    )  # fmt: skip
    assert r.exit_code in (0, 1), r.stderr
    knobs = {k["name"]: k for k in json.loads(r.stdout)["plan"]["knobs"]}
    assert knobs["async_scheduling"]["value"] is False and knobs["async_scheduling"]["origin"] == "set"
    assert knobs["num_gpu_blocks_override"]["value"] == 9000
    assert knobs["disable_hybrid_kv_cache_manager"]["value"] is False
    assert knobs["dtype"]["value"] == "auto"


def test_num_gpu_blocks_override_caps_the_pool_and_the_start_check() -> None:
    # GLM-5.3 on 8×H200 (the preset's max_model_len 524,288): 64-token blocks, a max-length request needs 8,192
    # blocks + the null block. get_kv_cache_configs: the override replaces the memory with override × bytes_per_block
    # and reserves one block before the check (vllm tests: test_check_enough_kv_cache_memory_respects_...override)
    arch = load_model("glm-5.3")
    p = plan_pool(arch, load_deployment(VLLM, ["num_gpu_blocks_override=8192"]))
    assert p.extras["num_blocks"] == 8_192
    assert p.startup_error is not None and "max seq len (524288)" in p.startup_error
    assert "estimated maximum model length is 524224." in p.startup_error  # 8,191 blocks × 64
    assert plan_pool(arch, load_deployment(VLLM, ["num_gpu_blocks_override=8193"])).startup_error is None


def test_disable_hybrid_on_a_state_hybrid_is_refused() -> None:
    # unify_hybrid_kv_cache_specs: linear-attention state cannot become full attention; vLLM raises
    arch = load_model("qwen3-next-80b-a3b")
    with pytest.raises(PlanError, match="failed to convert the KV cache specs to one unified type"):
        plan_pool(arch, load_deployment(VLLM, ["model=qwen3-next-80b-a3b", "disable_hybrid_kv_cache_manager=true"]))


def test_fp32_checkpoint_with_dtype_auto_stays_two_bytes(tmp_path: Path) -> None:
    # vllm/config/model.py _resolve_auto_dtype: "Downcast for float32 models" to the platform's first dtype (bf16
    # on SM80+): kv_cache_dtype auto is 2 bytes; only --dtype float32 caches 4-byte elements
    cfg = {"architectures": ["Qwen3ForCausalLM"], "num_hidden_layers": 2, "num_attention_heads": 2,
           "num_key_value_heads": 2, "head_dim": 64, "hidden_size": 128, "intermediate_size": 256,
           "vocab_size": 1024, "max_position_embeddings": 4096, "torch_dtype": "float32"}  # fmt: skip
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    arch = load_model(str(path))
    sets = [f"model={path}", "kv_cache_memory=1GiB", "page_size=16", "kv_cache_dtype=auto"]
    auto = plan_pool(arch, load_deployment(VLLM, [*sets, "tp=1", "gpus_per_node=1"]))
    fp32 = plan_pool(arch, load_deployment(VLLM, [*sets, "tp=1", "gpus_per_node=1", "dtype=float32"]))
    # page of one layer: 16 × 2 heads × (64 + 64) × 2 B = 8,192 B; 2 layers -> 16,384 B a block (× 2 in fp32)
    assert (auto.extras["bytes_per_block"], fp32.extras["bytes_per_block"]) == (16_384, 32_768)


def test_dtype_float32_on_mla_is_refused() -> None:
    with pytest.raises(PlanError, match="full-attention models only"):
        plan_pool(load_model("glm-5.3"), load_deployment(VLLM, ["dtype=float32"]))


def test_dtype_on_sglang() -> None:
    # SGLang configs/model_config.py _get_and_verify_dtype: auto downcasts a float32 config to float16, so auto,
    # float16 and bfloat16 all cache 2-byte elements (planned as before); float32 (4 bytes) is refused, one line
    arch = load_model("glm-5.3")
    same = plan_pool(arch, load_deployment(SGLANG, ["dtype=bfloat16"])).cell
    assert same == plan_pool(arch, load_deployment(SGLANG)).cell
    msg = _error_line(_admit("--deploy", SGLANG, "--set", "dtype=float32"))
    assert "--dtype float32" in msg and "SGLang" in msg


def test_async_scheduling_default_follows_the_version() -> None:
    # on by default from vllm-project/vllm#27614 (ASYNC_DEFAULT_SINCE, 0.14.0); off before
    def shown(version: str) -> object:
        p = plan_pool(load_model("glm-5.3"), load_deployment(VLLM, [f"engine_version={version}"]))
        return next(k.value for k in p.knobs if k.name == "async_scheduling")

    assert (shown("0.33.0"), shown("0.13.0")) == (True, False)


def test_new_knobs_refused_on_the_v0_engine() -> None:
    # vLLM 0.6-0.8 (V0) is planned by kvplan/engines/vllm_v0.py, which models none of them: refused, never ignored
    with pytest.raises(PlanError, match="V0 engine"):
        plan_pool(load_model("llama-3.1-8b"), load_deployment(VLLM, ["model=llama-3.1-8b", "engine_version=0.8.5",
                                                                      "num_gpu_blocks_override=100"]))  # fmt: skip


def _deci(tmp_path: Path, **attention: object) -> Path:
    # the shape of nvidia/Llama-3_3-Nemotron-Super-49B-v1's config.json: no intermediate_size, MLP widths per block
    blocks = [
        {"attention": {"n_heads_in_group": 8, "no_op": False, "replace_with_linear": False, **attention},
         "ffn": {"ffn_mult": 2.625}},
        {"attention": {"n_heads_in_group": None, "no_op": True, "replace_with_linear": False}, "ffn": {"ffn_mult": 1}},
        {"attention": {"n_heads_in_group": 16, "no_op": False}, "ffn": {"ffn_mult": 2.625}},
    ]  # fmt: skip
    cfg = {"architectures": ["DeciLMForCausalLM"], "num_hidden_layers": 3, "num_attention_heads": 64,
           "hidden_size": 8192, "vocab_size": 128256, "max_position_embeddings": 131072, "torch_dtype": "bfloat16",
           "block_configs": blocks}  # fmt: skip
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return path


def test_decilm_kv_heads_per_layer(tmp_path: Path) -> None:
    # vLLM nemotron_nas.py: 64 // 8 = 8 and 64 // 16 = 4 kv heads, the no_op layer none; head_dim 8192 // 64 = 128.
    # TP2: 4 + 2 heads a rank × (128 + 128) × 2 B (bf16) = 3,072 B a token; block 16 -> 49,152 B
    arch = load_model(str(_deci(tmp_path)))
    assert arch.kv_heads_per_layer == (8, 0, 4)
    sets = [f"model={tmp_path / 'config.json'}", "kv_cache_dtype=auto", "tp=2", "weights_per_gpu=50GiB"]
    p = plan_pool(arch, load_deployment(VLLM, sets))
    assert (p.cell.main_bytes, p.extras["bytes_per_block"]) == (3_072, 49_152)
    msg = _error_line(_admit("--deploy", SGLANG, "--set", f"model={tmp_path / 'config.json'}", "--set",
                             "weights_per_gpu=50GiB"))  # fmt: skip
    assert "per-layer kv heads" in msg and "SGLang" in msg


def test_decilm_without_weights_asks_for_them(tmp_path: Path) -> None:
    _deci(tmp_path)
    msg = _error_line(_admit("--deploy", VLLM, "--set", f"model={tmp_path / 'config.json'}"))
    assert "weights_per_gpu" in msg


def test_decilm_window_is_refused(tmp_path: Path) -> None:
    _deci(tmp_path, window_length=4096)
    msg = _error_line(_admit("--deploy", VLLM, "--set", f"model={tmp_path / 'config.json'}"))
    assert "block_configs[0].attention.window_length" in msg
