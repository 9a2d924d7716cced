"""Validation of kvplan's JSON documents against its shipped schemas: jsonschema (the dev extra) when installed,
else a small validator of exactly the keywords those schemas use, so the check runs in every environment.

``KEYWORDS`` is that set; tests/cli/test_json_schemas.py asserts no shipped schema uses another one (the fallback
would otherwise pass what it does not understand) and that both validators agree on the corpus.
"""

from __future__ import annotations

from typing import Any

KEYWORDS = frozenset({"$schema", "$id", "title", "$defs", "$ref", "anyOf", "type", "const", "properties",
                      "required", "additionalProperties", "items", "prefixItems", "minItems", "maxItems"})  # fmt: skip
_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    # JSON Schema: an integer is any number with a zero fraction (53940.0 is one); a bool is not a number
    "integer": lambda v: not isinstance(v, bool) and (isinstance(v, int) or (isinstance(v, float) and v.is_integer())),
    "number": lambda v: not isinstance(v, bool) and isinstance(v, int | float),
}


def errors(schema: dict[str, Any], doc: Any) -> list[str]:
    """Each place ``doc`` breaks ``schema``, as 'path: why' (empty when it validates)."""
    try:
        import jsonschema
    except ImportError:
        return fallback_errors(schema, doc)
    v = jsonschema.Draft202012Validator(schema)
    return [f"/{'/'.join(map(str, e.absolute_path))}: {e.message[:200]}" for e in v.iter_errors(doc)]


def used_keywords(schema: Any) -> set[str]:
    """Every keyword a schema uses (property names and $defs names are not keywords)."""
    found: set[str] = set()
    if not isinstance(schema, dict):
        return found
    for k, v in schema.items():
        found.add(k)
        if k in ("properties", "$defs"):
            subs = list(v.values())
        elif k in ("anyOf", "prefixItems"):
            subs = list(v)
        else:
            subs = [v] if k in ("items", "additionalProperties") else []
        for sub in subs:
            found |= used_keywords(sub)
    return found


def fallback_errors(schema: dict[str, Any], doc: Any) -> list[str]:
    """The small validator alone (test_json_schemas checks it agrees with jsonschema where both run)."""
    out: list[str] = []
    _check(schema, schema, doc, "", out)
    return out


def _check(root: dict[str, Any], s: Any, v: Any, at: str, out: list[str]) -> None:
    if not isinstance(s, dict):
        return
    if "$ref" in s:
        _check(root, root["$defs"][s["$ref"].rsplit("/", 1)[1]], v, at, out)
    if "anyOf" in s:
        tries = [[] for _ in s["anyOf"]]
        for sub, errs in zip(s["anyOf"], tries, strict=True):
            _check(root, sub, v, at, errs)
        if all(tries):
            out.append(f"{at or '/'}: matches none of anyOf ({min(tries, key=len)[0]})")
    if "const" in s and (v != s["const"] or isinstance(v, bool) != isinstance(s["const"], bool)):
        out.append(f"{at or '/'}: {v!r} is not {s['const']!r}")
    if "type" in s:
        types = [s["type"]] if isinstance(s["type"], str) else s["type"]
        if not any(_TYPES[t](v) for t in types):
            out.append(f"{at or '/'}: {v!r:.60} is not of type {types}")
            return
    if isinstance(v, dict):
        props = s.get("properties", {})
        out += [f"{at}/{k}: required" for k in s.get("required", ()) if k not in v]
        for k, x in v.items():
            if k in props:
                _check(root, props[k], x, f"{at}/{k}", out)
            elif s.get("additionalProperties") is False:
                out.append(f"{at}/{k}: additional property not allowed")
            elif isinstance(s.get("additionalProperties"), dict):
                _check(root, s["additionalProperties"], x, f"{at}/{k}", out)
    if isinstance(v, list):
        if len(v) < s.get("minItems", 0) or len(v) > s.get("maxItems", len(v)):
            out.append(f"{at or '/'}: {len(v)} items")
        prefix = s.get("prefixItems", [])
        for i, x in enumerate(v):
            sub = prefix[i] if i < len(prefix) else s.get("items")
            _check(root, sub, x, f"{at}/{i}", out)
