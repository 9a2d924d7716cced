"""Survivors of the sampled mutation check (scripts/mutate.py, issue 26) on kvplan/plan/lock_check.py, seed 1590.

Each test puts an entry at the boundary of one relation kvplan.plan.gate.figures builds into a lock entry. The
base entry is the one `kvplan lock tests/data/gate/base.yaml` writes (GLM-5.3 on 8×H200, SGLang 0.5.23, dcp 2,
fp8 KV), whose figures tests/cli/test_gate.py derives from SGLang's calculate_pool_sizes: 639,104 rows a GPU,
whole pages of 64 (SGLang `// page_size * page_size`), so 9,986 pages; pool_tokens = rows × dcp = 1,278,208
(model_runner.py logical_max_total_num_tokens); a row is 78 MLA layers × 576 B (fp8 kv_lora_rank 512 + rope 64)
= 44,928 B plus the indexer's 5,544 B.
"""

from __future__ import annotations

from typing import Any

import pytest

from kvplan.errors import InputError
from kvplan.plan.lock_check import check_engine, check_invariants

BASE: dict[str, Any] = {
    "available_bytes": 32_259_822_321,
    "cell_bytes": 50_472,
    "concurrency": {"1048576": 1, "131072": 9},
    "dcp": 2,
    "draft_bytes_per_row": 0,
    "engine": "sglang 0.5.23",
    "engine_starts": True,
    "indexer_bytes_per_row": 5_544,
    "indexer_layers": 21,
    "largest_admitted_ctx": 1_048_576,
    "logical_page_tokens": 128,
    "main_bytes_per_row": 44_928,
    "max_running_requests": 2048,
    "mla_layout": "fp8",
    "model": "glm-5.3",
    "pool_rows_per_gpu": 639_104,
    "pool_tokens": 1_278_208,
    "rank_page_tokens": 64,
    "usable_pages": 9_986,
    "workspace_left_bytes": 2_524_249_624,
}


def _entry(**fields: Any) -> dict[str, Any]:
    return {**BASE, **fields}


def _refused(entry: dict[str, Any]) -> str:
    with pytest.raises(InputError) as e:
        check_invariants(entry, "configs.prod.yaml")
    return str(e.value)


def test_the_base_entry_holds_every_relation() -> None:
    check_invariants(_entry(), "configs.prod.yaml")


def test_a_version_error_names_the_default_version() -> None:
    # the example is the engine's default version, the first of ENGINES (SGLang 0.5.23, shared/reference)
    with pytest.raises(InputError, match=r"\(e\.g\. sglang 0\.5\.23\)"):
        check_engine("sglang five", "configs.prod.yaml.engine")


def test_a_draft_row_is_part_of_the_cell() -> None:
    # an MTP draft model's row is its own pool row beside the target's (SGLang's draft worker builds its own
    # KV pool; CellBytes.total_bytes adds it): one nextn MLA layer of 576 B + its indexer 264 B = 840 B, so the
    # cell is 50,472 + 840 = 51,312 B
    check_invariants(_entry(draft_bytes_per_row=840, cell_bytes=51_312), "configs.prod.yaml")
    msg = _refused(_entry(draft_bytes_per_row=840, cell_bytes=50_472))
    assert "cell_bytes: 50,472, but main_bytes_per_row + indexer_bytes_per_row + draft_bytes_per_row is 51,312" in msg


def test_one_page_more_than_the_rows_hold_is_refused() -> None:
    # 639,104 rows are exactly 9,986 pages of 64; 9,987 pages would be 639,168 rows, 64 more than the pool has
    msg = _refused(_entry(usable_pages=9_987))
    assert "usable_pages: 9,987 pages of 64 tokens are more than pool_rows_per_gpu (639,104)" in msg


def test_a_started_engine_with_one_running_request_is_kept() -> None:
    # --max-running-requests 1 is a valid start (both engines take any max_num_seqs >= 1); 0 is not a start
    check_invariants(_entry(max_running_requests=1), "configs.prod.yaml")
    msg = _refused(_entry(available_bytes=0))
    assert "available_bytes: 0 is under 1, but engine_starts is true" in msg


def test_a_context_of_the_whole_pool_is_admitted() -> None:
    # one request may take every slot of the pool: largest_admitted_ctx == pool_tokens is kvplan's own figure
    # for a model whose context is the pool's size; one token more is refused with the pool's size
    check_invariants(_entry(largest_admitted_ctx=1_278_208), "configs.prod.yaml")
    msg = _refused(_entry(largest_admitted_ctx=1_278_209))
    assert "largest_admitted_ctx: 1,278,209 is over pool_tokens (1,278,208)" in msg


def test_a_refused_start_admits_nothing() -> None:
    # an engine that does not start serves no request: the entry's largest context is 0, and 1 is a forgery
    refused = {"engine_starts": False, "concurrency": {"131072": 0}}
    check_invariants(_entry(largest_admitted_ctx=0, **refused), "configs.prod.yaml")
    msg = _refused(_entry(largest_admitted_ctx=1, **refused))
    assert "largest_admitted_ctx: 1 but engine_starts is false" in msg


def test_a_concurrency_past_the_largest_context_names_both_figures() -> None:
    # a context the plan does not admit cannot hold requests: 1 of 2,097,152 tokens past 1,048,576 is refused
    msg = _refused(_entry(concurrency={"131072": 9, "2097152": 1}))
    assert "concurrency.2097152: 1 requests of 2,097,152 tokens, but largest_admitted_ctx is 1,048,576" in msg
