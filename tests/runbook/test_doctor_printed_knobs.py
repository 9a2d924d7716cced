"""Issue 24 item 8: read every knob the log prints before fitting one.

A property over every corpus log with a configuration line, planned with the deployment it states
(tests/runbook/test_field_logs.py DOCTOR_CASES): each knob of the list below that the line prints with a value is
known to the doctor -- a knob it reveals, or one it names as printed but not plannable on that deployment -- and no
cause is fitted for a knob the log prints. The list is the issue's own (mem_fraction_static, gpu_memory_utilization,
max_model_len, context_length, kv_cache_dtype, page_size / block_size, tp / dp / ep, chunked prefill size,
max_running_requests / max_num_seqs, cuda_graph_max_bs) and the other ServerArgs / vLLM fields kvplan plans with.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from kvplan.runbook.doctor import diagnose
from kvplan.runbook.parse import Args, parse_log
from tests.runbook.test_field_logs import DOCTOR_CASES, DoctorCase, config_path, text_of

# printed key -> the doctor's knob; values None / 'auto' are the engine's own default, not read
SGLANG_KEYS = {
    "mem_fraction_static": "mem_fraction_static",
    "context_length": "context_length",
    "kv_cache_dtype": "kv_cache_dtype",
    "page_size": "page_size",
    "tp_size": "tp",
    "pp_size": "pp",
    "ep_size": "ep",
    "chunked_prefill_size": "chunked_prefill_size",
    "max_running_requests": "max_running_requests",
    "max_total_tokens": "max_total_tokens",
    "cuda_graph_max_bs": "cuda_graph_max_bs",
    "attention_backend": "attention_backend",  # SGLang ServerArgs: 'triton' on ROCm, 'flashinfer', 'fa3', ...
    "swa_full_tokens_ratio": "swa_full_tokens_ratio",
    "max_mamba_cache_size": "max_mamba_cache_size",
}
VLLM_KEYS = {
    "gpu_memory_utilization": "gpu_memory_utilization",
    "max_model_len": "context_length",
    "kv_cache_dtype": "kv_cache_dtype",
    "block_size": "page_size",
    "tensor_parallel_size": "tp",
    "pipeline_parallel_size": "pp",
    "max_num_seqs": "max_running_requests",
    "max_num_batched_tokens": "max_num_batched_tokens",
    "num_gpu_blocks_override": "num_gpu_blocks_override",
}
DEFAULTS = {"None", "auto", "'auto'", "dsa", "'dsa'", "nsa", "'nsa'", "0", "-1"}


KEY_DEFAULTS = {"swa_full_tokens_ratio": "0.8"}
"""SGLang server_args.py ``swa_full_tokens_ratio: float = 0.8``: printed on every start, the engine's own default."""


def printed_keys(a: Args, keys: dict[str, str]) -> dict[str, str]:
    return {
        k: knob
        for k, knob in keys.items()
        if a.raw(k) is not None and a.raw(k) not in DEFAULTS and a.raw(k) != KEY_DEFAULTS.get(k)
    }


@pytest.mark.parametrize("case", DOCTOR_CASES, ids=lambda c: c.log.removesuffix(".log"))
def test_every_printed_knob_is_known(case: DoctorCase, tmp_path: Path) -> None:
    cfg = config_path(case.model, tmp_path)
    dep = load_deployment(None, (f"model={cfg}", *case.sets))
    d = diagnose(load_model(cfg), dep, parse_log(text_of(case.log), case.log))
    run = d.run
    expected: dict[str, str] = {}
    for at in (run.args, run.cli_args):
        if at is not None:
            expected |= printed_keys(at.value, SGLANG_KEYS if run.engine == "sglang" else VLLM_KEYS)
    known = {r.knob for r in d.revealed}
    for key, knob in expected.items():
        left_out = any(n.startswith(f"the log's {knob} ") and "cannot be planned" in n for n in d.notes)
        assert knob in known or left_out, (case.log, key, knob, sorted(known))
        # a knob the log prints is never fitted (the "0.796 instead of 0.8 -- the log does not print it")
        assert not any(c.fitted and knob in c.change for c in d.causes), (case.log, knob)


def test_glm5_rocm_printed_backend_is_known_where_the_config_cannot_plan_it() -> None:
    # ajith-sirra-amd/Issues GLM-5-FP8-MI355X (SGLang 0.5.9, ROCm): 'Set NSA backends for fp8_e4m3 KV Cache:
    # prefill=flashmla_auto, decode=flashmla_kv' and ServerArgs attention_backend='triton', page_size=1. Against the
    # default deployment (an H200: DSA needs 64-token pages on CUDA) page 1 cannot be planned; the doctor says so
    # and never fits a page or a memory fraction the log prints.
    from tests.runbook.conftest import LOGS, body

    log = LOGS / "doctor-sglang-0.5.9-glm-5-fp8-mi355x-rocm-preload-usage-ajith-sirra-amd-issues.log"
    dep = load_deployment(None, ())
    d = diagnose(load_model(dep.model), dep, parse_log(body(log), log.name))
    assert any(n.startswith("the log's page_size 1 ") and "cannot be planned" in n for n in d.notes)
    assert "mem_fraction_static" in {r.knob for r in d.revealed}
    assert not any(c.fitted for c in d.causes if c.key in ("mem_fraction", "page"))
