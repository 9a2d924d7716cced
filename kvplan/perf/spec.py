"""Speculative decoding (MTP / EAGLE) in the step model: the acceptance length and where it came from.

A decode step of a speculative deployment drafts, then verifies: each running request runs ``D`` =
``speculative_num_draft_tokens`` tokens through the target model (SGLang's verify width, the chain of
``speculative_num_steps`` drafts plus the root, ``EAGLEWorker.verify``; vLLM V1 schedules 1 + num_spec_tokens tokens a
request, counted against max_num_batched_tokens, ``Scheduler.schedule``) and ``D`` tokens through the draft module
(the draft steps and the draft extend of the accepted tokens), and yields A tokens on average (SGLang's bench prints
it as ``accept length``): the caller's (``--acceptance-length``) or a stated default per model family with its band:

- a model with MTP layers (DeepSeek-V3/R1, GLM-4.5+/5, and the others that ship them): low 1 + 0.85 = 1.85 (the
  DeepSeek-V3 technical report, §5.4.3: the second token is accepted 85–90 % of the time, later drafts counted as
  never accepted), high the smaller of 1 + 0.9 + 0.9² + … over the D − 1 drafts and 3.20 (the
  nebius/MTP-DeepSeek-V3-0324 model card: DeepSeek-V3's original MTP module drafting 7 tokens reaches an average
  acceptance length of 3.20 at temperature 0 over MT-bench, HumanEval and GSM8K), the estimate their midpoint;
- any other draft (EAGLE on a model without MTP layers): no public figure kvplan can stand on; refused with one line.
"""

from __future__ import annotations

from dataclasses import dataclass

DEEPSEEK_SECOND_TOKEN = (850, 900)
"""Acceptance of the first draft token, per mille (DeepSeek-V3 technical report §5.4.3: 85–90 %)."""
MTP_SEVEN_DRAFTS_MILLI = 3200
"""nebius/MTP-DeepSeek-V3-0324 model card: original MTP, 7 drafts, τ = 3.20 at temperature 0."""


@dataclass(frozen=True, kw_only=True)
class Acceptance:
    """Mean tokens a verify step yields, in thousandths (ints: the schedule counts them), with its band."""

    verify_tokens: int
    """D: tokens each decode request runs through the target (and the draft) model a step."""
    milli: int
    low_milli: int
    high_milli: int
    source: str

    @property
    def given(self) -> bool:
        return self.low_milli == self.milli == self.high_milli

    def line(self) -> str:
        band = "" if self.given else f" (band {self.low_milli / 1000:.2f}–{self.high_milli / 1000:.2f})"
        return (f"speculative decoding: {self.verify_tokens} tokens verified a request a step, acceptance length "
                f"{self.milli / 1000:.2f}{band}: {self.source}")  # fmt: skip


def acceptance(*, verify_tokens: int, has_mtp_layers: bool, given: float | None) -> Acceptance | None:
    """The acceptance length of a deployment drafting ``verify_tokens`` − 1 tokens (None without speculative
    decoding); ValueError (one line) for a value outside 1..D or a draft family without a default."""
    if verify_tokens < 2:
        if given is not None:
            raise ValueError("--acceptance-length needs speculative decoding in the deployment "
                             "(--set speculative_num_draft_tokens=N, N >= 2)")  # fmt: skip
        return None
    d = verify_tokens
    if given is not None:
        if not 1.0 <= given <= d:
            raise ValueError(f"--acceptance-length {given:g}: a mean of tokens a verify step yields, from 1 to the "
                             f"{d} tokens verified (speculative_num_draft_tokens)")  # fmt: skip
        m = round(given * 1000)
        return Acceptance(verify_tokens=d, milli=m, low_milli=m, high_milli=m, source="given (--acceptance-length)")
    if not has_mtp_layers:
        raise ValueError("no default acceptance length for an EAGLE / draft-model deployment of this family: give "
                         "--acceptance-length (SGLang's bench prints it as 'accept length')")  # fmt: skip
    low = 1000 + DEEPSEEK_SECOND_TOKEN[0]
    chain, p = 1000, 1000
    for _ in range(d - 1):
        p = p * DEEPSEEK_SECOND_TOKEN[1] // 1000
        chain += p
    high = min(chain, MTP_SEVEN_DRAFTS_MILLI)
    src = ("default for MTP models: low 1.85 (DeepSeek-V3 report §5.4.3, 85–90 % second-token acceptance), high "
           "min(1 + 0.9 + 0.9² + …, 3.20) (nebius/MTP-DeepSeek-V3-0324 card: original MTP, 7 drafts, τ 3.20), "
           "estimate their midpoint; give --acceptance-length to replace it")  # fmt: skip
    return Acceptance(verify_tokens=d, milli=(low + high) // 2, low_milli=low, high_milli=high, source=src)


def steps_for(tokens: int, milli: int) -> int:
    """Decode steps that yield ``tokens`` at ``milli`` / 1000 tokens a step (at least one a step)."""
    return -(-tokens * 1000 // max(milli, 1000))
