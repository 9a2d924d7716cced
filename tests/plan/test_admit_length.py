"""The engines' own length rules at their edges (kvplan.lengths), read from the engines' source:

- SGLang (0.5.9 wheel; the same lines in 0.5.23): ``TokenizerManager._validate_one_request`` refuses
  ``input >= context_len`` and ``input + max_new_tokens >= context_len``; ``TpModelWorker.__init__`` sets
  ``max_req_len = min(context_len - 1, max_total_num_tokens - 1)``, ``max_req_input_len = max_req_len - 5``;
  ``validate_input_length`` (managers/utils.py) refuses ``input >= max_req_input_len``;
  ``Scheduler.init_req_max_new_tokens`` cuts ``max_new_tokens`` to ``max_req_len - input - 1``.
- vLLM: ``InputProcessor._validate_prompt_len`` refuses a prompt of ``max_model_len`` tokens or more;
  ``get_max_tokens`` (entrypoints/utils.py) cuts ``max_tokens`` to ``max_model_len - prompt``.
With ``--gen 0``, ``--ctx`` is a context length the engine runs with (help: "Request context length"); with
``--gen G``, ``--ctx`` is the prompt and G tokens are asked for on top, which the engines refuse or cut.
"""

from __future__ import annotations

import pytest

from kvplan.lengths import ContextLimit
from kvplan.plan.admit import Request, admit
from tests.conftest import make_plan

M = 1 << 20
VLLM = "glm-5.3-8xh200-vllm"


def _context_ok(plan: object, ctx: int, gen: int = 0) -> bool:
    a = admit(plan, Request(ctx_tokens=ctx, gen_tokens=gen), remedies=False)  # type: ignore[arg-type]
    return next(c for c in a.checks if c.name == "context length").ok


@pytest.mark.parametrize(
    ("ctx", "gen", "ok"),
    [
        # gen 0: a context length; context_len 1,048,576 is one
        (M, 0, True),
        (M + 1, 0, False),
        # gen 100 on a prompt: input + 100 <= 1,048,574, so the prompt is at most 1,048,474
        (M - 102, 100, True),
        (M - 101, 100, False),
        # gen 1: the prompt must stay under max_req_input_len = (1,048,576 - 1) - 5 = 1,048,570
        (M - 7, 1, True),
        (M - 6, 1, False),
    ],
)
def test_sglang_length_edges(ctx: int, gen: int, ok: bool) -> None:
    plan = make_plan()  # glm-5.3 on SGLang, context_len 1,048,576 (the model's max_position_embeddings)
    assert plan.context_len == M
    assert _context_ok(plan, ctx, gen) is ok


@pytest.mark.parametrize(
    ("ctx", "gen", "ok"),
    [
        # gen 0: a request reaching 524,288 tokens is a prompt of 524,287 and its one token: served
        (524_288, 0, True),
        (524_289, 0, False),
        # gen 10: max_tokens is cut to 524,288 - prompt, so the prompt is at most 524,278
        (524_278, 10, True),
        (524_279, 10, False),
    ],
)
def test_vllm_length_edges(ctx: int, gen: int, ok: bool) -> None:
    plan = make_plan(VLLM)
    assert plan.context_len == 524_288
    assert _context_ok(plan, ctx, gen) is ok


def test_largest_ctx_with_gen_takes_the_pool_term_of_max_req_len() -> None:
    # the default pool holds 567,616 tokens (test_admit.test_default_1m_rejected_on_pool_pages), under
    # context_len: max_req_len = 567,616 - 1, so a prompt with 10 generated has input + 10 <= 567,614
    assert admit(make_plan(), Request(ctx_tokens=M, gen_tokens=10), remedies=False).largest_ctx == 567_604
    # gen 1: the prompt stays under max_req_input_len = 567,615 - 5, so at most 567,609
    assert admit(make_plan(), Request(ctx_tokens=M, gen_tokens=1), remedies=False).largest_ctx == 567_609
    # gen 0: the pool's whole 567,616 as a context length
    assert admit(make_plan(), Request(ctx_tokens=M), remedies=False).largest_ctx == 567_616


def test_vllm_largest_ctx_is_max_model_len() -> None:
    # dcp 8 holds more than 524,288 tokens, so the context binds: max_model_len itself (gen 0), and a prompt with
    # 10 generated is at most 524,278
    plan = make_plan(VLLM, dcp=8)
    assert plan.usable_tokens > 524_288
    assert admit(plan, Request(ctx_tokens=1000), remedies=False).largest_ctx == 524_288
    assert admit(plan, Request(ctx_tokens=1000, gen_tokens=10), remedies=False).largest_ctx == 524_278


def test_over_the_context_and_the_pool_the_context_change_comes_first() -> None:
    # a prompt of 1M with 100 tokens asked for: context_len must be 1,048,576 + 102, past the model's 1,048,576
    # positions, so SGLang needs SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN; and the pool needs a larger layout
    a = admit(make_plan(), Request(ctx_tokens=M, gen_tokens=100))
    assert a.remedies
    for r in a.remedies:
        assert ("context_length", M + 102) in r.also and ("allow_long_context", True) in r.also


def test_limit_round_trip() -> None:
    # needs() and longest() are inverse at the edge, for both engines and several outputs
    for engine in ("sglang", "vllm"):
        limit = ContextLimit(engine, 10_000)
        for gen in (0, 1, 4, 5, 6, 300):
            assert limit.needs(limit.longest(gen), gen) == 10_000
            assert limit.needs(limit.longest(gen) + 1, gen) == 10_001


def test_longest_is_zero_when_nothing_fits() -> None:
    # gen 10 on SGLang needs input + 12 (max_new_tokens cut at context_len - 2 - input): a 4-token context serves
    # no prompt at all, not a prompt of 1
    assert ContextLimit("sglang", 4).longest(10) == 0
    assert ContextLimit("vllm", 4).longest(10) == 0


def test_the_words_carry_each_engines_rule() -> None:
    # SGLang: refused at input >= max_req_input_len = (4,096 - 1) - 5 = 4,090; vLLM: a prompt of max_model_len
    sg, vl = ContextLimit("sglang", 4096), ContextLimit("vllm", 4096)
    assert "an input of 4,090 or more" in sg.describe() and "SGLang context_len" in sg.describe()
    assert "a prompt of 4,096 tokens or more" in vl.describe() and "vLLM max_model_len" in vl.describe()
    assert "2 tokens short" in sg.rule(0) and "short" not in vl.rule(0)
    assert "context_len - 7" in sg.rule(5) and "max_model_len" in vl.rule(5) and "context_len" not in vl.rule(5)
