"""A preset's weights by the same path as its own config.json, so that one model never gets two weights.

A preset's ``config`` section holds the Hugging Face fields of the model's config.json (each preset's ``source``
names the file). Its weights used to be the MLA parameter groups (no norms, the MTP layer's embed/head, no engine
additions): DeepSeek-V3 planned 78.54 GiB a GPU at TP8 from its preset and 79.55 GiB from its config.json against
vLLM's published 79.74 GiB (tests/models/test_weights_published.py). Now both go through
:func:`kvplan.models.snapshot.with_checkpoint` (per tensor from the config, + the engine's load-time additions);
a config kvplan cannot lay out per tensor keeps its parameter groups either way.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from functools import lru_cache, partial
from typing import Any, overload

from kvplan.models.arch import ModelArch, ParamGroup
from kvplan.models.snapshot import with_checkpoint
from kvplan.models.weights import as_parameter_groups

PRESET_FP8_BLOCKS = {
    "quant_method": "fp8",
    "fmt": "e4m3",
    "activation_scheme": "dynamic",
    "weight_block_size": [128, 128],
}
"""What a preset's ``checkpoint_dtype: fp8`` stands for: the block-fp8 ``quantization_config`` of the DeepSeek and
GLM FP8 checkpoints (tests/data/hf/glm-5, glm-5.3, deepseek-v3, deepseek-v3.2 config.json)."""


def preset_weights(arch: ModelArch, source: str, config: Mapping[str, Any], checkpoint_dtype: object) -> ModelArch:
    """``arch`` (a preset) with the weights its config.json would give; ``checkpoint_dtype: fp8`` without a
    ``quantization_config`` is the block-fp8 one that config.json carries."""
    data = dict(config)
    if "quantization_config" not in data and checkpoint_dtype not in (None, "bf16", "fp16"):
        if checkpoint_dtype != "fp8":  # an nvfp4 / fp32 preset names no layout to match: its groups stand
            return as_parameter_groups(arch)
        data["quantization_config"] = dict(PRESET_FP8_BLOCKS)
    text = json.dumps(data, sort_keys=True)
    said = "the preset's config laid out as its config.json is (per tensor where kvplan lays the family out)"
    return replace(
        arch,
        param_groups=DeferredGroups((source, text), partial(_groups, arch, source, text)),
        weights_summary=f"{arch.weights_summary}; {said}" if arch.weights_summary else said,
    )


class DeferredGroups(Sequence[ParamGroup]):
    """A preset's per-tensor groups, laid out on first use (GLM-5.3's 119,028 tensors, its experts as runs: about
    20 ms of CPU); a plan that takes a measured weights point (the default deployment) never reads them."""

    __slots__ = ("_groups", "_key", "_make")

    def __init__(self, key: tuple[str, str], make: partial[tuple[ParamGroup, ...]]) -> None:
        self._key, self._make = key, make
        self._groups: tuple[ParamGroup, ...] | None = None

    def _get(self) -> tuple[ParamGroup, ...]:
        if self._groups is None:
            self._groups = self._make()
        return self._groups

    @overload
    def __getitem__(self, i: int) -> ParamGroup: ...
    @overload
    def __getitem__(self, i: slice) -> tuple[ParamGroup, ...]: ...
    def __getitem__(self, i: int | slice) -> ParamGroup | tuple[ParamGroup, ...]:
        return self._get()[i]

    def __len__(self) -> int:
        return len(self._get())

    def __iter__(self) -> Iterator[ParamGroup]:
        return iter(self._get())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DeferredGroups):
            return self._key == other._key
        return isinstance(other, Sequence) and tuple(self) == tuple(other)

    def __hash__(self) -> int:
        return hash(self._key)  # the config they come from: hashing a plan's model lays nothing out

    def __repr__(self) -> str:
        return f"DeferredGroups({self._key[0]!r})"

    @property
    def summary(self) -> str:
        """How the laid-out weights were counted (``with_checkpoint``'s summary: per tensor, or the groups)."""
        arch, source, config = self._make.args
        return _weighed(arch, source, config).weights_summary


def _groups(arch: ModelArch, source: str, config: str) -> tuple[ParamGroup, ...]:
    return tuple(_weighed(arch, source, config).param_groups)


@lru_cache(maxsize=32)
def _weighed(arch: ModelArch, source: str, config: str) -> ModelArch:
    """The per-tensor layout of a preset's config, once a process (GLM-5.3: 119,028 tensors as 2,748 entries)."""
    return with_checkpoint(arch, source, json.loads(config), snapshot=False)
