"""Requests the engine refuses for their length: they are answered with an error before the scheduler sees them,
so they never match, never write KV and never hold pages; a replay counts them instead of running them.

- SGLang 0.5.23, ``TokenizerManager._validate_one_request`` (managers/tokenizer_manager.py): the input is refused
  when ``input_len >= context_len``, and the request when ``input_len + max_new_tokens >= context_len`` (a trace's
  output length is the ``max_new_tokens`` its replay sends, as ``bench_serving`` does); no auto-truncation
  (``--allow-auto-truncate`` is off by default). The scheduler then refuses ``input_len >= max_req_input_len`` =
  ``min(context_len - 1, pool - 1) - 5`` (``validate_input_length``, managers/utils.py; the pool term is the
  replay's own "too long for the pool") and cuts ``max_new_tokens`` to ``max_req_len - input_len - 1``.
- vLLM 0.33.0, ``InputProcessor._validate_prompt_len`` (v1/engine/input_processor.py): a prompt longer than
  ``max_model_len`` is refused, and one of exactly ``max_model_len`` too (a generate runner needs one output
  token). The output is not checked: the OpenAI server caps ``max_tokens`` at ``max_model_len - prompt_len``
  (``get_max_tokens``, entrypoints/utils.py), so a long answer is cut, not refused.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from kvplan.sim.result import Refused
from kvplan.sim.trace import Request


@dataclass(frozen=True)
class ContextLimit:
    """The context length a deployment's engine runs with (SGLang context_len, vLLM max_model_len)."""

    engine: str
    """'sglang' or 'vllm'."""
    context_tokens: int

    def refuses(self, input_tokens: int, output_tokens: int) -> bool:
        if self.engine == "sglang":
            # the tokenizer's check (it covers input >= context_len), then the scheduler's max_req_input_len
            return input_tokens + output_tokens >= self.context_tokens or input_tokens >= self.context_tokens - 6
        return input_tokens >= self.context_tokens

    def output_tokens(self, input_tokens: int, output_tokens: int) -> int:
        """The output the engine generates for an admitted request: vLLM caps it at the context left, SGLang's
        scheduler at max_req_len - input - 1 = context_len - 2 - input."""
        if self.engine == "vllm":
            return min(output_tokens, self.context_tokens - input_tokens)
        return min(output_tokens, self.context_tokens - 2 - input_tokens)

    def describe(self) -> str:
        n = f"{self.context_tokens:,}"
        if self.engine == "sglang":
            return (
                f"{n} tokens (SGLang context_len): a request with input + output >= {n}, or an input of "
                f"{self.context_tokens - 6:,} or more, is rejected before it reaches the pool"
            )
        return (
            f"{n} tokens (vLLM max_model_len): a prompt of {n} tokens or more is rejected before it reaches the "
            "pool; a longer output is cut to the context left"
        )


def admitted(requests: Iterable[Request], limit: ContextLimit | None, refused: Refused) -> Iterator[Request]:
    """The requests the engine runs, in trace order (indices kept: the window still counts trace positions);
    each refused one is tallied in ``refused``."""
    if limit is None:
        yield from requests
        return
    for r in requests:
        if limit.refuses(r.input_tokens, r.output_tokens):
            refused.add(r.input_tokens)
            continue
        out = limit.output_tokens(r.input_tokens, r.output_tokens)
        if out != r.output_tokens:
            r = Request(r.index, r.arrival_us, r.input_tokens, out, r.blocks, r.line, r.file)
        yield r
