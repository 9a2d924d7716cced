"""Survivors of the sampled mutation check (scripts/mutate.py, issue 26) on kvplan/versions.py, each pinned by
a figure derived from SGLang's server_args (``_handle_gpu_memory_settings``) of the release its row models."""

from __future__ import annotations

import pytest

from tests.engines.test_engine_versions_sglang import LLAMA, _plan
from tests.engines.test_vllm_v0 import LLAMA3, v0


@pytest.mark.parametrize(
    ("version", "reserved"),
    [
        # 0.4.8-0.5.2 (sgl-project/sglang#7054): H200 (< 160 GiB) at tp 8 reserves (12 + 8 / 2) × 1,024 = 16,384 MiB
        ("0.4.8", 16_384),
        # 0.5.3 (#10975): 512 + chunk 8,192 × 1.5 + max_bs 512 × 2 + tp 8 × pp 1 / 8 × 1,024 = 14,848 MiB
        ("0.5.3", 14_848),
        # 0.5.7-0.5.8: the same terms (chunk 8,192, max_bs 512 on an H200 at tp 8): 14,848 MiB
        ("0.5.7", 14_848),
    ],
)
def test_a_speculative_algorithm_reserves_2048_mib_more(version: str, reserved: int) -> None:
    # both releases: `if self.speculative_algorithm is not None: reserved_mem += 2 * 1024` (EAGLE / MTP)
    plain = _plan(LLAMA, version, "h200", tp=8)
    spec = _plan(LLAMA, version, "h200", "speculative_num_draft_tokens=4", tp=8)
    assert plain.extras["mem_fraction_reserved_mib"] == reserved
    assert spec.extras["mem_fraction_reserved_mib"] == reserved + 2_048


@pytest.mark.parametrize(("version", "tokens"), [("0.6.4", 512), ("0.7.3", 2048), ("0.8.5", 2048)])
def test_v0_chunked_prefill_batch(version: str, tokens: int) -> None:
    # V0 config.py SchedulerConfig: with chunked prefill (on by default past a 32K max_model_len) and no
    # --max-num-batched-tokens, 512 tokens to 0.6.4, 2048 from 0.6.5 (read in the wheels, kvplan.versions)
    knob = v0(LLAMA3, version, "context_length=131072").knob("max_num_batched_tokens")
    assert knob.value == tokens
