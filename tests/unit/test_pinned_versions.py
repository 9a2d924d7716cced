"""Survivors of the sampled mutation check (scripts/mutate.py, issue 26) on kvplan/engines/versions.py, each pinned by
a figure derived from SGLang's server_args (``_handle_gpu_memory_settings``) of the release its row models."""

from __future__ import annotations

import pytest

from tests.unit.test_engine_versions_sglang import LLAMA, _plan


@pytest.mark.parametrize(
    ("version", "reserved"),
    [
        # 0.4.8-0.5.2 (sgl-project/sglang#7054): H200 (< 160 GiB) at tp 8 reserves (12 + 8 / 2) × 1,024 = 16,384 MiB
        ("0.4.8", 16_384),
        # 0.5.3 (#10975): 512 + chunk 8,192 × 1.5 + max_bs 512 × 2 + tp 8 × pp 1 / 8 × 1,024 = 14,848 MiB
        ("0.5.3", 14_848),
    ],
)
def test_a_speculative_algorithm_reserves_2048_mib_more(version: str, reserved: int) -> None:
    # both releases: `if self.speculative_algorithm is not None: reserved_mem += 2 * 1024` (EAGLE / MTP)
    plain = _plan(LLAMA, version, "h200", tp=8)
    spec = _plan(LLAMA, version, "h200", "speculative_num_draft_tokens=4", tp=8)
    assert plain.extras["mem_fraction_reserved_mib"] == reserved
    assert spec.extras["mem_fraction_reserved_mib"] == reserved + 2_048
