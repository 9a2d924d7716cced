"""model.safetensors.index.json: a real public index reconciled to its total_size from config.json alone.

Data: tests/data/checkpoints/cogito-qwen2.5-14b (provenance in tests/data/checkpoints/README.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan import limits
from kvplan.errors import ConfigError, InputError
from kvplan.models.arch import Split
from kvplan.models.config_tensors import config_tensors
from kvplan.models.safetensors import read_index, reconcile
from kvplan.models.sharding import shard

DATA = Path(__file__).parents[1] / "data"
COGITO = DATA / "checkpoints" / "cogito-qwen2.5-14b"


def cogito_config() -> dict[str, object]:
    return dict(json.loads((COGITO / "config.json").read_text()))


def test_real_index_reconciled_to_the_byte() -> None:
    index = read_index(COGITO / "model.safetensors.index.json")
    assert index.total_size == 29_531_895_808
    assert len(index.names) == 579  # 48 layers × 12 tensors + embed_tokens, norm, lm_head
    tensors = config_tensors(cogito_config())
    assert tensors is not None
    r = reconcile(index, tensors)
    # bf16: embed_tokens and lm_head 2 × 151,665 × 5,120; per layer q 5,120² + bias 5,120, k and v
    # 1,024 × 5,120 + bias 1,024 each (8 kv heads × 128), o 5,120², MLP 3 × 5,120 × 13,824, two norms 5,120;
    # the final norm 5,120: (2 × 151,665 × 5,120 + 48 × 195,863,552 + 5,120) × 2 B = 29,531,895,808
    assert r.explained_bytes == 29_531_895_808
    assert r.unexplained_bytes == 0
    assert (r.unknown_names, r.missing_names) == ((), ())


def test_what_is_left_unexplained_is_said() -> None:
    # read as a Llama (no q/k/v biases), the 144 bias tensors of the index are unknown and their bytes
    # unexplained: 48 × (5,120 + 1,024 + 1,024) × 2 B = 688,128 B = 23 ppm of 29,531,895,808 (rounded down)
    index = read_index(COGITO / "model.safetensors.index.json")
    tensors = config_tensors({**cogito_config(), "model_type": "llama"})
    assert tensors is not None
    r = reconcile(index, tensors)
    assert r.unexplained_bytes == 688_128
    assert r.unexplained_ppm == 23
    assert len(r.unknown_names) == 144
    assert r.unknown_names[:2] == ("model.layers.0.self_attn.k_proj.bias", "model.layers.0.self_attn.q_proj.bias")


@pytest.mark.parametrize(
    ("tp", "expected"),
    [
        # tp 1: the checkpoint plus the vocab padding: 151,665 -> 151,680 rows (multiple of 64), 15 rows ×
        # 5,120 × 2 B × 2 tensors = 307,200 -> 29,531,895,808 + 307,200 = 29,532,203,008
        (1, 29_532_203_008),
        # tp 8: embeddings 151,680 / 8 = 18,960 rows × 5,120 × 2 B × 2 = 388,300,800; per layer q 640 rows
        # (+640 bias), k and v one kv head each = 128 rows (+128 bias), o 640 columns: (3,277,440 + 2 × 655,488
        # + 3,276,800) × 2 B × 48 = 755,060,736; MLP 3 × 5,120 × 13,824 / 8 × 2 B × 48 = 2,548,039,680; norms
        # whole (2 × 5,120 × 48 + 5,120) × 2 B = 993,280 -> 3,692,394,496
        (8, 3_692_394_496),
    ],
)
def test_per_rank_bytes_from_the_index_alone(tp: int, expected: int) -> None:
    tensors = config_tensors(cogito_config())
    assert tensors is not None
    assert shard(tensors, Split.of(tp=tp), num_layers=48, num_kv_heads=8).bytes == expected


def test_llama_config_derives_the_published_total_size() -> None:
    # meta-llama/Llama-3.1-8B(-Instruct) model.safetensors.index.json: "total_size": 16060522496 (the value many
    # public repositories quote verbatim): embed + head 2 × 128,256 × 4,096, 32 layers × (2 × 4,096² + 2 × 1,024
    # × 4,096 + 3 × 4,096 × 14,336 + 2 × 4,096), norm 4,096, all × 2 B = 16,060,522,496
    config = json.loads((DATA / "hf" / "llama-3.1-8b" / "config.json").read_text())
    tensors = config_tensors(config)
    assert tensors is not None
    assert sum(t.nbytes for t in tensors) == 16_060_522_496


def test_fp8_block_scales_are_derived(tmp_path: Path) -> None:
    # Qwen3-235B-A22B-FP8: every quantized linear has a weight_scale_inv of ceil(out/128) × ceil(in/128) fp32;
    # one expert's gate_proj (1,536 × 4,096): 12 × 32 blocks = 384 × 4 B = 1,536 B beside its 6,291,456 B
    config = json.loads((DATA / "hf" / "qwen3-235b-a22b-fp8" / "config.json").read_text())
    tensors = config_tensors(config)
    assert tensors is not None
    by_name = {t.name: t for t in tensors}
    w = by_name["model.layers.0.mlp.experts.0.gate_proj.weight"]
    s = by_name["model.layers.0.mlp.experts.0.gate_proj.weight_scale_inv"]
    assert (w.dtype, w.nbytes, s.shape, s.nbytes) == ("F8_E4M3", 6_291_456, (12, 32), 1536)
    # modules_to_not_convert keeps the routers in bf16: 128 experts × 4,096 × 2 B
    assert by_name["model.layers.0.mlp.gate.weight"].nbytes == 1_048_576


def test_unmodelled_scheme_falls_back() -> None:
    # AWQ int4: kvplan has no per-tensor layout for it -> None (the parameter-group estimate is used)
    config = {**cogito_config(), "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128}}
    assert config_tensors(config) is None
    assert config_tensors({"num_hidden_layers": 2}) is None  # no hidden size: nothing to derive


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"metadata": {}, "weight_map": {"a": "x.safetensors"}}', "metadata.total_size"),
        ('{"metadata": {"total_size": "9"}, "weight_map": {}}', "metadata.total_size"),
        ('{"metadata": {"total_size": 9}, "weight_map": []}', "weight_map"),
        ('{"metadata": {"total_size": 9}, "weight_map": {"a": 1}}', "weight_map"),
        ('{"metadata": {"total_size": -1}, "weight_map": {}}', "below 0"),
        ('{"metadata": {"total_size": 9}, "weight_map": {"a": "x", "a": "y"}}', "duplicate key 'a'"),
        ('{"metadata": {"total_size": 9}', "not valid JSON"),
    ],
)
def test_bad_index(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "model.safetensors.index.json"
    path.write_text(text)
    with pytest.raises((ConfigError, InputError), match=message) as e:
        read_index(path)
    assert str(path) in str(e.value)


def test_index_size_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "model.safetensors.index.json"
    path.write_text('{"metadata": {"total_size": 9}, "weight_map": {}}')  # 49 characters, ASCII: 49 bytes
    monkeypatch.setenv(limits.CHECKPOINT_INDEX.env, "40")
    with pytest.raises(limits.LimitError, match="49 bytes is over kvplan's checkpoint-index limit of 40"):
        read_index(path)
