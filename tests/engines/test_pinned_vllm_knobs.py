"""kvplan/engines/vllm_knobs.py pinned (mutation check seed 8280: 11 survivors of 30).

- Async scheduling on by default from vLLM 0.14.0 (vllm-project/vllm#27614; the release as
  deepjavalibrary/djl#3833 reports it), off before unless --async-scheduling.
- ``VllmConfig.max_concurrent_batches`` (vllm/config/vllm.py): 2 with async scheduling at pipeline parallel 1,
  else ``parallel_config.pipeline_parallel_size``.
- ``--max-model-len -1`` (``_auto_fit_max_model_len``): the derived length when it fits, else the longest that
  does; kvplan's words carry the memory checked, in GiB (2^30) to two decimals.
"""

from __future__ import annotations

from kvplan.engines.vllm_knobs import async_scheduling, auto_fit, max_concurrent_batches
from kvplan.models.deployment import load_deployment

VLLM = "glm-5.3-8xh200-vllm"


def test_async_scheduling_is_on_by_default_from_0_14_0() -> None:
    assert async_scheduling(load_deployment(VLLM, ("engine_version=0.14.0",))).value is True
    assert async_scheduling(load_deployment(VLLM, ("engine_version=0.13.0",))).value is False


def test_max_concurrent_batches_is_the_pipeline_depth_without_async_overlap() -> None:
    assert max_concurrent_batches(load_deployment(VLLM, ("engine_version=0.14.0",))) == 2  # async, pp 1
    assert max_concurrent_batches(load_deployment(VLLM, ("engine_version=0.13.0",))) == 1  # sync, pp 1
    four = load_deployment(VLLM, ("engine_version=0.13.0", "pp=4", "tp=2"))
    assert four.pp == 4 and max_concurrent_batches(four) == 4  # pipeline_parallel_size


GIB = 2**30
CHECKED = 1_328_218_636  # 1.237 GiB (1,328,218,636 / 2^30 = 1.2370000...), shown as 1.24


def test_auto_fit_says_which_length_and_the_memory_it_checked() -> None:
    assert __import__("pytest").approx(1.237, abs=1e-9) == CHECKED / GIB
    whole = auto_fit(131_072, 200_000, CHECKED)
    assert whole.max_model_len == 131_072 and whole.error is None
    assert (
        whole.knob.origin
        == "default: auto-fit (max_model_len -1): full model context length 131,072 fits in 1.24 GiB GPU"
    )
    cut = auto_fit(131_072, 65_536, CHECKED)
    assert cut.max_model_len == 65_536
    assert (
        cut.knob.origin == "default: auto-fit (max_model_len -1): reduced from 131,072 to 65,536 to fit in 1.24 GiB GPU"
    )
    none = auto_fit(131_072, 0, CHECKED)
    assert none.error is not None and "(1.24 GiB GPU)" in none.error


def test_auto_fit_of_a_single_token_starts() -> None:
    # vllm/v1/core/kv_cache_utils.py _auto_fit_max_model_len: only auto_fit_max <= 0 raises "Cannot auto-fit
    # max_model_len"; one token that fits is "reduced from 131,072 to 1", and vLLM starts
    one = auto_fit(131_072, 1, CHECKED)
    assert (one.max_model_len, one.error) == (1, None)
    assert one.knob.origin.endswith("reduced from 131,072 to 1 to fit in 1.24 GiB GPU")
