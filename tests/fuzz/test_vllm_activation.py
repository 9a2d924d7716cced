"""Fuzz the vLLM profile model's inputs: any config mapping gives dims or None, never an exception; any dims and
deployment give non-negative terms whose torch peak is at least the sampler side (the peak's own definition)."""

from __future__ import annotations

from hypothesis import assume, given
from hypothesis import strategies as st

from kvplan.engines.vllm_profile import CUBLAS_WORKSPACE_BYTES, profile_peak
from kvplan.models.activation import activation_dims
from kvplan.models.deployment import load_deployment

KEYS = ("hidden_size", "vocab_size", "intermediate_size", "moe_intermediate_size", "num_local_experts",
        "n_routed_experts", "num_experts", "num_experts_per_tok", "n_shared_experts", "first_k_dense_replace",
        "shared_expert_intermediate_size", "torch_dtype", "dtype")  # fmt: skip
VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70), st.floats(allow_nan=True),
    st.text(max_size=8), st.lists(st.integers(), max_size=2), st.sampled_from(["float32", "bfloat16", "float16"]),
)  # fmt: skip
GPU = load_deployment(None, ["engine=vllm", "gpu=h100"]).gpu
SIZES = st.fixed_dictionaries({"hidden_size": st.integers(1, 1 << 16), "vocab_size": st.integers(1, 1 << 18)})
"""A config with both sizes: without them most fuzzed mappings give None and the checks below would not run."""


@given(st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=len(KEYS)), st.one_of(st.just({}), SIZES))
def test_any_config_gives_dims_or_none(fuzzed: dict[str, object], sizes: dict[str, int]) -> None:
    config = {**fuzzed, **sizes}
    dims = activation_dims(config)
    assume(dims is not None)  # dims to check (hypothesis fails if no config gives any)
    assert dims is not None and dims.hidden_size > 0 and dims.vocab_size > 0
    assert min(dims.dense_intermediate, dims.expert_intermediate, dims.experts_per_token) >= 0
    assert dims.dtype_bytes in (2, 4)


@given(
    st.builds(
        lambda d, sizes: {**d, **sizes},
        st.dictionaries(st.sampled_from(KEYS), st.integers(min_value=0, max_value=1 << 20), max_size=len(KEYS)),
        SIZES,
    ),
    st.integers(min_value=1, max_value=64),
    st.integers(min_value=1, max_value=64),
    st.integers(min_value=1, max_value=1 << 17),
    st.integers(min_value=1, max_value=4096),
    st.tuples(st.integers(0, 1), st.integers(0, 40), st.integers(0, 9)),
)
def test_profile_terms_are_non_negative(
    config: dict[str, object], tp: int, ep: int, tokens: int, seqs: int, version: tuple[int, int, int]
) -> None:
    dims = activation_dims(config)
    assume(dims is not None)  # a profile to check (hypothesis fails if no config gives dims)
    assert dims is not None
    p = profile_peak(dims, gpu=GPU, tp=tp, ep=ep, max_num_batched_tokens=tokens, max_num_seqs=seqs, version=version)
    assert min(p.sampler_bytes, p.topk_topp_buffer_bytes, p.hidden_kept_bytes, p.forward_bytes) >= 0
    assert p.moe_workspace_bytes >= 0 and p.non_torch_bytes > 0
    assert p.torch_peak_bytes >= p.sampler_side_bytes + CUBLAS_WORKSPACE_BYTES
    assert p.requests == min(tokens, seqs) and "\n" not in p.summary()
