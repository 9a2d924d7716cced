"""An all-sliding-window model on SGLang 0.5.23 (kvplan/engines/sglang_allswa.py): what moves in a hand-off and
what stays refused. The pool's figures are SGLang's own tests (tests/conformance/test_sglang_pool_configurator.py).

Model: a GptOssForCausalLM config.json written here, 32 layers all ``sliding_attention``, window 8, 4 kv heads ×
(64 + 64) × 2 B = 1,024 B a token a layer (32,768 B over the 32 layers); one GPU, tp 1, a 10,000,000 B budget
(mem_fraction_static 1.0: available = pre_load_free − weights_per_gpu).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.engines import plan_pool
from kvplan.engines.common import PoolPlan
from kvplan.errors import PlanError
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from kvplan.plan.transfer import transfer


def _plan(tmp_path: Path, *sets: str) -> PoolPlan:
    cfg = {"architectures": ["GptOssForCausalLM"], "num_hidden_layers": 32, "num_attention_heads": 4,
           "num_key_value_heads": 4, "head_dim": 64, "hidden_size": 256, "intermediate_size": 512, "vocab_size": 1000,
           "max_position_embeddings": 4096, "torch_dtype": "bfloat16", "num_local_experts": 4,
           "num_experts_per_tok": 2, "sliding_window": 8, "layer_types": ["sliding_attention"] * 32}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    dep = tmp_path / "deploy.yaml"
    dep.write_text(
        'schema_version: 1\nname: allswa\nmodel: allswa\nengine: sglang\nengine_version: "0.5.23"\ngpu: h100\n'
        f"gpus_per_node: 1\ntp: 1\nmem_fraction_static: 1.0\nweights_per_gpu: 1GiB\npre_load_free: {10**7 + 2**30}B\n"
    )
    return plan_pool(load_model(str(tmp_path)), load_deployment(str(dep), list(sets)))


def test_transfer_moves_only_the_window(tmp_path: Path) -> None:
    # SGLang send_kv_chunk: no full-attention pages (there is no full pool); _swa_payload: from
    # (2,048 − 8) // 1 × 1 = 2,040 to 2,048: 8 rows × 32,768 B = 262,144 B (before: + 2,048 rows × 32,768 B)
    t = transfer(_plan(tmp_path), 2048)
    assert (t.full_row_bytes, t.main_bytes_per_rank, t.hybrid_bytes_per_rank) == (0, 0, 262_144)
    assert t.bytes_per_rank == 262_144


def test_ratio_is_said_not_applied(tmp_path: Path) -> None:
    p = _plan(tmp_path, "swa_full_tokens_ratio=0.5")
    assert p.knob("swa_full_tokens_ratio").origin.startswith("set; not applied")
    assert p.rows == 305  # 10^7 // 32,768 whatever the ratio


def test_speculative_decoding_refused(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="speculative decoding with an all-sliding-window model"):
        _plan(tmp_path, "speculative_num_draft_tokens=2")


def test_an_architecture_sglang_does_not_give_a_swa_pool(tmp_path: Path) -> None:
    # configs/model_config.py is_hybrid_swa_model: Qwen3ForCausalLM is not in its list, so every layer is sized
    # by DefaultPoolConfigurator as full attention: 10^7 // 32,768 = 305 rows, each request a row per token
    cfg = {"architectures": ["Qwen3ForCausalLM"], "num_hidden_layers": 32, "num_attention_heads": 4,
           "num_key_value_heads": 4, "head_dim": 64, "hidden_size": 256, "intermediate_size": 512, "vocab_size": 1000,
           "max_position_embeddings": 4096, "torch_dtype": "bfloat16", "sliding_window": 8,
           "layer_types": ["sliding_attention"] * 32}  # fmt: skip
    folder = tmp_path / "qwen3"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg))
    _plan(tmp_path)  # writes deploy.yaml
    p = plan_pool(load_model(str(folder)), load_deployment(str(tmp_path / "deploy.yaml"), []))
    assert (p.pools, p.rows, p.cell.total_bytes) == ((), 305, 32_768)
    assert any("not in SGLang's is_hybrid_swa_model list" in n for n in p.notes)


def test_a_mixed_model_sglang_does_not_split(tmp_path: Path) -> None:
    # the same Qwen3ForCausalLM with 16 full + 16 sliding layers: not is_hybrid_swa, so no SWA pool sized by the
    # 0.8 ratio (before: full 339, swa 271 of a HybridSWAPoolConfigurator SGLang does not build for it) but one
    # full pool over all 32 layers: 10^7 // 32,768 = 305
    cfg = {"architectures": ["Qwen3ForCausalLM"], "num_hidden_layers": 32, "num_attention_heads": 4,
           "num_key_value_heads": 4, "head_dim": 64, "hidden_size": 256, "intermediate_size": 512, "vocab_size": 1000,
           "max_position_embeddings": 4096, "torch_dtype": "bfloat16", "sliding_window": 8,
           "layer_types": ["full_attention"] * 16 + ["sliding_attention"] * 16}  # fmt: skip
    folder = tmp_path / "qwen3-mixed"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg))
    _plan(tmp_path)  # writes deploy.yaml
    p = plan_pool(load_model(str(folder)), load_deployment(str(tmp_path / "deploy.yaml"), []))
    assert (p.pools, p.rows, p.cell.total_bytes) == ((), 305, 32_768)
