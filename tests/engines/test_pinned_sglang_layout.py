"""SGLang's kv dtype, MLA layout and page size (kvplan.engines.sglang_layout) at their boundaries (issue 26).

Page sizes: SGLang ``server_args`` ``_mla_backend_page_constraints`` (reference sglang-0.5.23.md, docs/engines.md
"page size"): flashmla -> 64 and cutlass_mla -> 128 whatever is set ("Cutlass MLA only supports a page_size of 128,
change page_size to 128."); trtllm_mla keeps 32 or 64, else 64; trtllm_mha keeps 16, 32 or 64, else 64
("TensorRT-LLM MHA only supports page_size of 16, 32 or 64, changing page_size from {page_size} to 64."); every
other backend keeps the default 1 (``_page_size_default``). DSA on CUDA: 64 × index_kpool (§2.7).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvplan.engines import plan_pool
from kvplan.engines.sglang_layout import page_knob
from kvplan.errors import PlanError
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from tests.conftest import make_plan


def _unset_page(model: str, **changes: object):  # type: ignore[no-untyped-def]
    """The SGLang preset without its page_size, so the engine's default applies."""
    dep = load_deployment("glm-5.3-8xh200-sglang")
    fields = {"page_size": None, "explicit": dep.explicit - {"page_size"}, **changes}
    return plan_pool(load_model(model), replace(dep, **fields))  # type: ignore[arg-type]


def test_cutlass_mla_changes_a_set_page_of_64_to_128() -> None:
    # DeepSeek-V3 (MLA, no indexer) FP8 on B200 with cutlass_mla: 61 layers × 576 B raw fp8 rows = 35,136 B a row;
    # the preset's page_size 64 becomes 128; rows = available // 35,136 // 128 × 128.
    # Before: the set 64 was kept (2,143,168 rows = 33,487 pages of 64); SGLang pages by 128: 2,143,104 rows.
    p = make_plan(model="deepseek-v3", gpu="b200", attention_backend="cutlass_mla")
    assert (p.page_tokens, p.cell.total_bytes) == (128, 35_136)
    assert p.knob("page_size").origin == "set 64; the cutlass_mla backend changes it to 128"
    assert p.rows == p.available_bytes // 35_136 // 128 * 128 == 2_143_104


@pytest.mark.parametrize(
    ("model", "sets", "page"),
    [
        # trtllm_mla keeps 32, changes 16 to 64
        ("deepseek-v3", {"gpu": "b200", "attention_backend": "trtllm_mla", "page_size": 32}, 32),
        ("deepseek-v3", {"gpu": "b200", "attention_backend": "trtllm_mla", "page_size": 16}, 64),
        # flashmla changes 1 to 64
        ("deepseek-v3", {"gpu": "h200", "attention_backend": "flashmla", "page_size": 1}, 64),
        # trtllm_mha keeps 16, changes 128 to 64
        ("llama-3.1-8b", {"gpu": "b200", "tp": 1, "attention_backend": "trtllm_mha", "page_size": 16}, 16),
        ("llama-3.1-8b", {"gpu": "b200", "tp": 1, "attention_backend": "trtllm_mha", "page_size": 128}, 64),
        # fa3 keeps what is set
        ("deepseek-v3", {"gpu": "h200", "attention_backend": "fa3", "page_size": 16}, 16),
    ],
)
def test_a_set_page_the_backend_does_not_take_is_changed(model: str, sets: dict[str, object], page: int) -> None:
    kv = {"kv_cache_dtype": "auto"} if model.startswith("llama") else {}
    assert make_plan(model=model, **sets, **kv).page_tokens == page


def test_default_pages_by_backend() -> None:
    # no page_size given: fa3 keeps SGLang's default 1, flashmla forces 64, cutlass_mla 128; DSA on CUDA 64 × 1
    fa3 = _unset_page("deepseek-v3", attention_backend="fa3")
    assert (fa3.page_tokens, fa3.knob("page_size").origin) == (1, "default: fa3 backend keeps 1")
    flashmla = _unset_page("deepseek-v3", attention_backend="flashmla")
    assert (flashmla.page_tokens, flashmla.knob("page_size").origin) == (64, "default: flashmla backend forces it")
    dsa = _unset_page("glm-5.3")
    assert (dsa.page_tokens, dsa.knob("page_size").origin) == (64, "default: DSA on CUDA: 64 × index_kpool")


def test_dsa_pages_of_64_per_kpool_row() -> None:
    # GLM-5.3-Flash: index_kpool 4 (dsa_indexer_kpool.py "GLM-5-Next requires index_kpool=4"): 64 × 4 = 256
    assert _unset_page("glm-5.3-flash").page_tokens == 256


def test_dsa_refuses_a_page_other_than_64_rows() -> None:
    with pytest.raises(PlanError, match=r"^DSA requires 64-token physical pages, got page_size=128 with index_kpool=1"):
        _unset_page("glm-5.3", page_size=128)


@pytest.mark.parametrize(
    ("model", "gpu", "dtype"),
    [
        # DSA with --kv-cache-dtype auto: fp8_e4m3 from SM 10.0 (major >= 10), bf16 on SM90 and under HIP
        ("glm-5.3", "b200", "fp8_e4m3"),
        ("glm-5.3", "h200", "bfloat16"),
        ("glm-5.3", "mi355x", "bfloat16"),
        # plain MLA (no indexer) stays bf16 on SM100
        ("deepseek-v3", "b200", "bfloat16"),
    ],
)
def test_auto_kv_dtype(model: str, gpu: str, dtype: str) -> None:
    assert make_plan(model=model, gpu=gpu, kv_cache_dtype="auto").knob("kv_cache_dtype").value == dtype


@pytest.mark.parametrize(
    ("backend", "page", "kept"),
    [
        # trtllm_mha keeps 16, 32, 64 and changes 31, 63, 65; trtllm_mla keeps 32 and changes 31, 63, 65
        # (server_args _mla_backend_page_constraints: TRTLLM MLA takes a page_size of 32 or 64, else 64)
        ("trtllm_mha", 32, 32),
        ("trtllm_mha", 31, 64),
        ("trtllm_mha", 63, 64),
        ("trtllm_mha", 65, 64),
        ("trtllm_mla", 32, 32),
        ("trtllm_mla", 31, 64),
        ("trtllm_mla", 63, 64),
        ("trtllm_mla", 65, 64),
        ("cutlass_mla", 64, 128),
    ],
)
def test_the_pages_each_backend_keeps(backend: str, page: int, kept: int) -> None:
    dep = replace(load_deployment("glm-5.3-8xh200-sglang"), page_size=page)
    assert page_knob(load_model("deepseek-v3"), dep, backend).value == kept


def test_auto_kv_dtype_below_sm_10_0_is_bf16() -> None:
    # major >= 10 for fp8: a (custom) SM 9.9 GPU keeps bf16 for DSA
    dep = load_deployment("glm-5.3-8xh200-sglang")
    gpu = replace(dep.gpu, sm=99, name="SM99 GPU")
    p = plan_pool(load_model("glm-5.3"), replace(dep, gpu=gpu, kv_cache_dtype="auto"))
    assert p.knob("kv_cache_dtype").value == "bfloat16"
