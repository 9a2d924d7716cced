"""A checkpoint's weights and what kvplan says about the bytes it cannot place (kvplan/models/snapshot.py), pinned
where the mutation check moves the words and numbers of those notes.

The index is deepcogito/cogito-v1-preview-qwen-14B's ``model.safetensors.index.json`` (579 tensors, total_size
29,531,895,808 B), which its Qwen2 config.json explains to the byte (tests/models/test_checkpoint_model.py).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kvplan.models.config_tensors import config_tensors
from kvplan.models.from_hf import load_model
from tests.models.test_checkpoint_headers import write_safetensors

COGITO = Path(__file__).parents[1] / "data" / "checkpoints" / "cogito-qwen2.5-14b"
TOTAL = 29_531_895_808


def _snapshot(tmp_path: Path, extra_bytes: int, extra_names: int = 0) -> tuple[str, ...]:
    snap = tmp_path / "snap"
    snap.mkdir()
    shutil.copy(COGITO / "config.json", snap)
    index = json.loads((COGITO / "model.safetensors.index.json").read_text())
    index["metadata"]["total_size"] = TOTAL + extra_bytes
    index["weight_map"].update({f"extra.{i}": "model-00001-of-00006.safetensors" for i in range(extra_names)})
    (snap / "model.safetensors.index.json").write_text(json.dumps(index))
    return load_model(str(snap)).weights_assumptions


def test_a_tenth_unexplained_is_10_000_percent_and_four_names_end_in_an_ellipsis(tmp_path: Path) -> None:
    # x / (T + x) = 1/10 for x = T / 9 = 3,281,321,757 B (rounded up): 100,000 ppm -> 10.000 % to 3 decimals
    said = _snapshot(tmp_path, 3_281_321_757, extra_names=4)
    assert said == (
        "assumed replicated: 3,281,321,757 B (10.000 % of total_size) the config does not explain; "
        "4 unknown tensor names (extra.0, extra.1, extra.2 …)",
    )


def test_three_unknown_names_are_all_shown(tmp_path: Path) -> None:
    said = _snapshot(tmp_path, 1, extra_names=3)  # one byte unexplained is said too
    assert said == (
        "assumed replicated: 1 B (0.000 % of total_size) the config does not explain; "
        "3 unknown tensor names (extra.0, extra.1, extra.2)",
    )


def test_an_index_explained_to_the_byte_says_nothing(tmp_path: Path) -> None:
    assert _snapshot(tmp_path, 0) == ()


def test_an_index_smaller_than_the_config_says_by_how_much(tmp_path: Path) -> None:
    assert _snapshot(tmp_path, -1_000) == (
        "the config derives 1,000 B more than model.safetensors.index.json's total_size",
    )


# The 2-layer Llama-like snapshot of test_checkpoint_model.test_snapshot_with_safetensors_headers
TINY = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 100,
    "max_position_embeddings": 4096, "torch_dtype": "bfloat16",
}  # fmt: skip


@pytest.mark.parametrize(
    ("odd", "listed"),
    [
        (3, "3 tensors kvplan has no sharding rule for (model.layers.0.odd0.weight, model.layers.0.odd1.weight, "
            "model.layers.0.odd2.weight)"),
        (4, "4 tensors kvplan has no sharding rule for (model.layers.0.odd0.weight, model.layers.0.odd1.weight, "
            "model.layers.0.odd2.weight and 1 more)"),
        (6, "6 tensors kvplan has no sharding rule for (model.layers.0.odd0.weight, model.layers.0.odd1.weight, "
            "model.layers.0.odd2.weight and 3 more)"),
    ],
)  # fmt: skip
def test_tensors_without_a_rule_are_named_three_at_most(tmp_path: Path, odd: int, listed: str) -> None:
    snap = tmp_path / "snap"
    snap.mkdir()
    (snap / "config.json").write_text(json.dumps(TINY))
    tensors = config_tensors(TINY)
    assert tensors is not None
    odd_tensors = {f"model.layers.0.odd{i}.weight": ("F32", (16,)) for i in range(odd)}
    write_safetensors(snap / "model.safetensors", {**{t.name: (t.dtype, t.shape) for t in tensors}, **odd_tensors})
    assert load_model(str(snap)).weights_assumptions == (f"assumed replicated: {listed}",)
