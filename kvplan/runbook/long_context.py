"""A context length above the model's derived one, allowed (a knob) or refused, as a start-up log prints it. (pure)

Both engines refuse a user length above the length they derive from the config unless an env var allows it, and
print the same sentence either way; only the refusal adds "To allow overriding this maximum" (the engines' code
and sentences at ``VL_LONG_LEN`` and ``SG_LONG_LEN``).

The env var itself (``VAR=1`` in a pasted command or environment dump) is read too, but never inside the refusal's
"set the env var VAR=1".
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

# vLLM (``config/model.py _get_and_verify_max_len``): "User-specified max_model_len (N) is greater than the derived
# max_model_len (max_position_embeddings=M or model_max_length=None in model's config.json)." + with
# ``VLLM_ALLOW_LONG_MAX_MODEL_LEN`` set a ``logger.warning`` ("This may lead to incorrect model outputs or CUDA
# errors. Make sure the value is correct and within the model context size." before vllm#20904, "VLLM_ALLOW_LONG_
# MAX_MODEL_LEN must be used with extreme caution. ..." after), else ``ValueError(msg + " To allow overriding this
# maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. ...")``.
VL_LONG_LEN = re.compile(r"User-specified max_model_len \((\d{1,30})\) is greater than the derived max_model_len")
# SGLang (``srt/configs/model_config.py ModelConfig._derive_context_length``): "Warning: User-specified
# context_length (N) is greater than the derived context_length (M). This may lead to incorrect model outputs or
# CUDA errors. ..." logged when ``SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN`` is set, else ``ValueError(msg +
# " To allow overriding this maximum, set the env var SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1")``.
SG_LONG_LEN = re.compile(r"User-specified context_length \((\d{1,30})\) is greater than the derived context_length")
LONG_ENV = re.compile(
    r"(VLLM_ALLOW_LONG_MAX_MODEL_LEN|SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN)[ \t]{0,4}[=:][ \t]{0,4}[\"']?"
    r"(?:1|[Tt]rue|TRUE)\b"
)
REFUSAL = "To allow overriding this maximum"


@dataclass(frozen=True)
class LongContext:
    """The engine ran (or was told to run) above its derived length: the ``allow_long_context`` knob."""

    engine: str
    shown: str
    """What the log printed, in a few words (the requested length, or the env var)."""
    length: int | None
    """The requested max_model_len / context_length where the warning prints it."""


_VARS = {"vllm": "VLLM_ALLOW_LONG_MAX_MODEL_LEN", "sglang": "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"}


def length_read(engine: str) -> Callable[[re.Match[str], str], tuple[tuple[str, object], ...]]:
    """The reader of an engine's long-length sentence (its first in a record): 'error' (a refused start) when the
    refusal follows it, else 'long_context' (the warning)."""

    def read(m: re.Match[str], text: str) -> tuple[tuple[str, object], ...]:
        n = int(m.group(1))
        if REFUSAL in text[m.end() :]:
            name = "vLLM" if engine == "vllm" else "SGLang"
            return (("error", f"{name} refused the length: {m.group(0)} (without {_VARS[engine]}=1)"),)
        return (("long_context", LongContext(engine, f"on: {n:,} above the derived length", n)),)

    return read


def env_read(engine: str) -> Callable[[re.Match[str], str], tuple[tuple[str, object], ...]]:
    """The reader of an engine's env var set in a pasted command or environment: 'long_context'."""

    def read(m: re.Match[str], text: str) -> tuple[tuple[str, object], ...]:
        before = text[max(m.start() - 8, 0) : m.start()]
        if before == "env var " or before[-1:].isalnum() or before[-1:] == "_":
            return ()  # the refusal's advice ("set the env var VAR=1"), or part of a longer name
        if m.group(1) != _VARS[engine]:
            return ()  # the other engine's variable: its own row reads it
        return (("long_context", LongContext(engine, f"on: {m.group(0)}", None)),)

    return read
