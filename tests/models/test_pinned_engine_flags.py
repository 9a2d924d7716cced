"""The engines' flag tables (kvplan/models/engine_flags.py), pinned where the mutation check moves them: which rows a
version's parser has (a row is in force from its ``since`` release on and before its ``until``), what ``--set``
takes as an engine spelling, argparse's prefix matching, and the "did you mean" words.

Versions compare by release numbers only: SGLang and vLLM tag ``v0.5.9`` and publish ``0.5.9``, ``0.10`` is 0.10.0,
a ``.post1`` or ``rc1`` suffix does not move the release. SGLang ``server_args.py``: ``--dcp-size`` from 0.5.10, the
``--dsa-*-backend`` flags from 0.5.23 (before: ``--nsa-*``); vLLM ``arg_utils.py``: ``--attention-backend`` from
0.12.0 (before: the ``VLLM_ATTENTION_BACKEND`` variable), ``--speculative-config`` from 0.10.1.
"""

from __future__ import annotations

import pytest

from kvplan.models import engine_flags as ef
from kvplan.models.deploy import KNOBS


@pytest.mark.parametrize(
    ("version", "release"),
    [("0.5.9", (0, 5, 9)), ("v0.5.9", (0, 5, 9)), ("0.10", (0, 10, 0)), ("1", (1, 0, 0)),
     ("0.5.9.post1", (0, 5, 9)), ("0.5.10rc1", (0, 5, 10)), ("0.5.9.1", (0, 5, 9)), ("dev", (0, 0, 0))],
)  # fmt: skip
def test_a_version_is_its_first_three_release_numbers(version: str, release: tuple[int, int, int]) -> None:
    assert ef._release(version) == release


def _spellings(engine: str, version: str) -> set[str]:
    return {row.spelling for row in ef.flags_for(engine, version)}


def test_a_row_is_in_force_from_its_since_release() -> None:
    assert "--dcp-size" in _spellings("sglang", "0.5.10") and "--dcp-size" not in _spellings("sglang", "0.5.9")
    assert "--speculative-config" in _spellings("vllm", "0.10.1")
    assert "--speculative-config" not in _spellings("vllm", "0.10")


def test_a_row_is_out_of_force_from_its_until_release() -> None:
    at, before = _spellings("vllm", "0.12.0"), _spellings("vllm", "0.11.2")
    assert "--attention-backend" in at and "VLLM_ATTENTION_BACKEND" not in at
    assert "VLLM_ATTENTION_BACKEND" in before and "--attention-backend" not in before
    new, old = _spellings("sglang", "0.5.23"), _spellings("sglang", "0.5.22")
    assert "--dsa-decode-backend" in new and "--nsa-decode-backend" not in new
    assert "--nsa-decode-backend" in old and "--dsa-decode-backend" not in old


def test_set_takes_engine_spellings_of_values_only() -> None:
    s = ef.spellings()
    assert s["tensor_parallel_size"] == "tp" and s["max_num_seqs"] == "max_running_requests"
    assert s["dcp"] == "dcp"  # vLLM's -dcp: three letters, a name
    assert "tp" not in s and "q" not in s  # -tp, -q: short options
    assert "vllm_attention_backend" not in s  # an environment variable
    assert "nsa_decode_backend" not in s  # half of a compound knob
    assert "speculative_config" not in s and "enable_expert_parallel" not in s  # JSON, a switch


def test_a_prefix_of_four_or_more_characters_naming_one_flag() -> None:
    assert ef.knob_for_prefix("mem-") == "mem_fraction_static"  # four characters, one flag
    assert ef.knob_for_prefix("mem-frac") == "mem_fraction_static"
    assert ef.knob_for_prefix("mem") is None  # three: too short to be taken as a name
    assert ef.knob_for_prefix("max-num") is None  # max_num_seqs and max_num_batched_tokens: ambiguous
    assert ef.knob_for_prefix("zzzz") is None


def test_whose_flag() -> None:
    assert ef.spelled_by("tp_size") == "SGLang's"
    assert ef.spelled_by("max_model_len") == "vLLM's"
    assert ef.spelled_by("kv_cache_dtype") == "SGLang's and vLLM's"
    assert ef.spelled_by("nothing_at_all") == ""


@pytest.mark.parametrize(
    ("key", "said"),
    [
        ("dcpp", " (did you mean 'dcp'?)"),
        ("max_num_seqz", " (did you mean 'max_running_requests', vLLM's --max-num-seqs?)"),
        ("tensor_parallel_sizee", " (did you mean 'tp', SGLang's and vLLM's --tensor-parallel-size?)"),
        ("zzzzzz", ""),
    ],
)
def test_the_nearest_knob_or_flag(key: str, said: str) -> None:
    assert ef.nearest_knob(key, KNOBS) == said
