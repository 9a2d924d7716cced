"""What applies to the model in front of the user, and only that.

- A deployment written for another model: the line that says which of its knobs apply.
- A model without a DSA indexer: no indexer fields in its JSON. The plan
  still carries its zeros (one shape for every model); the JSON a user reads drops the fields that name the
  indexer where they are all zero, so that a Llama plan never speaks of an indexer it has not got.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvplan.render import Section, count, size

if TYPE_CHECKING:
    from kvplan.engines.common import Knob
    from kvplan.models.arch import ModelArch
    from kvplan.models.deploy import Carry

SET_SUFFIX = " (+ --set)"
"""What the loader appends to a deployment's name when --set changed it."""

_BYTE_KNOBS = ("weights_per_gpu", "pre_load_free", "runtime_overhead", "non_kv_other", "kv_cache_memory")


def knob_value(name: str, v: object) -> str:
    """A knob's value as printed: byte knobs as sizes, counts with separators."""
    if isinstance(v, int) and not isinstance(v, bool) and name in _BYTE_KNOBS:
        return size(v)
    if isinstance(v, int) and not isinstance(v, bool):
        return count(v)
    return str(v)


def _pairs(items: tuple[tuple[str, object], ...]) -> str:
    return ", ".join(f"{k}={knob_value(k, v)}" for k, v in items)


def carry_line(c: Carry | None) -> str:
    """What a deployment file written for another model gives the model planned; '' when nothing to say."""
    if c is None:
        return ""
    name = c.deployment.removesuffix(SET_SUFFIX)
    if not c.builtin:  # the user's own file: its knobs are the user's, said because they were chosen for another
        if not c.carried:
            return ""
        verb = "applies" if len(c.carried) == 1 else "apply"
        return f"{name} was written for {c.written_for}: its {_pairs(c.carried)} {verb} to {c.model} as set" + (
            " (override with --set)"
        )
    words = [f"preset {name} was written for {c.written_for}"]
    if c.dropped:
        verb = "is" if len(c.dropped) == 1 else "are"
        words.append(f"its {_pairs(c.dropped)} {verb} not applied to {c.model}: the engine's defaults for it instead")
    if c.carried:
        words.append(f"carried over: {_pairs(c.carried)}")
    return "; ".join(words)


def carry_data(c: Carry | None) -> dict[str, Any] | None:
    """The same in JSON: raw values (integers stay integers); None where the file was written for this model."""
    if c is None:
        return None
    return {
        "deployment": c.deployment,
        "written_for": c.written_for,
        "model": c.model,
        "preset": c.builtin,
        "not_applied": dict(c.dropped),
        "carried_over": dict(c.carried),
    }


def _all_zero(v: object) -> bool:
    if isinstance(v, dict):
        return all(_all_zero(x) for x in v.values())
    if isinstance(v, list | tuple):
        return all(_all_zero(x) for x in v)
    return v is None or (isinstance(v, int | float) and v == 0)


def _without_indexer(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _without_indexer(x) for k, x in v.items() if not ("indexer" in str(k).lower() and _all_zero(x))}
    if isinstance(v, list):
        return [_without_indexer(x) for x in v]
    return v


def for_model(arch: ModelArch, data: dict[str, Any]) -> dict[str, Any]:
    """``data`` without the all-zero indexer fields when ``arch`` has no DSA indexer (a non-zero one stays: a
    figure is never hidden); unchanged for a DSA model."""
    return data if arch.has_indexer else dict(_without_indexer(data))


def without_indexer_column(arch: ModelArch, s: Section) -> Section:
    """The section without its 'indexer' column for a model that has no DSA indexer."""
    if arch.has_indexer or "indexer" not in s.headers:
        return s
    j = s.headers.index("indexer")
    return Section(s.title, tuple(row[:j] + row[j + 1 :] for row in s.rows), s.headers[:j] + s.headers[j + 1 :], s.note)


def knob_origin(k: Knob, carry: Carry | None) -> str:
    """The knobs table's origin: the engine's default and why, 'set' by the user, or set by a preset written for
    another model (a hardware or layout knob it carries over)."""
    if k.defaulted:
        return "defaulted — " + k.origin.removeprefix("default: ")
    if carry is not None and k.name in {name for name, _ in carry.carried}:
        return f"set by {carry.deployment.removesuffix(SET_SUFFIX)}, written for {carry.written_for}"
    return "set"
