"""The headline's guards: what the doctor may name, given its own checks. (pure)

- A knob is named as the cause only when applying it to the plan moves the pool toward the log's figure by more
  than half the gap: a vLLM log at max_model_len 1,000,000 with a 3.8x gap was told "CAUSE: the server ran
  context_length 1,000,000", a knob that moves the pool 0.36 %.
- Rows whose bytes are within a layout's padding of the config's (2 %) are the config's model, never "another
  model": vLLM aligns a hybrid's MLA block to 64 tokens (944 -> 960, 1.7 %), the LMCache connector's run of
  Qwen3-235B-FP8 logs 1.1 % more bytes per block than the K/V shape (vllm-project/vllm#21348).
- With no --model, the default deployment's model is compared with the log only when the log names it (its model
  path or class); otherwise the log is read alone and no cause, and no "kvplan's plan predicts it", is taken
  from a model the log is not about.
"""

from __future__ import annotations

import re

from kvplan.models.arch import ModelArch
from kvplan.runbook.parse import Gib, ParsedLog, Run

SAME_ROWS_PERCENT = 2
"""Bytes per row (or block) within this of the config's are the config's rows with a padding or alignment kvplan
does not model, not another model's: vLLM rounds a hybrid's attention block up to the backend's alignment
(vllm/model_executor/models/config.py, HybridAttentionMambaModelConfig.verify_and_update_config: ``16 *
cdiv(mamba_page_size, 16 * attn_page_size_1_token)``; an MLA backend's alignment of 64 takes Kimi-Linear's 944 to
960 tokens, +1.69 %), and the LMCache run of vllm-project/vllm#21348 logs +1.1 %."""


MISMATCH_ADD = (
    "--deploy with the server's full configuration: no known cause, applied, closes half the gap (the knobs a log "
    "does not print: a token cap, a block override, a memory fraction, a draft pool)"
)
"""What a MISMATCH asks for: every headline that names no cause says what to add."""
ROWS_ADD = "--model with the server's exact config: the log's rows have other bytes than the config's"


def closes_gap(before: int, after: int, logged: int) -> bool:
    """Whether a change that takes the planned pool from ``before`` to ``after`` moves it toward the log's
    ``logged`` by more than half the gap (the issue's rule for naming a cause)."""
    return 2 * abs(after - logged) < abs(before - logged)


def near_rows(low: int, high: int, config: int) -> bool:
    """The log's bytes per row lie within SAME_ROWS_PERCENT of the config's (both ends of the log's range)."""
    if config <= 0 or high < low:
        return False
    lo_ok = low * 100 <= config * (100 + SAME_ROWS_PERCENT)
    hi_ok = high * 100 >= config * (100 - SAME_ROWS_PERCENT)
    return lo_ok and hi_ok


def deviation_percent(low: int, high: int, config: int) -> str:
    """The log's range against the config's bytes, signed, as printed ('+1.1 %'; a range prints both ends)."""
    if config <= 0:
        return "?"
    a = (low - config) * 100 / config
    b = (high - config) * 100 / config
    if f"{a:+.1f}" == f"{b:+.1f}":
        return f"{a:+.1f} %"
    return f"{a:+.1f} % – {b:+.1f} %"


def _stem(text: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", text.lower())


def names_model(arch: ModelArch, run: Run, aliases: frozenset[str]) -> bool:
    """Whether the log itself names ``arch``: its model class (or an alias the engine prints for it), or a model
    path that holds the model's name ('zai-org/GLM-5.3-FP8' names glm-5.3)."""
    cls = run.model_class
    if cls is not None and (cls == arch.architecture or cls in aliases):
        return True
    path = run.model_path
    return path is not None and _stem(arch.name) in _stem(path)


def unnamed_why(arch: ModelArch, dep_name: str, log: ParsedLog) -> str | None:
    """Why the log is read alone when no --model is given and the start it reads names no model (None: it names
    one, which the CLI's other checks compare with the default deployment's). A model named in another block of
    the paste (club-3090#295 pasted vLLM's pool lines above its 'non-default args' line) is said, never assumed."""
    run = log.chosen
    if run.model_class is not None or run.model_path is not None:
        return None
    elsewhere = next((r.model_path or r.model_class for r in log.runs if r.model_path or r.model_class), None)
    said = f"; another block of the log names {elsewhere}" if elsewhere else ""
    return (
        f"the start the doctor reads names no model (no model path or class{said}), and the default deployment "
        f"{dep_name} serves {arch.name}: no cause is taken from a model the log is not about"
    )


def refusal_figures_agree(
    needed: Gib | None, planned_needed: int | None, estimated: int | None, low: int | None, high: int | None
) -> bool:
    """Whether kvplan's figures for a vLLM refusal are the log's: the KV one max-length request needs rounds to the
    printed GiB, and the largest length that fits lies in kvplan's range. A plan that refuses with other figures
    does not "predict" the refusal (DeepSeek-V4-Flash, vllm-project/vllm#44376: 6.35 GiB planned, 6.66 printed)."""
    if needed is not None and planned_needed is not None and not needed.covers(planned_needed):
        return False
    return estimated is None or low is None or high is None or low <= estimated <= high
