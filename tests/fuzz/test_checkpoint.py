"""Fuzz the checkpoint readers (issue 12): safetensors headers, model.safetensors.index.json, and load_model on a
snapshot folder holding them.

The contract: a reader returns tensors whose offsets fit the file, or raises a KvplanError (exit 2) whose
message is one line; never another exception, within a work budget.
"""

from __future__ import annotations

import json
import struct
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvplan.models.arch import Split
from kvplan.models.from_hf import load_model
from kvplan.models.safetensors import read_index, read_safetensors_header
from kvplan.models.sharding import shard
from tests.fuzz.conftest import one_line_error

FUZZ = settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)

VALID = {
    "__metadata__": {"format": "pt"},
    "model.embed_tokens.weight": {"dtype": "BF16", "shape": [16, 4], "data_offsets": [0, 128]},
    "model.layers.0.self_attn.q_proj.weight": {"dtype": "F8_E4M3", "shape": [4, 4], "data_offsets": [128, 144]},
    "model.layers.0.mlp.experts.0.up_proj.weight": {"dtype": "F32", "shape": [2, 2], "data_offsets": [144, 160]},
}
DATA_BYTES = 160

json_leaf = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=8)
json_value = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


def _file(header: bytes, data: int, length: int | None = None) -> Path:
    path = Path(tempfile.mkdtemp()) / "model.safetensors"
    path.write_bytes(struct.pack("<Q", len(header) if length is None else length) + header + bytes(data))
    return path


@FUZZ
@given(st.binary(max_size=300), st.integers(0, 64), st.one_of(st.none(), st.integers(0, 2**64 - 1)))
def test_random_bytes(header: bytes, data: int, length: int | None) -> None:
    one_line_error(lambda: read_safetensors_header(_file(header, data, length)))


@FUZZ
@given(
    st.sampled_from([k for k in VALID if k != "__metadata__"]),
    st.sampled_from(["dtype", "shape", "data_offsets", "extra", None]),
    json_value,
    st.integers(-20, 20),
)
def test_mutated_header(name: str, key: str | None, value: Any, data_delta: int) -> None:
    doc: dict[str, Any] = json.loads(json.dumps(VALID))
    if key is None:
        doc[name] = value
    else:
        doc[name][key] = value
    header = json.dumps(doc, allow_nan=True).encode()
    tensors = one_line_error(lambda: read_safetensors_header(_file(header, max(DATA_BYTES + data_delta, 0))))
    if tensors is not None:  # what was accepted is sized without error, and fits the file
        assert sum(t.nbytes for t in tensors) <= DATA_BYTES + max(data_delta, 0)
        s = shard(tensors, Split.of(tp=4, ep=2), num_layers=1, ep=2, with_mtp=True)
        assert 0 <= s.bytes <= s.total_bytes + 4 * 16 * 2  # vocab padding may add rows, nothing else grows


@FUZZ
@given(json_value, st.text(max_size=40))
def test_index_and_snapshot(weight_map: Any, text_tail: str) -> None:
    folder = Path(tempfile.mkdtemp())
    (folder / "config.json").write_text(
        json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
                    "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2,
                    "intermediate_size": 128, "vocab_size": 100, "max_position_embeddings": 4096})
    )  # fmt: skip
    text = json.dumps({"metadata": {"total_size": 1000}, "weight_map": weight_map}) + text_tail
    (folder / "model.safetensors.index.json").write_text(text)
    one_line_error(lambda: read_index(folder / "model.safetensors.index.json"))
    one_line_error(lambda: load_model(str(folder)))
