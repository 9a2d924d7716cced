"""Grok-2 (xai-org/grok-2, ``Grok1ForCausalLM``): the transcribed preset, its parameters and its KV bytes.

Values (kvplan/configs/models/grok-2.yaml, sources in its ``source:`` and tests/data/hf/README.md): 64 layers,
hidden 8,192, 64 query / 8 kv heads of ``head_dim`` 128, 8 local experts of ``moe_intermediate_size`` 16,384,
``residual_moe`` with a dense MLP of ``intermediate_size`` 32,768, vocab 131,072, untied, 131,072 positions, bf16.

Shapes as SGLang ``models/grok.py`` builds them: ``Grok1Attention`` (q / o heads × 128, k / v 8 × 128, no bias,
``num_kv_heads = max(1, total // tp)``), ``Grok1MoE`` (``FusedMoE`` of w1 / w3 / w2, gate ``ReplicatedLinear``
E × h), ``Grok1MLP`` beside it when ``residual_moe`` (gate_up, down), four RMSNorms a layer.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.errors import ConfigError
from kvplan.models.from_hf import load_model
from kvplan.models.weights import param_groups_from_hf

runner = CliRunner(env={"KVPLAN_FORMAT": None})
ROOT = Path(__file__).resolve().parents[2]
PRESET = ROOT / "kvplan" / "configs" / "models" / "grok-2.yaml"
LOG = ROOT / "tests" / "data" / "logs" / "doctor-sglang-npu-grok-2-tp16-sglang-pr-29853.log"

H, L, V = 8_192, 64, 131_072
ATTENTION = L * (2 * H * H)  # q_proj, o_proj 8,192 × 8,192: 8,589,934,592
KV_PROJ = L * (2 * 1_024 * H)  # k_proj, v_proj 1,024 × 8,192: 1,073,741,824
EXPERTS = L * 8 * 3 * 16_384 * H  # 8 experts of w1 / w3 (16,384 × 8,192) and w2: 206,158,430,208
RESIDUAL = L * 3 * 32_768 * H  # the residual MLP's gate / up / down (32,768 × 8,192): 51,539,607,552
ROUTER = L * 8 * H  # gate 8 × 8,192 a layer: 4,194,304
NORMS = (4 * L + 1) * H  # pre/post attention, pre/post MoE a layer + the final norm: 2,105,344
EMBED = 2 * V * H  # embed_tokens and lm_head: 2,147,483,648
PUBLISHED = 269_515_497_472
"""xai-org/grok-2's parameter count from its checkpoint's tensors (huggingface.co/xai-org/grok-2 discussion 6,
"The Grok-2 model has a total of ~270B parameters (269,515,497,472)"; its per-part lines give embeddings
2,147,483,648, attention 8,791,261,184 = ATTENTION + KV_PROJ, shared FFN 51,539,607,552; its norm line, 2,101,248,
is a slip for 8,192 × 4 × 64 + 8,192 = 2,105,344, which the total needs)."""


def _config() -> dict[str, object]:
    doc = yaml.safe_load(PRESET.read_text(encoding="utf-8"))
    config = doc["config"]
    assert isinstance(config, dict)
    return config


def test_the_preset_reproduces_the_published_parameter_count() -> None:
    assert ATTENTION + KV_PROJ + EXPERTS + RESIDUAL + ROUTER + NORMS + EMBED == PUBLISHED
    m = load_model("grok-2")
    groups = {g.name: g.params for g in m.param_groups}
    assert groups == {
        "attention": ATTENTION, "kv_proj": KV_PROJ, "routed_experts": EXPERTS, "dense_mlp": RESIDUAL,
        "router": ROUTER, "norms": NORMS, "embeddings": EMBED, "rotary_cache": 0,
    }  # fmt: skip
    assert sum(groups.values()) == PUBLISHED


def test_its_config_json_plans_as_a_full_attention_model(tmp_path: Path) -> None:
    # before: "Grok1ForCausalLM is not a model kvplan plans" (exit 2 on any command)
    path = tmp_path / "grok-2" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(_config()), encoding="utf-8")
    m = load_model(str(path))
    shape = (m.architecture, m.num_layers, m.num_kv_heads, m.head_dim, m.v_head_dim)
    assert shape == ("Grok1ForCausalLM", 64, 8, 128, 128)
    assert m.max_position_embeddings == 131_072 and not m.is_hybrid and not m.is_mla
    assert sum(g.params for g in m.param_groups) == PUBLISHED


def test_without_residual_moe_there_is_no_dense_mlp_and_experts_take_intermediate_size() -> None:
    # grok.py: FusedMoE(intermediate_size=getattr(config, "moe_intermediate_size", config.intermediate_size));
    # self.mlp = Grok1MLP(...) only `if self.residual_moe` (Grok-1's configs have neither key)
    grok1 = {k: v for k, v in _config().items() if k not in ("residual_moe", "moe_intermediate_size")}
    w = param_groups_from_hf(grok1, "grok-1-like")
    groups = {g.name: g.params for g in w.groups}
    assert "dense_mlp" not in groups
    assert groups["routed_experts"] == L * 8 * 3 * 32_768 * H  # 8 experts of 32,768


def test_a_grok_config_without_experts_is_refused_in_one_line() -> None:
    bad = {k: v for k, v in _config().items() if k != "num_local_experts"}
    with pytest.raises(ConfigError, match="num_local_experts"):
        param_groups_from_hf(bad, "grok-bad")


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
@pytest.mark.parametrize(("tp", "nodes", "per_token"), [(8, 1, 32_768), (16, 2, 32_768)])
def test_kv_bytes_per_token_and_rank(engine: str, tp: int, nodes: int, per_token: int) -> None:
    # 64 layers × max(1, 8 // tp) kv heads × 128 × (K, V) × 2 B: TP8 one head a rank, TP16 one head replicated
    # (SGLang Grok1Attention / MHATokenToKVPool; vLLM FullAttentionSpec page = 2 × block × heads × 128 × 2 B)
    assert per_token == L * max(1, 8 // tp) * 128 * 2 * 2
    args = ["budget", "--model", "grok-2", "--set", f"engine={engine}", "--set", f"tp={tp}", "--set", f"nodes={nodes}"]
    r = runner.invoke(app, [*args, "--format", "json"])
    assert r.exit_code == 0, r.output
    plan = json.loads(r.stdout)["plan"]
    assert plan["cell"]["main_bytes"] == per_token and plan["cell"]["total_bytes"] == per_token
    assert plan["kv_format"] == "bf16" and plan["attention"] == "GQA"


def test_the_doctor_reads_sglangs_public_grok2_log_as_grok2_rows() -> None:
    # sgl-project/sglang#29853 (Ascend, TP16): "#tokens: 387968, K size: 5.92 GB, V size: 5.92 GB" a rank;
    # (K + V) / rows = 32,768 B = 64 layers × 1 kv head × 128 × 2 × 2 B, the preset's bytes at TP16 (test above)
    r = runner.invoke(app, ["doctor", "--log", str(LOG), "--format", "json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["headline"]["kind"] == "cannot_tell" and data["headline"]["cause"] is None
    rows = data["evidence"]["bytes_per_row"]
    assert rows["low"] <= L * 1 * 128 * 2 * 2 <= rows["high"]
    assert 387_968 * L * 128 * 2 == 6_356_467_712  # "K size: 5.92 GB": 6,356,467,712 / 2**30 = 5.92
    fits = [c["name"] for c in data["evidence"]["candidates"] if c["fits"]]
    assert any(name.startswith("grok-2") for name in fits), fits  # before: no Grok preset to name


def test_a_llama_log_still_names_llama_first_though_grok2_at_tp2_has_its_rows() -> None:
    # Grok-2 at tp 2: 64 × (8 // 2) × 128 × 2 × 2 B = 131,072 B, Llama-3.1-8B's 32 × 8 × 128 × 2 × 2 B exactly (before:
    # 'grok-2 at tp 2', first by name, became --emit-deploy's model). The log prints 'type=LlamaForCausalLM' and
    # 'mem usage=15.11 GB' (llama-3.1-8b at tp 1: ~15 GiB of bf16 weights; grok-2 at tp 2: 251.04 GiB)
    assert L * (8 // 2) * 128 * 2 * 2 == 32 * 8 * 128 * 2 * 2
    log = ROOT / "tests" / "data" / "logs" / "field" / "sglang-llama-3.1-8b-h100-sglang-pr-4760.log"
    r = runner.invoke(app, ["doctor", "--log", str(log), "--format", "json"])
    assert r.exit_code == 0, r.output
    fits = [c["name"] for c in json.loads(r.stdout)["evidence"]["candidates"] if c["fits"]]
    assert fits[0] == "llama-3.1-8b at tp 1" and "grok-2 at tp 2" in fits, fits


def test_a_log_without_the_class_ranks_by_its_weights_figure() -> None:
    # vllm-project/vllm#10517 (V0, no class line): 'Loading model weights took 14.9888 GB'; Llama-3.1-8B (~15 GiB at
    # tp 1), Qwen3-32B at tp 2 (30.52 GiB) and Grok-2 at tp 2 (251.04 GiB) all have 2,097,152 B blocks
    log = ROOT / "tests" / "data" / "logs" / "doctor-vllm-v0-llama-3.1-8b-rtx3090-issue-10517.log"
    r = runner.invoke(app, ["doctor", "--log", str(log), "--format", "json"])
    fits = [c["name"] for c in json.loads(r.stdout)["evidence"]["candidates"] if c["fits"]]
    assert fits[:3] == ["llama-3.1-8b at tp 1", "qwen3-32b at tp 2", "grok-2 at tp 2"], fits


def test_the_grok2_log_names_grok2_first_by_its_class() -> None:
    # rows of 32,768 B also fit qwen3-32b at tp 8 and llama-3.1-8b at tp 4; the log prints
    # 'type=Grok1ForCausalLM', the class of the grok-2 preset, so it ranks first
    r = runner.invoke(app, ["doctor", "--log", str(LOG), "--format", "json"])
    fits = [c["name"] for c in json.loads(r.stdout)["evidence"]["candidates"] if c["fits"]]
    assert fits[0] == "grok-2 at tp 8", fits


def test_head_dim_defaults_to_128_as_grok1attention_reads_it() -> None:
    # SGLang models/grok.py Grok1Attention: self.head_dim = getattr(config, "head_dim", 128); q_proj is
    # heads × head_dim rows of hidden columns: 64 layers × 64 heads × 128 × 8,192 = 4,294,967,296 q parameters a model
    # (o_proj the same), whatever the config leaves out
    cfg = {k: v for k, v in _config().items() if k != "head_dim"}
    with_key = {g.name: g.params for g in param_groups_from_hf(_config(), "grok-2").groups}
    without = {g.name: g.params for g in param_groups_from_hf(cfg, "grok-2-no-head-dim").groups}
    assert without == with_key
    assert without["attention"] == 2 * L * 64 * 128 * H


@pytest.mark.parametrize("key", ["vocab_size", "max_position_embeddings"])
def test_vocab_and_positions_are_required_as_grok_py_reads_them(key: str) -> None:
    # grok.py reads config.vocab_size (VocabParallelEmbedding) and config.max_position_embeddings (the rotary
    # cache's max_position, unless context_len is set) with no default: a config without them cannot start
    bad = {k: v for k, v in _config().items() if k != key}
    with pytest.raises(ConfigError, match=key):
        param_groups_from_hf(bad, "grok-bad")
