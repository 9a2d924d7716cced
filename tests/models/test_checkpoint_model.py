"""--model on a snapshot folder or a cached repo id: weights per GPU from the checkpoint (load_model wiring)."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest

from kvplan.errors import InputError
from kvplan.models.arch import Split
from kvplan.models.config_tensors import config_tensors
from kvplan.models.from_hf import load_model, local_ref
from kvplan.models.safetensors import Tensor
from kvplan.models.sharding import param_groups_from_tensors, shard
from tests.models.test_checkpoint_headers import write_safetensors

DATA = Path(__file__).parents[1] / "data"
COGITO = DATA / "checkpoints" / "cogito-qwen2.5-14b"


def test_groups_size_any_split_like_shard() -> None:
    # Qwen3-30B-A3B from its config (18,867 tensors): TensorGroups summed per split equal shard() for the same
    # split; kv heads (4) replicated past 4 attention ranks in both
    config = json.loads((DATA / "hf" / "qwen3-30b-a3b" / "config.json").read_text())
    tensors = config_tensors(config)
    assert tensors is not None
    assert len(tensors) == 18_867  # 48 × (128 × 3 experts + router + 4 attention + 2 qk norms + 2 norms) + 3
    groups = param_groups_from_tensors(tensors, num_layers=48, num_kv_heads=4)
    for split in (Split.of(tp=8), Split.of(tp=8, dp_attention=4)):
        s = shard(tensors, split, num_layers=48, num_kv_heads=4)
        assert sum(g.bytes_per_gpu(split) for g in groups) == s.bytes
    # routed experts: 48 layers × 128 × 3 × 2,048 × 768 × 2 B = 57,982,058,496; tp 8: 768 / 8 = 96 rows or
    # columns a slice -> / 8 = 7,247,757,312; pp 2 halves the layer groups: 3,623,878,656
    experts = next(g for g in groups if g.name == "routed_experts")
    assert experts.bytes_per_gpu(Split.of(tp=1)) == 57_982_058_496
    assert experts.bytes_per_gpu(Split.of(tp=8)) == 7_247_757_312
    assert experts.bytes_per_gpu(Split.of(tp=8, pp=2)) == 3_623_878_656


def _snapshot(tmp_path: Path, config: Path) -> Path:
    snap = tmp_path / "snap"
    snap.mkdir()
    shutil.copy(config, snap / "config.json")
    return snap


def test_snapshot_with_index_only(tmp_path: Path) -> None:
    snap = _snapshot(tmp_path, COGITO / "config.json")
    shutil.copy(COGITO / "model.safetensors.index.json", snap)
    arch = load_model(str(snap))
    # the index reconciles to the byte (test_checkpoint_index), so the groups are the config's tensors:
    # tp 8 -> 3,692,394,496 B (derived in test_checkpoint_index)
    assert arch.estimated_weights_per_gpu(Split.of(tp=8)) == 3_692_394_496
    assert "reconciled to model.safetensors.index.json total_size 29,531,895,808 B" in arch.weights_summary
    assert not [a for a in arch.weights_assumptions if "unexplained" in a or "does not explain" in a]


def test_snapshot_index_with_unexplained_bytes(tmp_path: Path) -> None:
    # the same index read with a Llama config (no q/k/v biases): 688,128 B are unexplained (test_checkpoint_index),
    # 23 ppm of total_size, shown to 3 decimals as 0.002 %,
    # and kept whole on every rank: tp 8 bytes = 3,692,394,496 − the biases' tp-8 share + 688,128, where the
    # biases on a tp-8 rank are 48 × (640 + 128 + 128) × 2 B = 86,016 -> 3,692,394,496 − 86,016 + 688,128
    snap = tmp_path / "snap"
    snap.mkdir()
    config = {**json.loads((COGITO / "config.json").read_text()), "model_type": "llama"}
    (snap / "config.json").write_text(json.dumps(config))
    shutil.copy(COGITO / "model.safetensors.index.json", snap)
    arch = load_model(str(snap))
    assert arch.estimated_weights_per_gpu(Split.of(tp=8)) == 3_692_394_496 - 86_016 + 688_128
    assert any("688,128 B (0.002 % of total_size) the config does not explain" in a for a in arch.weights_assumptions)


def test_snapshot_with_safetensors_headers(tmp_path: Path) -> None:
    # A 2-layer Llama-like snapshot whose one shard holds what the config says plus one unknown tensor
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 100,
        "max_position_embeddings": 4096, "torch_dtype": "bfloat16",
    }  # fmt: skip
    snap = tmp_path / "snap"
    snap.mkdir()
    (snap / "config.json").write_text(json.dumps(config))
    tensors = config_tensors(config)
    assert tensors is not None
    write_safetensors(
        snap / "model.safetensors",
        {**{t.name: (t.dtype, t.shape) for t in tensors}, "model.layers.0.odd.weight": ("F32", (16,))},
    )
    arch = load_model(str(snap))
    # tp 2: embeddings (100 -> 128 rows) 2 × 64 × 64 × 2 = 16,384; per layer q 32 × 64, k and v one kv head
    # (16 rows) each, o 64 × 32: (2,048 + 1,024 + 1,024 + 2,048) × 2 B = 12,288; MLP 3 × 64 × 64 × 2 = 24,576;
    # two norms 256 -> 2 layers × 37,120 = 74,240; final norm 128; odd 64 whole -> 16,384 + 74,240 + 128 + 64
    assert arch.estimated_weights_per_gpu(Split.of(tp=2)) == 90_816
    assert "per tensor from the safetensors headers (22 tensors, " in arch.weights_summary
    assert any("1 tensors kvplan has no sharding rule for (model.layers.0.odd.weight)" in a
               for a in arch.weights_assumptions)  # fmt: skip


def test_repo_id_from_the_local_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.chdir(tmp_path)
    snap = tmp_path / "hub" / "models--deepcogito--cogito-v1-preview-qwen-14B" / "snapshots" / ("e" * 40)
    snap.mkdir(parents=True)
    shutil.copy(COGITO / "config.json", snap)
    shutil.copy(COGITO / "model.safetensors.index.json", snap)
    assert local_ref("deepcogito/cogito-v1-preview-qwen-14B") == str(snap)
    arch = load_model("deepcogito/cogito-v1-preview-qwen-14B")
    assert arch.estimated_weights_per_gpu(Split.of(tp=8)) == 3_692_394_496
    # not cached and HF_HUB_OFFLINE (tests/conftest.py): one error naming the caches it looked in (exit 2);
    # online, kvplan.models.hub fetches it (tests/models/test_hub.py)
    with pytest.raises(InputError, match=r"not in the Hugging Face cache \(.*/hub\) nor kvplan's .*HF_HUB_OFFLINE"):
        load_model("deepcogito/not-cached")
    # a path that exists wins over the cache, and a file name is never a repo id
    (tmp_path / "deepcogito").mkdir()
    shutil.copytree(COGITO, tmp_path / "deepcogito" / "local")
    assert local_ref("deepcogito/local") == "deepcogito/local"
    assert local_ref("models/x.yaml") == "models/x.yaml"


def test_unexplained_tensor_is_replicated() -> None:
    groups = param_groups_from_tensors([Tensor("unexplained", "U8", (1000,))], num_layers=1)
    assert [(g.name, g.bytes_per_gpu(Split.of(tp=8))) for g in groups] == [("unrecognised", 1000)]


def test_cache_snapshot_of_symlinks_to_blobs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # huggingface_hub stores files once under blobs/ and links them from snapshots/<rev>/: headers are read
    # through the links. The 2-layer snapshot of test_snapshot_with_safetensors_headers without the odd
    # tensor: 90,816 − 64 = 90,752 B at tp 2.
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    repo = tmp_path / "hub" / "models--acme--tiny"
    (repo / "blobs").mkdir(parents=True)
    snap = repo / "snapshots" / ("f" * 40)
    snap.mkdir(parents=True)
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 100,
        "max_position_embeddings": 4096, "torch_dtype": "bfloat16",
    }  # fmt: skip
    (repo / "blobs" / "c0nf").write_text(json.dumps(config))
    tensors = config_tensors(config)
    assert tensors is not None
    write_safetensors(repo / "blobs" / "w31ght", {t.name: (t.dtype, t.shape) for t in tensors})
    (snap / "config.json").symlink_to(repo / "blobs" / "c0nf")
    (snap / "model.safetensors").symlink_to(repo / "blobs" / "w31ght")
    arch = load_model("acme/tiny")
    assert arch.estimated_weights_per_gpu(Split.of(tp=2)) == 90_752


def test_cli_bad_shard_is_one_error_line_exit_2(tmp_path: Path) -> None:
    # a shard whose 8-byte length claims 16 header bytes when only 8 follow: exit 2, one line naming the file
    from typer.testing import CliRunner

    from kvplan.cli import app

    snap = _snapshot(tmp_path, DATA / "hf" / "llama-3.1-8b" / "config.json")
    (snap / "model-00001.safetensors").write_bytes(struct.pack("<Q", 16) + b'{"w": 1}')
    result = CliRunner(env={"KVPLAN_FORMAT": None}).invoke(
        app, ["admit", "--ctx", "8K", "--model", str(snap), "--set", "gpu=h100-sxm", "--set", "tp=1"]
    )
    assert result.exit_code == 2
    assert result.stderr == (
        f"kvplan: error: safetensors file {snap / 'model-00001.safetensors'}: the header claims 16 bytes but only"
        " 8 follow its 8-byte length\n"
    )
    assert result.stdout == ""
