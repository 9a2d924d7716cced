"""The vLLM sizers ask a cache kind what it is (``spec``, ``row_bytes``, ``Layer.window`` / ``state`` / ``indexer`` /
``compressed`` / ``paged_attention``) instead of testing its class: a new kind is a new kind in kvplan.models.cache,
not a branch in every sizer (DESIGN §2.1)."""

from __future__ import annotations

import ast
from pathlib import Path

from kvplan.models.cache import CompressedAttention, FullAttention, IndexerK, LinearState, MlaLatent, SlidingWindow
from kvplan.models.formats import MlaLayout

ENGINES = Path(__file__).resolve().parents[2] / "kvplan" / "engines"
KINDS = {"FullAttention", "MlaLatent", "IndexerK", "SlidingWindow", "LinearState", "CompressedAttention"}
ALLOWED = {("vllm_knobs.py", "per_layer_bytes")}
"""A type narrowing for mypy on DeciLM's per-layer kv heads (a full-attention model by construction)."""


def _kind_checks(path: Path) -> list[tuple[str, str]]:
    found = []
    for fn in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(fn, ast.FunctionDef):
            continue
        for node in ast.walk(fn):
            names = set()
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance":
                names = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "type":
                names = {"type()"}
            if names & (KINDS | {"type()"}):
                found.append((path.name, fn.name))
    return found


def test_no_vllm_sizer_tests_a_cache_kinds_class() -> None:
    found = [f for p in sorted(ENGINES.glob("vllm*.py")) for f in _kind_checks(p)]
    assert [f for f in found if f not in ALLOWED] == []


def test_each_kind_names_its_spec_family() -> None:
    # vLLM v1/kv_cache_interface.py: FullAttentionSpec, MLAAttentionSpec, SlidingWindowSpec, MambaSpec; the
    # indexer's and DeepSeek-V4's specs of their own. A SlidingWindow is a FullAttention subclass with its own spec.
    kinds = (FullAttention(8, 128, 128), MlaLatent(512, 64), SlidingWindow(8, 64, 64, window=128),
             LinearState("kda", 32, 32, 128, 128, 4), IndexerK(128), CompressedAttention(512, 64, 128, 4))  # fmt: skip
    assert [k.spec for k in kinds] == ["full", "mla", "window", "state", "indexer", "compressed"]


def test_row_bytes_is_the_kinds_own_page_row() -> None:
    # FullAttentionSpec: max(1, 8 // 8) kv heads × (128 + 128) × 2 B = 512; MLA fp8_ds_mla: 512 + 512 / 128 × 4 +
    # 64 × 2 = 656 (DESIGN §2.2)
    assert FullAttention(8, 128, 128).row_bytes(8, "bf16", None) == 512
    assert MlaLatent(512, 64).row_bytes(8, "fp8", MlaLayout.FP8_DS_MLA) == 656
