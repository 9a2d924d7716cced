"""A RoPE scaling the model's card documents but its config.json leaves off (Qwen3: YaRN, factor 4, from 32,768
native positions to 131,072): the operator's own way to serve a longer context than the config derives.

It lives on the model preset as ``documented_rope_scaling`` with its source; a deployment turns it on with
``rope_scaling: yarn`` (kvplan.engines.context says what each engine then derives). A config.json that already
carries ``rope_scaling`` is already scaled: the engines read it as shipped.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kvplan import limits, record

if TYPE_CHECKING:
    from kvplan.models.reader import Reader

ROPE_TYPES = ("yarn",)
"""The scalings a deployment can turn on: YaRN, the one the model cards document (Qwen3, QwQ, Qwen2.5)."""


@record
class RopeScaling:
    rope_type: str
    factor: float
    """The card's factor, as the engines read it (a float in config.json)."""
    original_max_position_embeddings: int
    source: str

    @property
    def context_tokens(self) -> int:
        """original × factor: the positions YaRN covers (vLLM _get_and_verify_max_len derives max_model_len so)."""
        return int(self.original_max_position_embeddings * self.factor)

    def override_json(self) -> str:
        """The ``rope_scaling`` mapping as the engines' override flags take it."""
        value = {
            "rope_type": self.rope_type,
            "factor": self.factor,
            "original_max_position_embeddings": self.original_max_position_embeddings,
        }
        return json.dumps({"rope_scaling": value}, separators=(",", ":"))


def read_documented(r: Reader) -> RopeScaling | None:
    """A preset's ``documented_rope_scaling`` mapping (rope_type, factor, original_max_position_embeddings,
    source), or None."""
    if not r.has("documented_rope_scaling"):
        return None
    s = r.sub("documented_rope_scaling")
    s.reject_unknown({"rope_type", "factor", "original_max_position_embeddings", "source"})
    factor = s.data.get("factor")
    if isinstance(factor, bool) or not isinstance(factor, int | float) or not 1 < factor <= 1024:
        s.fail("factor", f"expected a number above 1 and at most 1024, got {factor!r}")
    return RopeScaling(
        rope_type=s.get_choice("rope_type", ROPE_TYPES, default="yarn"),
        factor=float(factor),
        original_max_position_embeddings=s.get_int(
            "original_max_position_embeddings", required=True, maximum=limits.MAX_TOKENS
        ),
        source=s.get_str("source", required=True),
    )


@record
class ConfigRope:
    """The ``rope_scaling`` (or ``rope_parameters``) a config.json ships: the engines derive their context length
    from it (kvplan.engines.context), each its own way."""

    rope_type: str
    factor: float | None
    original_max_position_embeddings: int | None


def config_rope(data: Mapping[str, Any]) -> ConfigRope | None:
    """The config's RoPE scaling, read as loosely as the engines read it (a malformed field is left out)."""
    text = data.get("text_config")
    if isinstance(text, Mapping) and "max_position_embeddings" not in data:
        data = text  # the decoder's own config (GLM-5.3-Flash, Kimi-K3)
    rs = data.get("rope_scaling") or data.get("rope_parameters")
    if not isinstance(rs, Mapping):
        return None
    factor, original = rs.get("factor"), rs.get("original_max_position_embeddings")
    number = isinstance(factor, int | float) and not isinstance(factor, bool) and 0 < factor <= 1024
    whole = isinstance(original, int) and not isinstance(original, bool) and 0 < original <= limits.MAX_TOKENS
    return ConfigRope(
        rope_type=str(rs.get("rope_type", rs.get("type", "default"))),
        factor=float(factor) if number and isinstance(factor, int | float) else None,
        original_max_position_embeddings=original if whole else None,
    )
