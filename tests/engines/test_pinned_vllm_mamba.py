"""kvplan.engines.vllm_mamba pinned at its version boundaries and per-GPU rules (mutation check).

The model is test_vllm_hybrid's Qwen3-Next config (48 layers, full attention every 4th: 12 full + 36 GDN) at tp 4,
context 262,144, whose figures that file derives: GDN state 274,432 B a request (12,288 conv + 262,144 recurrent),
attention row max(1, 2 // 4) = 1 kv head × (256 + 256) × 2 B = 1,024 B a token, groups of 12 (1 + 3 groups).

Engine source read (vllm-project/vllm):
- ``platforms/interface.py::_align_hybrid_block_size`` (0.27.0 on) / ``model_executor/models/config.py
  HybridAttentionMambaModelConfig.verify_and_update_config`` (before): block = align × cdiv(mamba page, align ×
  attention page of one token); 'align' mode lcm's align with the GDN prefill checkpoint alignment (64,
  ``gdn_attn.py``) from 0.33.0, when ``QwenGDNLinearAttention.get_kv_cache_spec`` sets one checkpoint block;
  on SM10x with head_size 256 and FlashInfer the alignment is 32 (flashinfer#1993, 0.11.1-0.26);
- ``MambaSpec.max_memory_usage_bytes``: 2 + checkpoint + num_speculative_blocks pages a group in 'align' mode, 1 +
  num_speculative_blocks in 'none';
- ``ModelConfig.is_prefix_caching_supported``: hybrids without prefix caching (mode 'none') before 0.26.0;
  0.26.0-0.27.x mode 'all' for models that support it (refused), 0.28.0 on always 'align';
- ``qwen_gdn_linear_attn._resolve_gdn_prefill_backend``: FlashInfer (checkpoints) on SM90, and on SM10x / SM12x
  with head_k_dim 128; Triton elsewhere; KDA declares no alignment.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.engines import plan_pool
from kvplan.engines.common import PoolPlan
from kvplan.engines.vllm_mamba import gdn_checkpoint_alignment
from kvplan.errors import InputError
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from tests.engines.test_vllm_hybrid import _qwen3_next, plan


def _plan(tmp_path: Path, **sets: object) -> PoolPlan:
    return plan(_qwen3_next(tmp_path), tp=4, context_length=262_144, weights_per_gpu="40GiB", **sets)


@pytest.mark.parametrize(
    ("version", "gpu", "block", "per_request"),
    [
        # 'align' + one checkpoint block: lcm(16, 64) = 64; 64 × cdiv(274,432, 65,536) = 64 × 5 = 320;
        # cdiv(262,144, 320) = 820 + 3 groups × (2 + 1) = 829
        ("0.33.0", "h200", 320, 829),
        # 'align', no checkpoint block before 0.33: 16 × cdiv(274,432, 16,384) = 16 × 17 = 272;
        # cdiv(262,144, 272) = 964 + 3 × 2 = 970
        ("0.32.0", "h200", 272, 970),
        ("0.28.0", "h200", 272, 970),
        # 'none' before 0.26: 272 and 964 + 3 × 1 = 967
        ("0.25.0", "h200", 272, 967),
        ("0.25.0", "a100-80gb", 272, 967),
        # SM10x, head 256, FlashInfer (0.11.1 on, before 0.27): align 32 -> 32 × cdiv(274,432, 32,768) = 32 × 9 = 288;
        # cdiv(262,144, 288) = 911 + 3 = 914
        ("0.25.0", "b200", 288, 914),
        ("0.11.1", "b200", 288, 914),
        ("0.11.0", "b200", 272, 967),  # before flashinfer#1993's rule: 16
    ],
)
def test_block_and_blocks_a_request_by_version(
    tmp_path: Path, version: str, gpu: str, block: int, per_request: int
) -> None:
    p = _plan(tmp_path, engine_version=version, gpu=gpu)
    assert (p.extras["block_size"], p.extras["blocks_per_request"]) == (block, per_request)


@pytest.mark.parametrize("version", ["0.26.0", "0.27.0"])
def test_mode_all_is_refused(tmp_path: Path, version: str) -> None:
    with pytest.raises(InputError, match=rf"mamba_cache_mode 'all' \(vLLM 0.26-0.27\) \(.*\) on vLLM {version}$"):
        _plan(tmp_path, engine_version=version)


def test_the_notes_say_the_mode_and_its_blocks(tmp_path: Path) -> None:
    align = _plan(tmp_path).notes
    assert (
        "vLLM hybrid KV cache manager: 4 KV cache groups of 12 layers share one block pool; a request takes 3 state"
        " blocks per Gated DeltaNet state group in mamba_cache_mode 'align' (2 + 1 prefill checkpoint; ASSUMPTION:"
        " prefix caching on, the vLLM default for hybrids from 0.26)"
    ) in align
    assert any(n.endswith("at most floor(prefix / 320) × 320 tokens are reused") for n in align)
    none = _plan(tmp_path, engine_version="0.25.0").notes
    assert (
        "vLLM hybrid KV cache manager: 4 KV cache groups of 12 layers share one block pool; a request takes 1 state"
        " blocks per Gated DeltaNet state group in mamba_cache_mode 'none' (prefix caching off: the default for"
        " hybrids before vLLM 0.26)"
    ) in none
    assert (
        "vLLM 0.25.0 runs a Mamba hybrid without prefix caching (the default before 0.26): no prefix is reused" in none
    )
    assert not any("prefix reuse on a hybrid" in n for n in none)


def test_mtp_adds_speculative_state_blocks(tmp_path: Path) -> None:
    # 2 draft tokens: the conv state keeps 3 + 2 = 5 columns: 5 × 2,048 × 2 B = 20,480 + 262,144 = 282,624 B;
    # 64 × cdiv(282,624, 65,536) = 320; the MTP layer's attention makes 13 attention layers: group size 13
    # (36 >= 1.5 × 13), 1 + 3 groups; 820 + 3 × (2 + 1 + 2) = 835
    p = _plan(tmp_path, speculative_num_draft_tokens=2)
    assert (p.extras["state_bytes"], p.extras["block_size"], p.extras["group_size"]) == (282_624, 320, 13)
    assert p.extras["blocks_per_request"] == 835
    assert any(
        "in mamba_cache_mode 'align' (2 + 1 prefill checkpoint + 2 speculative; ASSUMPTION" in n for n in p.notes
    )


@pytest.mark.parametrize(
    ("model", "gpu", "want"),
    [
        ("qwen3-next-80b-a3b", "h200", 64),  # GDN on SM90: FlashInfer
        ("qwen3-next-80b-a3b", "b200", 64),  # SM10x with head_k_dim 128
        ("qwen3-next-80b-a3b", "a100-80gb", None),  # SM80: Triton
        ("qwen3-next-80b-a3b", "mi300x", None),  # ROCm: no FlashInfer
        ("kimi-linear-48b-a3b", "h200", None),  # KDA declares no alignment
    ],
)
def test_gdn_checkpoint_alignment(model: str, gpu: str, want: int | None) -> None:
    arch = load_model(model)
    (state,) = {layer.state for layer in arch.layers if layer.state is not None}
    dep = load_deployment("glm-5.3-8xh200-vllm", [f"gpu={gpu}"])
    assert gdn_checkpoint_alignment(arch, dep, state) == want


def test_the_block_knob_shows_its_arithmetic(tmp_path: Path) -> None:
    # the figures of test_block_and_blocks_a_request_by_version: lcm(16, 64) = 64 from 0.27.0 (the function then
    # is _align_hybrid_block_size), 16 and the config.py rule before it
    k = _plan(tmp_path).knob("page_size")
    assert k.origin.startswith(
        "default: vLLM _align_hybrid_block_size: 64 × cdiv(mamba page 274,432 B, 64 × 1,024 B a token) = 320 tokens,"
        " so that one attention page holds a state (was 16: "
    )
    old = _plan(tmp_path, engine_version="0.25.0").knob("page_size")
    assert old.origin.startswith(
        "default: vLLM HybridAttentionMambaModelConfig.verify_and_update_config: 16 × cdiv(mamba page 274,432 B, 16 ×"
        " 1,024 B a token) = 272 tokens"
    )
    # the MTP note: 12 target + 1 MTP attention layers, 2 speculative blocks and conv columns
    spec = _plan(tmp_path, speculative_num_draft_tokens=2).notes
    assert any(
        n.startswith(
            "speculative decoding (MTP, num_speculative_tokens 2): the drafter's 1 MTP full-attention layer joins the"
            " full attention KV cache groups (12 + 1 = 13 layers; "
        )
        and "keeps 2 speculative state blocks a request" in n
        for n in spec
    )


@pytest.mark.parametrize(("gpu", "backend"), [("mi300x", "ROCM_AITER_MLA"), ("h200", "FLASH_ATTN_MLA")])
def test_kimi_linear_block_before_0_27(gpu: str, backend: str) -> None:
    # HybridAttentionMambaModelConfig.verify_and_update_config (before 0.27): an MLA model aligns to 64 (128 only on
    # CUTLASS_MLA), whatever the platform; Kimi-Linear at tp 2: KDA state 1,085,440 B, MLA row (512 + 64) × 2 =
    # 1,152 B -> 64 × cdiv(1,085,440, 73,728) = 64 × 15 = 960 tokens (vllm#28228's 0.11.1 log: 'GPU KV cache size:
    # 75,840' = 79 × 960). ROCM_AITER_MLA's kernel block 1 leaves it as is; FLASH_ATTN_MLA's 16 divides it
    sets = [
        f"gpu={gpu}", "engine_version=0.25.0", "tp=2", "kv_cache_dtype=auto", "mla_layout=default",
        "attention_backend=default", "page_size=default", "speculative_num_draft_tokens=0", "kv_cache_memory=40GiB",
    ]  # fmt: skip
    p = plan_pool(load_model("kimi-linear-48b-a3b"), load_deployment("glm-5.3-8xh200-vllm", sets))
    assert p.knob("attention_backend").value == backend
    assert (p.extras["state_bytes"], p.extras["block_size"]) == (1_085_440, 960)
    assert p.knob("page_size").origin.startswith(
        "default: vLLM HybridAttentionMambaModelConfig.verify_and_update_config: 64 × cdiv(mamba page 1,085,440 B, 64"
        " × 1,152 B a token) = 960 tokens"
    )


def test_mtp_in_mode_none(tmp_path: Path) -> None:
    # vLLM 0.25.0 ('none'): 1 + num_speculative_blocks a GDN group; 2 draft tokens: state 282,624 B (conv 5 columns),
    # 16 × cdiv(282,624, 16,384) = 16 × 18 = 288; 13 attention layers, 1 + 3 groups; cdiv(262,144, 288) = 911 +
    # 3 × (1 + 2) = 920
    p = _plan(tmp_path, engine_version="0.25.0", speculative_num_draft_tokens=2)
    assert (p.extras["block_size"], p.extras["blocks_per_request"]) == (288, 920)
    assert any(
        "a request takes 3 state blocks per Gated DeltaNet state group in mamba_cache_mode 'none' (1 + 2 speculative;"
        " prefix caching off: the default for hybrids before vLLM 0.26)" in n
        for n in p.notes
    )


@pytest.mark.parametrize(("gpu", "said"), [("b200", True), ("rtx-pro-6000", True), ("h200", False)])
def test_the_cuda_13_assumption_is_said_on_sm10x(tmp_path: Path, gpu: str, said: bool) -> None:
    # qwen_gdn_linear_attn._resolve_gdn_prefill_backend: on SM10x (B200, SM 10.0) FlashInfer's GDN prefill, and so
    # the checkpoint block, needs a CUDA 13 runtime (assumed, and said); on SM90 (H200) FlashInfer is taken
    # whatever the runtime: nothing to assume; SM12x (RTX PRO 6000, SM 12.0) with head_k_dim 128 as SM10x
    notes = _plan(tmp_path, gpu=gpu).notes
    assert (
        any(
            n.startswith("vLLM picks the FlashInfer GDN prefill (one checkpoint block a group) on SM10x") for n in notes
        )
        is said
    )


# ---- every mutant of the module (--sample 0): the Blackwell head-256 alignment where 31 and 32 part, head 64


def test_blackwell_head256_alignment_at_tp1(tmp_path: Path) -> None:
    # tp 1, bf16: GDN state 3 × 8,192 × 2 + 32 × 128 × 128 × 2 = 1,097,728 B; row 2 kv heads × (256 + 256) × 2 B
    # = 2,048 B. SM10x, head_size 256, FlashInfer, 0.25.0 (flashinfer#1993): align 32 -> 32 × cdiv(1,097,728,
    # 65,536) = 32 × 17 = 544 tokens (an alignment of 31 would give 31 × 18 = 558, 560 in 16-token kernel blocks)
    p = plan(_qwen3_next(tmp_path), tp=1, context_length=262_144, weights_per_gpu="40GiB", engine_version="0.25.0",
             gpu="b200")  # fmt: skip
    assert p.extras["block_size"] == 544


def test_the_blackwell_alignment_is_for_head_size_256_only(tmp_path: Path) -> None:
    # the same Qwen3-Next shape with head_dim 64 at tp 4: row 1 kv head × (64 + 64) × 2 B = 256 B; the 32 rule
    # (head_size 256 only) does not apply: 16 × cdiv(274,432, 16 × 256) = 16 × 67 = 1,072 (32 would give 1,088)
    cfg = json.loads(Path(_qwen3_next(tmp_path), "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "head_dim": 64}))
    p = plan(str(tmp_path), tp=4, context_length=262_144, weights_per_gpu="40GiB", engine_version="0.25.0",
             gpu="b200")  # fmt: skip
    assert p.extras["block_size"] == 1_072


@pytest.mark.parametrize(("version", "said"), [("0.32.0", "(2 + 0 prefill checkpoint"), ("0.33.0", "(2 + 1 prefill")])
def test_the_align_note_counts_the_checkpoint_block(tmp_path: Path, version: str, said: str) -> None:
    # MambaSpec.max_memory_usage_bytes in 'align' mode: 2 + checkpoint pages; the GDN checkpoint block from 0.33.0
    notes = _plan(tmp_path, engine_version=version, gpu="h200").notes
    assert any(f"in mamba_cache_mode 'align' {said}" in n for n in notes)


def test_the_padding_note_reads_the_percentage(tmp_path: Path) -> None:
    # _align_hybrid_block_size: "Padding mamba page size by %.2f%%": 0.33.0 on an H200, block 320 × 1,024 B =
    # 327,680 B a page over a 274,432-B state: 100 × 53,248 / 274,432 = 19.40 %
    notes = _plan(tmp_path, engine_version="0.33.0", gpu="h200").notes
    assert any("Padding mamba page size by 19.40% (state 274,432 B -> page 327,680 B)" in n for n in notes)
