"""Cache kinds (kvplan.models.cache), the layers a model owns, and the HF import of every supported family."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.models.cache import FullAttention, IndexerK, MlaLatent, kv_dtype_bytes
from kvplan.models.formats import MlaLayout
from kvplan.models.from_hf import FULL_ATTENTION_ARCHITECTURES, load_model

HF = Path(__file__).resolve().parents[1] / "data" / "hf"
runner = CliRunner(env={"KVPLAN_FORMAT": None})


@pytest.mark.parametrize(("dtype", "size"), [("auto", 2), ("bf16", 2), ("fp16", 2), ("fp8_e4m3", 1), ("fp8_e5m2", 1)])
def test_kv_dtype_bytes(dtype: str, size: int) -> None:
    assert kv_dtype_bytes(dtype) == size


@pytest.mark.parametrize(
    ("kv", "tp", "per_rank", "replicated"),
    [
        (8, 1, 8, False),  # 8 // 1
        (8, 8, 1, False),  # 8 // 8
        (8, 16, 1, True),  # max(1, 8 // 16 = 0): each head on two ranks
        (4, 8, 1, True),  # Qwen3-235B at TP8
        (64, 8, 8, False),  # MHA 64 heads
    ],
)
def test_kv_heads_per_rank(kv: int, tp: int, per_rank: int, replicated: bool) -> None:
    a = FullAttention(kv, 128, 128)
    assert a.kv_heads_per_rank(tp) == per_rank
    assert a.replicated(tp) is replicated
    # K and V: per_rank × 128 × 2 B each
    assert a.bytes_per_token(tp, "bf16") == per_rank * (128 + 128) * 2


def test_v_head_dim_differs() -> None:
    # K 192 and V 128 per head: 2 heads × (192 + 128) × 1 B fp8 = 640 B
    assert FullAttention(2, 192, 128).bytes_per_token(1, "fp8_e4m3") == 640


@pytest.mark.parametrize(("kv", "heads", "label"), [(1, 32, "MQA"), (8, 64, "GQA"), (32, 32, "MHA")])
def test_labels(kv: int, heads: int, label: str) -> None:
    assert FullAttention(kv, 128, 128, heads).label == label


def test_mla_and_indexer_rows() -> None:
    # (512 + 64) × 2 = 1,152; 512 + 512/128 × 4 + 64 × 2 = 656; 512 + 64 = 576; indexer 128 + 4 = 132
    m = MlaLatent(512, 64)
    assert [m.bytes_per_token(x) for x in MlaLayout] == [1152, 656, 576]
    assert IndexerK(128).bytes_per_token == 132
    assert IndexerK(128, 2).bytes_per_token == 66  # ceil(132 / 2)


def test_layers_dsa_has_indexer_on_full_layers_only() -> None:
    m = load_model("glm-5.3")
    assert m.kind_label == "DSA"
    assert sum(1 for layer in m.layers if layer.indexer is not None) == m.full_indexer_layers == 21
    assert all(isinstance(layer.attention, MlaLatent) for layer in m.layers)


@pytest.mark.parametrize(
    ("name", "label", "layers", "kv", "head_dim"),
    [
        ("llama-3.1-8b", "GQA", 32, 8, 128),  # hidden 4096 / 32 heads = 128 (no head_dim key)
        ("llama-3.1-70b", "GQA", 80, 8, 128),  # 8192 / 64 = 128
        ("qwen3-32b", "GQA", 64, 8, 128),  # explicit head_dim 128 (5120 / 64 would be 80)
        ("qwen3-235b-a22b", "GQA", 94, 4, 128),
        ("glm-4.5-air", "GQA", 46, 8, 128),  # explicit head_dim 128 (4096 / 96 would be 42)
        ("mixtral-8x7b", "GQA", 32, 8, 128),
    ],
)
def test_full_attention_import(name: str, label: str, layers: int, kv: int, head_dim: int) -> None:
    m = load_model(str(HF / name / "config.json"))
    assert m.kind_label == label and m.num_layers == layers
    assert m.attention == FullAttention(kv, head_dim, head_dim, m.num_attention_heads)
    assert not m.is_dsa and m.indexer is None
    assert all(layer.indexer is None for layer in m.layers)


@pytest.mark.parametrize("name", ["deepseek-v3", "deepseek-r1", "kimi-k2"])
def test_plain_mla_import(name: str) -> None:
    m = load_model(str(HF / name / "config.json"))
    assert m.kind_label == "MLA" and m.attention == MlaLatent(512, 64) and not m.is_dsa


@pytest.mark.parametrize(
    "name", ["llama-3.1-8b", "llama-3.1-70b", "qwen3-32b", "qwen3-235b-a22b", "glm-4.5-air", "deepseek-v3", "kimi-k2"]
)
def test_presets_match_published_configs(name: str) -> None:
    preset, hf = load_model(name), load_model(str(HF / name / "config.json"))
    for field in ("num_layers", "num_mtp_layers", "attention", "max_position_embeddings"):
        assert getattr(preset, field) == getattr(hf, field), field
    # presets count parameter groups, a config.json every tensor (kvplan.models.config_tensors): within 0.3 %
    assert preset.total_params == pytest.approx(hf.total_params, rel=0.003)


# --------------------------------------------------------------------------- bad input: exit 2, one line


def _error(tmp_path: Path, config: dict[str, object]) -> str:
    path = tmp_path / "m" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(config, indent=1))
    r = runner.invoke(app, ["admit", "--ctx", "8K", "--model", str(path), "--set", "weights_per_gpu=10GiB"])
    assert r.exit_code == 2, r.stderr
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kvplan: error: "), r.stderr
    return lines[0]


LLAMA = json.loads((HF / "llama-3.1-8b" / "config.json").read_text())


def test_unsupported_architecture(tmp_path: Path) -> None:
    line = _error(tmp_path, {**LLAMA, "architectures": ["GPT2LMHeadModel"]})
    assert "GPT2LMHeadModel is not a model kvplan plans" in line and "architectures" in line
    assert all(a in line for a in FULL_ATTENTION_ARCHITECTURES)


def test_missing_head_fields(tmp_path: Path) -> None:
    config = {k: v for k, v in LLAMA.items() if k not in ("hidden_size", "head_dim")}
    assert "head_dim: missing" in _error(tmp_path, config)


def test_missing_heads(tmp_path: Path) -> None:
    config = {k: v for k, v in LLAMA.items() if k != "num_attention_heads"}
    assert "num_attention_heads" in _error(tmp_path, config)


def test_inconsistent_head_counts(tmp_path: Path) -> None:
    # 32 query heads cannot be grouped over 6 kv heads
    line = _error(tmp_path, {**LLAMA, "num_key_value_heads": 6})
    assert "num_key_value_heads" in line and "does not divide num_attention_heads 32" in line


def test_sliding_window_not_modelled(tmp_path: Path) -> None:
    line = _error(tmp_path, {**LLAMA, "architectures": ["MistralForCausalLM"], "sliding_window": 4096})
    assert "sliding_window" in line and "not modelled" in line
