"""Fuzzing the DeepSeek-V4 parameter layout (kvplan/models/params_deepseek_v4.py): any mutation of the verbatim
V4-Flash config.json either counts (every group positive, bytes on a rank never above the whole, more ranks never
more bytes) or fails as a located ConfigError; never another exception."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from kvplan.models.arch import Split
from tests.fuzz.params_check import counts_or_fails_located

CONFIG = json.loads(
    (Path(__file__).resolve().parents[1] / "data" / "hf" / "deepseek-v4-flash" / "config.json").read_text()
)
KEYS = ("hidden_size", "num_hidden_layers", "num_nextn_predict_layers", "num_attention_heads", "head_dim",
        "q_lora_rank", "o_lora_rank", "o_groups", "index_n_heads", "index_head_dim", "n_routed_experts",
        "n_shared_experts", "moe_intermediate_size", "num_experts_per_tok", "num_hash_layers", "hc_mult",
        "vocab_size", "compress_ratios", "expert_dtype", "topk_method", "tie_word_embeddings")  # fmt: skip
values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 70),
    st.sampled_from([128, 512, 1024, 4096, 2**40]),
    st.text(max_size=4),
    st.lists(st.integers(-1, 130), max_size=50),
    st.lists(st.sampled_from([0, 4, 128]), min_size=1, max_size=80),
)


@given(st.dictionaries(st.sampled_from(KEYS), values, max_size=4))
def test_mutated_v4_config_counts_or_fails_located(edit: dict[str, Any]) -> None:
    cfg = {**CONFIG, **edit}
    w = counts_or_fails_located(cfg)
    if w is not None:
        assert all(g.params > 0 and g.bytes_per_gpu(Split.of(tp=8)) > 0 for g in w.groups)
