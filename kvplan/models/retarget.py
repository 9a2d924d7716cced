"""A deployment file written for one model, planned with another: which of its knobs follow the model.

Why: the GLM-5.3 preset's fp8 KV and 64-token pages planned a Llama as if the user had set them.
A knob is either the user's (--set, or the user's own deployment file) or the engine's default for the model
being planned; a built-in preset's model knobs (kvplan.models.deploy.MODEL_KNOBS) do not travel to another model.
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

from kvplan.models.arch import ModelArch
from kvplan.models.deploy import KNOBS, MODEL_KNOBS, Carry, Deployment
from kvplan.models.from_hf import load_model

_DEFAULTS: dict[str, Any] = {f.name: f.default for f in fields(Deployment)}


def _value(dep: Deployment, knob: str) -> object:
    value = getattr(dep, knob)
    return getattr(value, "key", value)  # a Gpu by its catalog key; numbers stay numbers


def written_for(dep: Deployment, arch: ModelArch) -> bool:
    """Whether dep's file was written for ``arch``: it names no model, or this one, or (a config.json or snapshot
    folder given with --model) a preset with the same architecture and the same layers."""
    if not dep.written_for or dep.written_for.lower() == arch.name.lower():
        return True
    if not dep.builtin:
        return False  # a user's file applies whole either way; a wrong guess only costs a line
    own = load_model(dep.written_for)  # a built-in preset names a built-in model
    return own.architecture == arch.architecture and own.layers == arch.layers


def retarget(dep: Deployment, arch: ModelArch) -> Deployment:
    """dep for ``arch``: unchanged where the file was written for it; else a built-in preset's model knobs back
    to None (the engine's default for this model), and the Carry that says so."""
    if written_for(dep, arch):
        return dep
    model = arch.name
    ordered = [k for k in KNOBS if k in dep.from_file]
    if not dep.builtin:  # the user's own file: every knob is the user's; its model knobs are said
        kept = tuple((k, _value(dep, k)) for k in ordered if k in MODEL_KNOBS)
        return replace(dep, carry=Carry(deployment=dep.name, written_for=dep.written_for, model=model,
                                        carried=kept, builtin=False))  # fmt: skip
    dropped = tuple((k, _value(dep, k)) for k in ordered if k in MODEL_KNOBS)
    carried = tuple((k, _value(dep, k)) for k in ordered if k not in MODEL_KNOBS)
    reset = {k: _DEFAULTS[k] for k, _ in dropped}
    return replace(
        dep,
        **reset,
        explicit=dep.explicit - set(reset),
        from_file=dep.from_file - set(reset),
        carry=Carry(deployment=dep.name, written_for=dep.written_for, model=model, dropped=dropped, carried=carried),
    )
