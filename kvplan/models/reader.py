"""kvplan's documents: YAML and JSON parsed with the line of every key path, and typed field reads whose errors
name the file, the key path and the line (exit 2)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping
from dataclasses import field
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

from kvplan import limits, record
from kvplan.errors import ConfigError, InputError
from kvplan.limits import LimitError
from kvplan.units import GiB, MiB, parse_bytes, parse_tokens

T = TypeVar("T")
Path_ = tuple[str | int, ...]


# --------------------------------------------------------------------------- documents with lines


@record
class Doc:
    """Parsed data plus the line of every key path (1-based), for error messages."""

    data: Any
    source: str
    lines: Mapping[Path_, int] = field(default_factory=dict)
    strict: bool = False
    """JSON (a config.json): numbers must be JSON numbers and booleans JSON booleans, never strings."""

    def line(self, path: Path_) -> int | None:
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return self.lines.get((), None)


def _yaml() -> Any:
    import yaml

    return yaml


class _Budget:
    """Values produced while expanding one document: aliases cannot multiply them past MAX_YAML_NODES."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.nodes = 0

    def take(self, node: Any) -> None:
        self.nodes += 1
        if self.nodes > limits.MAX_YAML_NODES:
            raise ConfigError(
                f"expands to more than {limits.MAX_YAML_NODES:,} values (YAML aliases?): past kvplan's limit",
                source=self.source,
                line=node.start_mark.line + 1,
            )


def _node_to_data(node: Any, path: Path_, lines: dict[Path_, int], budget: _Budget) -> Any:
    yaml = _yaml()
    source = budget.source
    budget.take(node)
    if len(path) > 2 * limits.MAX_DEPTH:  # aliases can nest what the text did not
        raise ConfigError(
            f"nested deeper than kvplan's limit of {limits.MAX_DEPTH} levels (through aliases)",
            source=source,
            line=node.start_mark.line + 1,
        )
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = key_node.value
            if not isinstance(key_node, yaml.ScalarNode):
                raise ConfigError("mapping keys must be plain names", source=source, line=key_node.start_mark.line + 1)
            if key in out:
                raise ConfigError(
                    "duplicate key",
                    source=source,
                    key=_dotted((*path, key)),
                    line=key_node.start_mark.line + 1,
                )
            out[key] = _node_to_data(value_node, (*path, key), lines, budget)
            lines[(*path, key)] = key_node.start_mark.line + 1
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_node_to_data(v, (*path, i), lines, budget) for i, v in enumerate(node.value)]
    if node.tag.endswith(":int") and len(node.value) > limits.MAX_INT_DIGITS + 10:  # '0x…', '1:2:3…' alike
        raise ConfigError(
            f"an integer of {len(node.value):,} characters is past kvplan's limit of {limits.MAX_INT_DIGITS} digits",
            source=source,
            key=_dotted(path),
            line=node.start_mark.line + 1,
        )
    try:
        return _constructor().construct_object(node, deep=True)
    except (yaml.YAMLError, ValueError, TypeError, OverflowError) as e:
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ConfigError(
            f"cannot read a value: {problem}", source=source, key=_dotted(path), line=node.start_mark.line + 1
        ) from None


@lru_cache(maxsize=1)
def _constructor() -> Any:
    """YAML's own scalar typing (int, float, bool, null) for nodes the composer already tagged."""
    return _yaml().constructor.SafeConstructor()


def _yaml_error(e: Exception, source: str, what: str) -> ConfigError:
    mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
    problem = getattr(e, "problem", None) or str(e).splitlines()[0]
    return ConfigError(f"{what}: {problem}", source=source, line=mark.line + 1 if mark is not None else None)


def _prescan(text: str, source: str, loader: Any) -> None:
    """Depth, alias and size limits from the event stream, before anything recursive runs on the input.

    The event parser is iterative; composing nodes (C or Python) recurses once per nesting level, so a
    document 10,000 levels deep must be refused here, not there.
    """
    yaml = _yaml()
    depth = aliases = 0
    for events, event in enumerate(yaml.parse(text, Loader=loader), 1):
        if isinstance(event, yaml.MappingStartEvent | yaml.SequenceStartEvent):
            depth += 1
            if depth > limits.MAX_DEPTH:
                raise ConfigError(
                    f"nested deeper than kvplan's limit of {limits.MAX_DEPTH} levels",
                    source=source,
                    line=event.start_mark.line + 1,
                )
        elif isinstance(event, yaml.MappingEndEvent | yaml.SequenceEndEvent):
            depth -= 1
        elif isinstance(event, yaml.AliasEvent):
            aliases += 1
            if aliases > limits.MAX_YAML_ALIASES:
                raise ConfigError(
                    f"more than {limits.MAX_YAML_ALIASES} YAML aliases (*name): past kvplan's limit",
                    source=source,
                    line=event.start_mark.line + 1,
                )
        if events > 2 * limits.MAX_YAML_NODES:
            raise ConfigError(
                f"more than {limits.MAX_YAML_NODES:,} values: past kvplan's limit for a config",
                source=source,
                line=event.start_mark.line + 1,
            )


def parse_text(text: str, source: str) -> Doc:
    """A YAML (or JSON) document with the line of every key path; bounded in depth, aliases and size."""
    yaml = _yaml()
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        _prescan(text, source, loader)
        node = yaml.compose(text, Loader=loader)
    except yaml.YAMLError as e:
        raise _yaml_error(e, source, "not valid YAML/JSON") from None
    except RecursionError:
        raise ConfigError(f"nested deeper than kvplan's limit of {limits.MAX_DEPTH} levels", source=source) from None
    if node is None:
        raise ConfigError("the file is empty", source=source)
    lines: dict[Path_, int] = {}
    try:
        data = _node_to_data(node, (), lines, _Budget(source))
    except yaml.YAMLError as e:
        raise _yaml_error(e, source, "cannot read a value") from None
    except (ValueError, TypeError) as e:
        raise ConfigError(f"cannot read a value: {e}", source=source) from None
    except RecursionError:
        raise ConfigError("an alias refers to itself", source=source) from None
    return Doc(data, source, lines)


def parse_json(text: str, source: str) -> Doc:
    """A JSON document, strictly (limits.strict_json): duplicate keys, NaN/Infinity, integers past
    MAX_INT_DIGITS digits and nesting past MAX_DEPTH are errors, located where the text allows."""
    try:
        data = limits.strict_json(text)
    except limits.JsonError as e:
        if e.key is not None:
            parse_text(text, source)  # names the key and its line
        line = e.line
        if line is None and "digits" in e.problem:
            long_int = re.search(rf"\d{{{limits.MAX_INT_DIGITS + 1},}}", text)
            line = text.count("\n", 0, long_int.start()) + 1 if long_int else None
        raise ConfigError(e.problem, source=source, line=line) from None
    try:
        doc = parse_text(text, source)  # JSON is YAML: reuse it for line numbers (and its depth limit)
    except ConfigError as e:
        if "nested deeper" in e.detail:
            raise
        return Doc(data, source, strict=True)
    return Doc(data, source, doc.lines, strict=True)


def read_file(path: Path) -> Doc:
    """A config file (YAML, or JSON by its suffix) or a Hugging Face snapshot folder's config.json."""
    try:
        if path.is_dir() and (path / "config.json").is_file():
            path = path / "config.json"  # a Hugging Face snapshot folder
    except OSError as e:
        raise InputError(f"{str(path)[:200]}: cannot read: {e.strerror or e}") from None
    try:
        text = limits.read_text(path, limits.CONFIG, "config file")
    except InputError as e:
        message = str(e)
        if len(message) > 400:  # a path longer than the OS allows: keep the one line readable
            message = f"config file {str(path)[:80]}…: {message.rsplit(': ', 1)[-1]}"
        raise type(e)(message) from None
    if path.suffix == ".json":
        return parse_json(text, str(path))
    return parse_text(text, str(path))


def _dotted(path: Path_) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


# --------------------------------------------------------------------------- typed field reader


class Reader:
    """Typed access to one mapping of a Doc, with errors that carry file, key path and line."""

    def __init__(self, doc: Doc, path: Path_ = (), data: Any = None):
        self.doc = doc
        self.path = path
        self.data = doc.data if data is None and not path else data
        if not isinstance(self.data, dict):
            self.fail((), f"expected a mapping, got {_kind(self.data)}")

    def fail(self, key: Path_ | str, message: str) -> ConfigError:
        path = (*self.path, *((key,) if isinstance(key, str) else key))
        raise ConfigError(message, source=self.doc.source, key=_dotted(path), line=self.doc.line(path))

    def has(self, key: str) -> bool:
        return key in self.data and self.data[key] is not None

    def sub(self, key: str) -> Reader:
        return Reader(self.doc, (*self.path, key), self.data.get(key))

    def reject_unknown(self, allowed: set[str] | tuple[str, ...]) -> None:
        for key in self.data:
            if key not in allowed:
                hint = _suggest(key, allowed)
                self.fail(key, f"unknown key{hint}")

    def _get(self, key: str, convert: Callable[[Any], T], required: bool, default: T, number: bool = False) -> T:
        if not self.has(key):
            if required:
                self.fail(key, "missing (required)")
            return default
        value = self.data[key]
        if number and self.doc.strict and isinstance(value, str):
            self.fail(key, f"expected a JSON number, got the string {value[:40]!r} (write it without quotes)")
        try:
            return convert(value)
        except (InputError, ValueError, TypeError, OverflowError) as e:
            self.fail(key, str(e))
        raise AssertionError  # unreachable: fail() raises

    def get_int(
        self,
        key: str,
        *,
        required: bool = False,
        default: Any = None,
        minimum: int = 1,
        maximum: int = limits.MAX_TOKENS,
    ) -> Any:
        return self._get(key, lambda v: _int(v, minimum, maximum), required, default, number=True)

    def get_tokens(self, key: str, *, required: bool = False, default: Any = None) -> Any:
        return self._get(key, _tokens, required, default, number=True)

    def get_bytes(
        self,
        key: str,
        *,
        required: bool = False,
        default: Any = None,
        minimum: int = 1,
        maximum: int = limits.MAX_GPU_BYTES,
    ) -> Any:
        return self._get(key, lambda v: _bytes(v, minimum, maximum), required, default)

    def get_fraction(self, key: str, *, default: Any = None) -> Any:
        return self._get(key, _fraction, False, default, number=True)

    def get_str(self, key: str, *, required: bool = False, default: Any = None) -> Any:
        return self._get(key, _str, required, default)

    def get_choice(self, key: str, choices: tuple[str, ...], *, default: Any = None) -> Any:
        return self._get(key, lambda v: _choice(v, choices), False, default)

    def get_bool(self, key: str, *, default: bool = False) -> bool:
        return bool(self._get(key, _bool, False, default, number=True))

    def get_str_list(self, key: str, choices: tuple[str, ...]) -> tuple[str, ...] | None:
        if not self.has(key):
            return None
        value = self.data[key]
        if not isinstance(value, list):
            self.fail(key, f"expected a list, got {_kind(value)}")
        for i, item in enumerate(value):
            if item not in choices:
                self.fail((key, i), f"expected one of {', '.join(choices)}, got {_show(item)}")
        return tuple(value)


def _kind(v: Any) -> str:
    if v is None:
        return "nothing"
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}.get(
        type(v), "a list" if isinstance(v, list) else "a mapping" if isinstance(v, dict) else "a value"
    )


def _show(v: Any) -> str:
    """repr of a value, cut to one short line (an input value can be 4 MB)."""
    if isinstance(v, int) and not isinstance(v, bool) and v.bit_length() > 100:
        return f"a {v.bit_length()}-bit integer"
    text = repr(v) if isinstance(v, str | int | float | bool) or v is None else _kind(v)
    return text if len(text) <= 60 else text[:57] + "…"


def _suggest(key: str, allowed: set[str] | tuple[str, ...]) -> str:
    close = difflib.get_close_matches(key, list(allowed), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _int(v: Any, minimum: int, maximum: int = limits.MAX_TOKENS) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"expected an integer, got {_kind(v)} {_show(v)}")
    if v < minimum:
        raise ValueError(f"expected an integer >= {minimum}, got {_show(v)}")
    if v > maximum:
        raise LimitError(f"{_show(v)} is above the largest value kvplan accepts here ({maximum:,})")
    return v


def _tokens(v: Any) -> int:
    if isinstance(v, bool | float):
        raise ValueError(f"expected a token count such as 131072 or 128K, got {_show(v)}")
    n = parse_tokens(v if isinstance(v, int) else str(v))
    if n <= 0:
        raise ValueError(f"expected a positive token count, got {_show(v)}")
    return n


def _bytes(v: Any, minimum: int, maximum: int = limits.MAX_GPU_BYTES) -> int:
    if isinstance(v, bool | int | float):
        raise ValueError(f"byte size {_show(v)} has no unit: write e.g. '{v}GiB' or '{v}GB'")
    if not isinstance(v, str):
        raise ValueError(f"expected a byte size such as 80GiB, got {_kind(v)}")
    n = parse_bytes(v)
    if n < minimum:
        floor = f"{minimum // MiB} MiB" if minimum >= MiB and minimum % MiB == 0 else f"{minimum} B"
        raise ValueError(f"expected a size of at least {floor}, got {_show(v)}")
    if n > maximum:
        raise LimitError(f"{_show(v)} is above kvplan's limit of {maximum // GiB:,} GiB for one GPU")
    return n


def _fraction(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float | str):
        raise ValueError(f"expected a fraction between 0 and 1, got {_show(v)}")
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise ValueError(f"expected a fraction between 0 and 1, got {_show(v)}") from None
    if not 0 < f <= 1:
        raise ValueError(f"expected a fraction in (0, 1], got {_show(v)}")
    return f


def _str(v: Any) -> str:
    if not isinstance(v, str) or not v.strip():
        raise ValueError(f"expected a non-empty string, got {_kind(v)}")
    return v.strip()


def _choice(v: Any, choices: tuple[str, ...]) -> str:
    s = str(v).strip().lower() if isinstance(v, str) else None
    if s not in choices:
        raise ValueError(f"expected one of {', '.join(choices)}, got {_show(v)}")
    return s


def _bool(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, int) and v in (0, 1):  # --set disable_radix_cache=1, an environment variable's 1
        return bool(v)
    if isinstance(v, str) and v.strip().lower() in ("true", "false", "yes", "no", "1", "0", "on", "off"):
        return v.strip().lower() in ("true", "yes", "1", "on")
    raise ValueError(f"expected true or false, got {_show(v)}")
