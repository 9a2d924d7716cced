"""Safetensors headers and per-rank sharding by tensor name (kvplan.models.safetensors, kvplan.models.sharding).

Checkpoints here are written in the real format: an 8-byte little-endian header length, the JSON header
(dtype, shape, data_offsets per tensor), then zero-filled tensor data. Every expected byte count is derived in
a comment from the shapes and the sharding rules in the module docstring.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest

from kvplan import limits
from kvplan.errors import InputError
from kvplan.models.arch import Split
from kvplan.models.hf_cache import hf_cache_dir, resolve_repo_id
from kvplan.models.safetensors import Tensor, read_safetensors_header, snapshot_tensors
from kvplan.models.sharding import rule_for, shard

BITS = {"BF16": 16, "F32": 32, "F8_E4M3": 8, "U8": 8, "F16": 16, "I32": 32, "I64": 64}


def write_safetensors(path: Path, tensors: dict[str, tuple[str, tuple[int, ...]]], *, pad: int = 0) -> None:
    """A real safetensors file: 8-byte LE header length, JSON header, zero-filled data (``pad`` extra bytes)."""
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        n = 1
        for d in shape:
            n *= d
        size = n * BITS[dtype] // 8
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(offset + pad))


# A tiny Llama-like model: hidden 8, 4 query heads and 2 kv heads of head_dim 2, intermediate 16, vocab 100,
# one layer, bf16, untied embeddings, plus one tensor no rule knows.
TINY = {
    "model.embed_tokens.weight": ("BF16", (100, 8)),  # 100 × 8 × 2 = 1,600 B
    "lm_head.weight": ("BF16", (100, 8)),  # 1,600 B
    "model.layers.0.self_attn.q_proj.weight": ("BF16", (8, 8)),  # 128 B
    "model.layers.0.self_attn.k_proj.weight": ("BF16", (4, 8)),  # 2 kv heads × 2 = 4 rows: 64 B
    "model.layers.0.self_attn.v_proj.weight": ("BF16", (4, 8)),  # 64 B
    "model.layers.0.self_attn.o_proj.weight": ("BF16", (8, 8)),  # 128 B
    "model.layers.0.mlp.gate_proj.weight": ("BF16", (16, 8)),  # 256 B
    "model.layers.0.mlp.up_proj.weight": ("BF16", (16, 8)),  # 256 B
    "model.layers.0.mlp.down_proj.weight": ("BF16", (8, 16)),  # 256 B
    "model.layers.0.input_layernorm.weight": ("BF16", (8,)),  # 16 B
    "model.layers.0.post_attention_layernorm.weight": ("BF16", (8,)),  # 16 B
    "model.norm.weight": ("BF16", (8,)),  # 16 B
    "model.layers.0.mystery.weight": ("F32", (4,)),  # 16 B, no rule
}
# whole checkpoint: 2 × 1,600 + 128 + 64 + 64 + 128 + 3 × 256 + 3 × 16 + 16 = 4,416 B
TINY_TOTAL = 4416


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    # two shards, as a real snapshot has: the embeddings in one file, the layer in another
    names = list(TINY)
    write_safetensors(tmp_path / "model-00001-of-00002.safetensors", {n: TINY[n] for n in names[:2]})
    write_safetensors(tmp_path / "model-00002-of-00002.safetensors", {n: TINY[n] for n in names[2:]})
    return tmp_path


def test_header_gives_every_tensor_with_dtype_shape_and_bytes(tiny: Path) -> None:
    tensors = snapshot_tensors(tiny)
    assert len(tensors) == 13
    assert sum(t.nbytes for t in tensors) == TINY_TOTAL
    k = next(t for t in tensors if t.name.endswith("k_proj.weight"))
    assert (k.dtype, k.shape, k.nbytes) == ("BF16", (4, 8), 64)


def test_header_only_is_read(tiny: Path, tmp_path: Path) -> None:
    # 1 GB of declared data that is not there: sizing still reads only the header, and the offsets check is
    # against the file's length, so a sparse file of the right size passes without reading its data
    big = tmp_path / "big.safetensors"
    header = json.dumps({"w": {"dtype": "BF16", "shape": [1 << 29], "data_offsets": [0, 1 << 30]}}).encode()
    with big.open("wb") as f:
        f.write(struct.pack("<Q", len(header)) + header)
        f.truncate(8 + len(header) + (1 << 30))
    (t,) = read_safetensors_header(big)
    assert t.nbytes == 1 << 30  # 2^29 elements × 2 B


@pytest.mark.parametrize(
    ("tp", "expected"),
    [
        # tp 1: vocab 100 padded to 128 (multiple of 64): 2 × 128 × 8 × 2 = 4,096; q 128 + k 64 + v 64 + o 128;
        # MLP 768; norms 48; mystery 16 -> 4,096 + 384 + 768 + 48 + 16 = 5,312
        (1, 5312),
        # tp 2: embeddings 2 × (128 / 2) × 8 × 2 = 2,048; q 64, o (input split) 64; k, v: 2 kv heads over 2 ranks
        # = 1 head = 2 rows × 8 × 2 = 32 each; MLP 768 / 2 = 384; norms 48 and mystery 16 whole
        # -> 2,048 + 64 + 64 + 64 + 384 + 48 + 16 = 2,688
        (2, 2688),
        # tp 4: embeddings 2 × 32 × 8 × 2 = 1,024; q 32, o 32; k, v: 4 ranks > 2 kv heads, so each rank keeps
        # one whole head (replicated): 32 each; MLP 192; norms 48; mystery 16 -> 1,024 + 64 + 64 + 192 + 64 = 1,408
        (4, 1408),
    ],
)
def test_per_rank_bytes_at_tp(tiny: Path, tp: int, expected: int) -> None:
    s = shard(snapshot_tensors(tiny), Split.of(tp=tp), num_layers=1, num_kv_heads=2)
    assert s.bytes == expected
    assert s.total_bytes == TINY_TOTAL
    assert sum(b for _, b in s.by_category) == s.bytes


def test_breakdown_and_unrecognised_at_tp2(tiny: Path) -> None:
    s = shard(snapshot_tensors(tiny), Split.of(tp=2), num_layers=1, num_kv_heads=2)
    # from the tp 2 derivation: embeddings 2,048; attention 64 + 64 + 32 + 32 = 192; MLP 384; norms 48; mystery 16
    assert s.by_category == (
        ("embeddings", 2048),
        ("attention", 192),
        ("dense_mlp", 384),
        ("norms", 48),
        ("unrecognised", 16),
    )
    assert s.unrecognised == ("model.layers.0.mystery.weight",)
    assert s.unrecognised_bytes == 16
    assert "assumed replicated: 1 tensors" in s.assumptions[0]


def test_kv_heads_unknown_split_like_q(tiny: Path) -> None:
    # num_kv_heads 0: k and v split 4 ways like q: 4 rows / 4 = 1 row × 8 × 2 = 16 B each, 32 less than with
    # replication (2 × 32 = 64) -> 1,408 − 64 + 32 = 1,376
    s = shard(snapshot_tensors(tiny), Split.of(tp=4), num_layers=1)
    assert s.bytes == 1376


def test_dp_attention_splits_attention_over_tp_over_dp(tiny: Path) -> None:
    # tp 4, dp_attention 2: attention over 4 / 2 = 2 ranks (q 64, o 64, k 32, v 32 = 192); the embedding too
    # (SGLang use_attn_tp_group): 128 / 2 = 64 rows × 8 × 2 = 1,024, while the LM head stays 4 ways (512) and
    # the MLP too (192); norms 48, mystery 16 -> 1,024 + 512 + 192 + 192 + 48 + 16 = 1,984
    s = shard(snapshot_tensors(tiny), Split.of(tp=4, dp_attention=2), num_layers=1, num_kv_heads=2)
    assert s.category("attention") == 192
    assert s.category("embeddings") == 1536
    assert s.bytes == 1984


# A tiny MoE layer in fp8 blocks: 4 routed experts (intermediate 16, hidden 8), a shared expert, a router with
# its correction bias, the MLA projections and an indexer, plus one MTP layer (layer 1 of a 1-layer model).
MOE = {
    **{
        f"model.layers.0.mlp.experts.{e}.{m}.{p}": spec
        for e in range(4)
        for m, shape in (("gate_proj", (16, 8)), ("up_proj", (16, 8)), ("down_proj", (8, 16)))
        for p, spec in (("weight", ("F8_E4M3", shape)), ("weight_scale_inv", ("F32", (1, 1))))
    },  # per expert: 3 × (128 B fp8 + 4 B scale) = 396 B; 4 experts 1,584 B
    "model.layers.0.mlp.shared_experts.gate_proj.weight": ("BF16", (16, 8)),  # 256 B
    "model.layers.0.mlp.shared_experts.down_proj.weight": ("BF16", (8, 16)),  # 256 B
    "model.layers.0.mlp.gate.weight": ("BF16", (4, 8)),  # 64 B
    "model.layers.0.mlp.gate.e_score_correction_bias": ("F32", (4,)),  # 16 B
    "model.layers.0.self_attn.q_a_proj.weight": ("BF16", (4, 8)),  # 64 B, replicated
    "model.layers.0.self_attn.kv_a_proj_with_mqa.weight": ("BF16", (6, 8)),  # 96 B, replicated
    "model.layers.0.self_attn.q_b_proj.weight": ("BF16", (16, 4)),  # 128 B, column (attention)
    "model.layers.0.self_attn.kv_b_proj.weight": ("BF16", (16, 4)),  # 128 B, column (attention)
    "model.layers.0.self_attn.o_proj.weight": ("BF16", (8, 16)),  # 256 B, row (attention)
    "model.layers.0.self_attn.indexer.wq_b.weight": ("BF16", (8, 4)),  # 64 B, replicated
    "model.layers.0.self_attn.indexer.wk.weight": ("BF16", (4, 8)),  # 64 B, replicated
    "model.layers.1.eh_proj.weight": ("BF16", (8, 16)),  # 256 B, MTP layer
}


def moe_tensors() -> tuple[Tensor, ...]:
    return tuple(Tensor(n, d, s) for n, (d, s) in MOE.items())


def test_rules_of_mla_moe_names() -> None:
    assert rule_for("model.layers.0.self_attn.q_a_proj.weight") == ("attention", "replicated")
    assert rule_for("model.layers.0.self_attn.kv_b_proj.weight_scale_inv") == ("attention", "attn_col")
    assert rule_for("model.layers.0.self_attn.indexer.weights_proj.weight") == ("indexer", "replicated")
    assert rule_for("model.layers.0.mlp.gate.e_score_correction_bias") == ("router", "replicated")
    assert rule_for("model.layers.0.block_sparse_moe.experts.3.w2.weight") == ("routed_experts", "expert_row")
    assert rule_for("model.layers.5.self_attn.rotary.weird") is None


def test_per_tensor_scalars_stay_whole() -> None:
    # NVFP4 q_proj (column-parallel over 4): packed weight [8, 8] U8 -> 2 rows × 8 = 16 B a rank; fp8 scale
    # per 16 inputs [8, 1] -> 2 rows = 2 B; weight_scale_2 and input_scale (F32 [1]) whole: 4 + 4; the
    # compressed-tensors weight_shape (I64 [2]) whole, not split like a bias: 16 -> 16 + 2 + 8 + 16 = 42
    tensors = [
        Tensor("model.layers.0.self_attn.q_proj.weight", "U8", (8, 8)),
        Tensor("model.layers.0.self_attn.q_proj.weight_scale", "F8_E4M3", (8, 1)),
        Tensor("model.layers.0.self_attn.q_proj.weight_scale_2", "F32", (1,)),
        Tensor("model.layers.0.self_attn.q_proj.input_scale", "F32", (1,)),
        Tensor("model.layers.0.self_attn.q_proj.weight_shape", "I64", (2,)),
    ]
    assert shard(tensors, Split.of(tp=4), num_layers=1).bytes == 42


@pytest.mark.parametrize(
    ("tp", "ep", "experts"),
    [
        # tp 4, no EP: each expert's gate/up split on rows (16 / 4 = 4 rows × 8 = 32 B), down on columns
        # (8 × 4 = 32 B); the 1×1 block scale cannot split further and stays 4 B on each rank:
        # per expert 3 × (32 + 4) = 108, 4 experts -> 432
        (4, 1, 432),
        # ep 4 on tp 4 (same effective split, 4 ways): rank 0 holds expert 0 whole: 3 × (128 + 4) = 396
        (4, 4, 396),
        # tp 2, no EP: 3 × (64 + 4) = 204 per expert, × 4 = 816
        (2, 1, 816),
        # tp 1: everything: 4 × 396 = 1,584
        (1, 1, 1584),
    ],
)
def test_routed_experts_by_ep_or_tp(tp: int, ep: int, experts: int) -> None:
    s = shard(moe_tensors(), Split.of(tp=tp, ep=ep), num_layers=1, ep=ep)
    assert s.category("routed_experts") == experts


def test_mla_moe_rank_bytes_at_tp4() -> None:
    s = shard(moe_tensors(), Split.of(tp=4), num_layers=1)
    # routed 432 (above); shared: gate 256 / 4 = 64, down 64 -> 128; router 64 + 16 = 80 whole;
    # attention: q_a 64 + kv_a 96 whole, q_b 128 / 4 = 32, kv_b 32, o 256 / 4 = 64 -> 288;
    # indexer 64 + 64 = 128 whole; MTP layer (256) left out without speculative decoding
    assert s.by_category == (
        ("attention", 288),
        ("indexer", 128),
        ("shared_experts", 128),
        ("routed_experts", 432),
        ("router", 80),
    )
    assert s.bytes == 288 + 128 + 128 + 432 + 80  # 1,056
    assert s.mtp_bytes == 256  # eh_proj replicated
    with_mtp = shard(moe_tensors(), Split.of(tp=4), num_layers=1, with_mtp=True)
    assert with_mtp.bytes == 1056 + 256
    assert with_mtp.category("mtp") == 256


def test_ep_knob_on_tp_layout_is_the_same_split() -> None:
    # ep=8 on TP8 splits experts 8 ways either way: the bytes of experts can differ only by the block scales
    # (whole experts keep their own scales; TP slices repeat the 1×1 scale), never by the weights
    a = shard(moe_tensors(), Split.of(tp=4), num_layers=1)
    b = shard(moe_tensors(), Split.of(tp=4, ep=4), num_layers=1, ep=4)
    assert Split.of(tp=4) == Split.of(tp=4, ep=4)
    assert a.bytes - a.category("routed_experts") == b.bytes - b.category("routed_experts")
    # 432 vs 396: 4 experts × 3 scales × 4 B counted on each TP slice vs 1 expert × 3 × 4 B = 48 − 12 = 36
    assert a.category("routed_experts") - b.category("routed_experts") == 36


# --------------------------------------------------------------------------- bad headers


def _raw(path: Path, header: bytes, data: int = 0, length: int | None = None) -> Path:
    n = len(header) if length is None else length
    path.write_bytes(struct.pack("<Q", n) + header + bytes(data))
    return path


@pytest.mark.parametrize(
    ("header", "data", "message"),
    [
        (b'{"w": {"dtype": "BF16", "shape": [4], "data_offsets": [0, 8]}}', 4, "does not hold 8 bytes"),
        (b'{"w": {"dtype": "BF16", "shape": [4], "data_offsets": [0, 6]}}', 8, "does not hold 8 bytes"),
        (b'{"w": {"dtype": "Q7", "shape": [4], "data_offsets": [0, 8]}}', 8, "not a safetensors dtype"),
        (b'{"w": {"dtype": "BF16", "shape": [-4], "data_offsets": [0, 8]}}', 8, "is not a dimension"),
        (b'{"w": {"dtype": "BF16", "shape": [4]}}', 8, "expected dtype, shape and data_offsets"),
        (b'{"w": {"dtype": "BF16", "shape": [4], "data_offsets": [0, 8]}, "w": 1}', 8, "duplicate key"),
        (b'{"w": {"dtype": "BF16", "shape": [NaN], "data_offsets": [0, 8]}}', 8, "not a number kvplan reads"),
        (b'{"w": ', 8, "not valid JSON"),
        (b"[1, 2]", 0, "not a JSON object"),
        (b'{"w": 1}\xff', 0, "not valid UTF-8"),
        (b'{"w": {"dtype": "BF16", "shape": [' + b"9" * 40 + b'], "data_offsets": [0, 8]}}', 8, "digits"),
        (b"[" * 5000 + b"]" * 5000, 0, "nested deeper"),
    ],
)
def test_bad_header_is_one_input_error(tmp_path: Path, header: bytes, data: int, message: str) -> None:
    path = _raw(tmp_path / "x.safetensors", header, data)
    with pytest.raises(InputError, match=message) as e:
        read_safetensors_header(path)
    assert str(path) in str(e.value)


def test_header_longer_than_file_or_limit(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="the header claims 100 bytes but only 4 follow its 8-byte length"):
        read_safetensors_header(_raw(tmp_path / "a.safetensors", b"{}{}", length=100))
    huge = limits.MAX_SAFETENSORS_HEADER_BYTES + 1
    with pytest.raises(limits.LimitError, match=f"a {huge:,}-byte header is over kvplan's limit"):
        read_safetensors_header(_raw(tmp_path / "b.safetensors", b"{}", length=huge))
    (tmp_path / "c.safetensors").write_bytes(b"\x01\x00")
    with pytest.raises(InputError, match="shorter than the 8-byte header length"):
        read_safetensors_header(tmp_path / "c.safetensors")


def test_not_a_regular_file(tmp_path: Path) -> None:
    fifo = tmp_path / "p.safetensors"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="not a regular file"):
        read_safetensors_header(fifo)
    with pytest.raises(InputError, match="no such file"):
        read_safetensors_header(tmp_path / "missing.safetensors")


def test_same_tensor_in_two_shards(tmp_path: Path) -> None:
    write_safetensors(tmp_path / "a.safetensors", {"w": ("BF16", (2,))})
    write_safetensors(tmp_path / "b.safetensors", {"w": ("BF16", (2,))})
    with pytest.raises(InputError, match=r"tensor w is in both a\.safetensors and b\.safetensors"):
        snapshot_tensors(tmp_path)


# --------------------------------------------------------------------------- the local Hugging Face cache


def _snapshot(hub: Path, repo: str, rev: str) -> Path:
    org, name = repo.split("/")
    snap = hub / f"models--{org}--{name}" / "snapshots" / rev
    snap.mkdir(parents=True)
    (snap / "config.json").write_text("{}")
    return snap


def test_hf_cache_dir_follows_the_environment(tmp_path: Path) -> None:
    assert hf_cache_dir({"HF_HUB_CACHE": str(tmp_path / "hub")}) == tmp_path / "hub"
    assert hf_cache_dir({"HF_HOME": str(tmp_path)}) == tmp_path / "hub"
    assert hf_cache_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "huggingface" / "hub"
    assert hf_cache_dir({}) == Path.home() / ".cache" / "huggingface" / "hub"


def test_repo_id_resolves_to_the_snapshot_refs_main_names(tmp_path: Path) -> None:
    env = {"HF_HOME": str(tmp_path)}
    hub = tmp_path / "hub"
    old, new = "a" * 40, "b" * 40
    _snapshot(hub, "zai-org/GLM-5.3", old)
    snap = _snapshot(hub, "zai-org/GLM-5.3", new)
    with pytest.raises(InputError, match=r"2 snapshots .* and no refs/main"):
        resolve_repo_id("zai-org/GLM-5.3", env)
    (hub / "models--zai-org--GLM-5.3" / "refs").mkdir()
    (hub / "models--zai-org--GLM-5.3" / "refs" / "main").write_text(new + "\n")
    assert resolve_repo_id("zai-org/GLM-5.3", env) == snap
    assert resolve_repo_id("zai-org/GLM-9", env) is None  # not cached: the caller says so; never the network
    assert resolve_repo_id("../etc/passwd", env) is None
    assert resolve_repo_id("a/b/c", env) is None
    one = _snapshot(hub, "meta-llama/Llama-3.1-8B", "c" * 40)
    assert resolve_repo_id("meta-llama/Llama-3.1-8B", env) == one  # the only snapshot, no refs/main
