"""`kvplan fit --pd`: the transfer backend's GPU buffers beyond the pool, per side (issue 16 item 2).

Read from the engines' source (SGLang 0.5.23 wheel, vLLM 0.33.0 wheel):
- SGLang, mooncake and nixl: ``register_buffer_to_engine`` registers the KV pool (``kv_data_ptrs``) and the aux
  metadata (``aux_data_ptrs``, CPU tensors: disaggregation/utils.py ``MetadataBuffers`` device "cpu"). GPU staging
  only with ``SGLANG_DISAGG_STAGING_BUFFER=1`` (default False, srt/environ.py), refused for MLA
  (disaggregation/prefill.py, decode.py): prefill ``SGLANG_DISAGGREGATION_QUEUE_SIZE`` (4) buffers of
  ``max(1, chunked_prefill_size // page_size) × Σ kv_item_lens`` (common/staging_handler.py
  ``init_staging_buffers``; one item = one page of one K or V layer buffer), decode one ring of
  ``SGLANG_DISAGG_STAGING_POOL_SIZE_MB`` 4096 MiB (``init_staging_allocator``: × 1024 × 1024).
- vLLM NixlConnector, ``kv_buffer_device`` "cuda" by default: ``xfer_buffers = kv_caches`` (nixl/base_worker.py
  ``register_kv_caches``); MooncakeConnector: ``batch_register_memory(kv_data_ptrs)``. Nothing beyond the pool.
"""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.errors import InputError
from kvplan.models.deploy import Requirements
from kvplan.models.from_hf import load_model
from kvplan.models.gpus import find_gpu
from kvplan.plan.fit import FitQuery, candidates, evaluate
from kvplan.plan.fit_pd import SGLANG_STAGING_MLA, fit_pd, pd_setting, pd_staging

K128 = 128 * 1024
runner = CliRunner(env={"KVPLAN_FORMAT": None, "GITHUB_ACTIONS": None, "COLUMNS": "250"})


def _plan(model: str, engine: str, tp: int, dtype: str, **knobs: object):  # type: ignore[no-untyped-def]
    from dataclasses import replace

    arch = load_model(model)
    q = FitQuery(model_ref=model, gpus=(find_gpu("h200"),), engines=(engine,),
                 requirements=Requirements(min_ctx_tokens=K128), max_gpus=8, mtp=(False,))  # fmt: skip
    dep = next(d for d in candidates(arch, q) if d.tp == tp and d.kv_cache_dtype == dtype and d.dcp == 1)
    o = evaluate(arch, replace(dep, **knobs), q.requirements)
    assert o.plan is not None and o.plan.startup_error is None, o.pruned
    return o.plan


def test_sglang_default_registers_the_pool_and_allocates_no_staging() -> None:
    plan = _plan("glm-5.3", "sglang", 8, "fp8_e4m3")
    for side in ("prefill", "decode"):
        for backend in ("mooncake", "nixl", None):
            s = pd_staging(plan, side, backend)
            assert s.bytes == 0
            assert s.text.startswith(f"no staging buffer beyond the pool: SGLang 0.5.23, {backend or 'mooncake'}:")
            assert "kv_data_ptrs" in s.text and "SGLANG_DISAGG_STAGING_BUFFER is off" in s.text


def test_vllm_connectors_register_the_kv_caches() -> None:
    plan = _plan("glm-5.3", "vllm", 8, "fp8")
    nixl = pd_staging(plan, "prefill", None)  # vLLM has no default connector: NixlConnector
    assert nixl.bytes == 0 and "vLLM 0.33.0, NixlConnector" in nixl.text and "register_kv_caches" in nixl.text
    moon = pd_staging(plan, "decode", "mooncake")
    assert moon.bytes == 0 and "MooncakeConnector" in moon.text and "batch_register_memory" in moon.text
    assert pd_setting("vllm", "prefill", "mooncake") == (
        '--kv-transfer-config \'{"kv_connector": "MooncakeConnector", "kv_role": "kv_producer"}\''
    )
    assert (
        pd_setting("sglang", "decode", None)
        == "--disaggregation-mode decode --disaggregation-transfer-backend mooncake"
    )


def test_sglang_staging_buffers_on_a_gqa_model() -> None:
    """Llama-3.1-70B, SGLang, TP2 fp8 on H200: 8 kv heads / 2 = 4 per rank × (128 + 128) dims × 1 B × 80 layers
    = 81,920 B a token (tests/plan/test_fit.py); page 1 token; chunked_prefill_size 8,192 (SGLang's default for
    an H200's memory). Σ kv_item_lens = one page of every K and V buffer = 1 × 81,920 B.
    prefill: 4 buffers × max(1, 8,192 // 1) = 8,192 pages × 81,920 B = 4 × 671,088,640 = 2,684,354,560 B;
    decode: 4,096 × 1,048,576 = 4,294,967,296 B.
    """
    plan = _plan("llama-3.1-70b", "sglang", 2, "fp8_e4m3")
    assert plan.cell.total_bytes == 4 * 256 * 1 * 80 == 81_920
    assert plan.page_tokens == 1 and plan.knob("chunked_prefill_size").as_int() == 8_192
    pre = pd_staging(plan, "prefill", "mooncake", sglang_staging=True)
    assert pre.bytes == 4 * 8_192 * 81_920 == 2_684_354_560
    assert "4 × 671,088,640 B (init_staging_buffers)" in pre.text
    dec = pd_staging(plan, "decode", "nixl", sglang_staging=True)
    assert dec.bytes == 4096 * 1024 * 1024 == 4_294_967_296 and "SGLang 0.5.23, nixl" in dec.text
    # a chunk that is no whole number of pages: SGLang refuses to start (disaggregation/prefill.py)
    odd = _plan("llama-3.1-70b", "sglang", 2, "fp8_e4m3", page_size=16, chunked_prefill_size=1000)
    with pytest.raises(InputError, match="a multiple of page_size 16"):
        pd_staging(odd, "prefill", None, sglang_staging=True)


def test_staging_on_mla_is_refused_with_sglangs_message() -> None:
    arch = load_model("glm-5.3")
    q = FitQuery(model_ref="glm-5.3", gpus=(find_gpu("h200"),), engines=("sglang",),
                 requirements=Requirements(min_ctx_tokens=K128), max_gpus=8, mtp=(False,))  # fmt: skip
    with pytest.raises(InputError) as e:
        fit_pd(arch, q, sglang_staging=True)
    assert SGLANG_STAGING_MLA in str(e.value)
    with pytest.raises(InputError, match="--pd-backend 'ib'"):
        fit_pd(arch, q, backend="ib")
    vq = FitQuery(model_ref="glm-5.3", gpus=(find_gpu("h200"),), engines=("vllm",),
                  requirements=Requirements(min_ctx_tokens=K128), max_gpus=8, mtp=(False,))  # fmt: skip
    with pytest.raises(InputError, match="search --engine sglang"):
        fit_pd(arch, vq, sglang_staging=True)


def test_cli_pd_reports_the_staging_and_bad_options_exit_2() -> None:
    base = ["fit", "--model", "llama-3.1-70b", "--gpu", "h200", "--engine", "sglang", "--max-gpus", "8",
            "--require-concurrency", "8@128K"]  # fmt: skip
    r = runner.invoke(app, [*base, "--pd", "--pd-staging", "--pd-backend", "nixl", "--format", "json"])
    assert r.exit_code == 0, r.output
    import json

    doc = json.loads(r.output)
    assert doc["staging"]["decode"]["bytes_per_gpu"] == 4_294_967_296
    assert doc["staging"]["prefill"]["bytes_per_gpu"] > 0
    for args in (["--pd", "--pd-backend", "ib"], ["--pd-staging"], ["--pd-backend", "nixl"]):
        r = runner.invoke(app, [*base, *args])
        assert r.exit_code == 2 and "kvplan: error:" in r.output and "Traceback" not in r.output, (args, r.output)
    mla = runner.invoke(app, ["fit", "--model", "glm-5.3", "--gpu", "h200", "--engine", "sglang", "--max-gpus", "8",
                              "--require-ctx", "128K", "--pd", "--pd-staging"])  # fmt: skip
    assert mla.exit_code == 2 and "MLA models should not set this flag" in mla.output


def test_sglang_staging_at_a_page_of_64_tokens() -> None:
    """The same Llama-3.1-70B TP2 fp8 rows (81,920 B a token) at page_size 64: init_staging_buffers takes
    max(1, 8,192 // 64) = 128 pages of 64 tokens, 8,192 tokens again, so 4 × 8,192 × 81,920 B = 2,684,354,560 B;
    and a chunk of one token at page 1 is positive and a whole page (SGLang starts): 4 × 1 page × 81,920 B."""
    plan = _plan("llama-3.1-70b", "sglang", 2, "fp8_e4m3", page_size=64)
    assert plan.page_tokens == 64
    pre = pd_staging(plan, "prefill", None, sglang_staging=True)
    assert pre.bytes == 4 * (8_192 // 64) * 64 * 81_920 == 2_684_354_560
    assert "= 128 pages × 64 tokens" in pre.text
    one = _plan("llama-3.1-70b", "sglang", 2, "fp8_e4m3", chunked_prefill_size=1)
    assert pd_staging(one, "prefill", None, sglang_staging=True).bytes == 4 * 1 * 81_920


def test_no_prefill_instance_holds_no_request() -> None:
    # PdFit.prefill_in_flight: nothing admitted on the prefill side (an empty search) holds 0 requests in flight
    from kvplan.plan.fit import Fit
    from kvplan.plan.fit_pd import PdFit

    q = FitQuery(model_ref="llama-3.1-8b", gpus=(find_gpu("h200"),), engines=("sglang",),
                 requirements=Requirements(min_ctx_tokens=K128), max_gpus=8, mtp=(False,))  # fmt: skip
    empty = Fit(query=q, outcomes=(), skipped=0)
    pd = PdFit(prefill=empty, decode=empty, longest_ctx=K128, link="400Gbps")
    assert pd.prefill_in_flight == 0 and pd.hand_off is None and pd.binds is None
