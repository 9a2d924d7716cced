"""Requests the engine refuses, or cuts, for their length, before the scheduler sees them.

A request of ``ctx`` and ``gen`` tokens (kvplan admit --ctx --gen): with ``gen`` 0, ``ctx`` is a context length
the engine must run with (a request reaching it: vLLM serves a prompt of ctx - 1 and one token; SGLang cuts the
output 2 tokens short of it); with ``gen`` > 0, a prompt of ``ctx`` and ``gen`` tokens asked for, which the
engines refuse or cut by the rules at ``SGLANG_INPUT_MARGIN`` (SGLang 0.5.9 / 0.5.23) and
``ContextLimit.refuses`` (vLLM 0.33.0).
"""

from __future__ import annotations

from kvplan import record

# SGLang 0.5.9 / 0.5.23, ``TokenizerManager._validate_one_request`` (managers/tokenizer_manager.py): the input is
# refused when ``input_len >= context_len``, and the request when ``input_len + max_new_tokens >= context_len``
# (no auto-truncation: ``--allow-auto-truncate`` is off by default). ``TpModelWorker`` (managers/tp_worker.py)
# sets ``max_req_len = min(context_len - 1, pool - 1)`` and ``max_req_input_len = max_req_len - 5``; the scheduler
# refuses ``input_len >= max_req_input_len`` (``validate_input_length``, managers/utils.py) and cuts
# ``max_new_tokens`` to ``max_req_len - input_len - 1`` (``Scheduler.init_req_max_new_tokens``).
SGLANG_INPUT_MARGIN = 7
"""input <= context_len - 7: refused at ``input >= max_req_input_len = (context_len - 1) - 5``."""
SGLANG_OUTPUT_MARGIN = 2
"""input + output <= context_len - 2: ``max_new_tokens`` is cut to ``(context_len - 1) - input - 1``."""


@record
class ContextLimit:
    """The context length a deployment's engine runs with (SGLang context_len, vLLM max_model_len)."""

    engine: str
    """'sglang' or 'vllm'."""
    context_tokens: int

    def refuses(self, input_tokens: int, output_tokens: int) -> bool:
        if self.engine == "sglang":
            # the tokenizer's check (it covers input >= context_len), then the scheduler's max_req_input_len
            return (
                input_tokens + output_tokens >= self.context_tokens
                or input_tokens >= self.context_tokens - SGLANG_INPUT_MARGIN + 1
            )
        # vLLM 0.33.0, ``InputProcessor._validate_prompt_len`` (v1/engine/input_processor.py): a prompt of
        # ``max_model_len`` tokens or more is refused (a generate runner needs one output token); the OpenAI server cuts
        # ``max_tokens`` to ``max_model_len - prompt_len`` (``get_max_tokens``, entrypoints/utils.py).
        return input_tokens >= self.context_tokens

    def output_tokens(self, input_tokens: int, output_tokens: int) -> int:
        """The output the engine generates for an admitted request: vLLM caps it at the context left, SGLang's
        scheduler at max_req_len - input - 1 = context_len - 2 - input."""
        if self.engine == "vllm":
            return min(output_tokens, self.context_tokens - input_tokens)
        return min(output_tokens, self.context_tokens - SGLANG_OUTPUT_MARGIN - input_tokens)

    def needs(self, ctx_tokens: int, gen_tokens: int) -> int:
        """The shortest context length with which the engine serves the request as asked."""
        if self.engine == "vllm" or gen_tokens == 0:
            return ctx_tokens + gen_tokens
        return ctx_tokens + max(gen_tokens + SGLANG_OUTPUT_MARGIN, SGLANG_INPUT_MARGIN)

    def longest(self, gen_tokens: int) -> int:
        """The longest ``ctx`` served whole with ``gen`` output tokens."""
        return max(self.context_tokens - self.needs(0, gen_tokens), 0)

    def rule(self, gen_tokens: int) -> str:
        """The engine's rule in a few words, for a check's detail."""
        if gen_tokens == 0:
            cut = "; SGLang cuts the output 2 tokens short of it" if self.engine == "sglang" else ""
            return f"ctx against --context-length / max_model_len{cut}"
        if self.engine == "sglang":
            return (
                "SGLang serves prompt + output <= context_len - 2 and a prompt <= context_len - 7 "
                "(max_req_len = context_len - 1, max_req_input_len = max_req_len - 5)"
            )
        return "vLLM serves prompt + output <= max_model_len"

    def describe(self) -> str:
        n = f"{self.context_tokens:,}"
        if self.engine == "sglang":
            return (
                f"{n} tokens (SGLang context_len): a request with input + output >= {n}, or an input of "
                f"{self.context_tokens - SGLANG_INPUT_MARGIN + 1:,} or more, is rejected before it reaches the pool"
            )
        return (
            f"{n} tokens (vLLM max_model_len): a prompt of {n} tokens or more is rejected before it reaches the "
            "pool; a longer output is cut to the context left"
        )
