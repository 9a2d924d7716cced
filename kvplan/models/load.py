"""Config files -> ModelArch / Deployment / Gpu. The only module that imports yaml.

Every error names the file, the key path and, for YAML and JSON, the line:
``glm.yaml:12: config.num_hidden_layers: expected a positive integer, got -8``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from kvplan.errors import ConfigError, InputError
from kvplan.models.arch import IndexerRule, ModelArch, WeightPoint, full_indexer_layers
from kvplan.models.deploy import ENGINES, KNOBS, KV_CACHE_DTYPES, Deployment, Gpu, Requirements
from kvplan.models.formats import MlaLayout
from kvplan.models.weights import MoeShape, param_groups
from kvplan.units import parse_bytes, parse_concurrency, parse_percent_ppm, parse_tokens

SCHEMA_VERSION = 1
DEFAULT_DEPLOYMENT = "glm-5.3-8xh200-sglang"

T = TypeVar("T")
Path_ = tuple[str | int, ...]


# --------------------------------------------------------------------------- documents with lines


@dataclass(frozen=True)
class Doc:
    """Parsed data plus the line of every key path (1-based), for error messages."""

    data: Any
    source: str
    lines: Mapping[Path_, int] = field(default_factory=dict)

    def line(self, path: Path_) -> int | None:
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return self.lines.get((), None)


def _yaml() -> Any:
    import yaml

    return yaml


def _node_to_data(node: Any, path: Path_, lines: dict[Path_, int], source: str) -> Any:
    yaml = _yaml()
    lines[path] = node.start_mark.line + 1
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
            out[key] = _node_to_data(value_node, (*path, key), lines, source)
            lines[(*path, key)] = key_node.start_mark.line + 1
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_node_to_data(v, (*path, i), lines, source) for i, v in enumerate(node.value)]
    try:
        return _constructor().construct_object(node, deep=True)
    except (yaml.YAMLError, ValueError, TypeError) as e:
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ConfigError(
            f"cannot read a value: {problem}", source=source, key=_dotted(path), line=node.start_mark.line + 1
        ) from None


@lru_cache(maxsize=1)
def _constructor() -> Any:
    """YAML's own scalar typing (int, float, bool, null) for nodes the composer already tagged."""
    return _yaml().constructor.SafeConstructor()


def parse_text(text: str, source: str) -> Doc:
    yaml = _yaml()
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        node = yaml.compose(text, Loader=loader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ConfigError(
            f"not valid YAML/JSON: {problem}",
            source=source,
            line=mark.line + 1 if mark is not None else None,
        ) from None
    if node is None:
        raise ConfigError("the file is empty", source=source)
    lines: dict[Path_, int] = {}
    try:
        data = _node_to_data(node, (), lines, source)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ConfigError(
            f"cannot read a value: {problem}", source=source, line=mark.line + 1 if mark is not None else None
        ) from None
    except (ValueError, TypeError) as e:
        raise ConfigError(f"cannot read a value: {e}", source=source) from None
    except RecursionError:
        raise ConfigError("an alias refers to itself", source=source) from None
    return Doc(data, source, lines)


def read_file(path: Path) -> Doc:
    if path.is_dir() and (path / "config.json").is_file():
        path = path / "config.json"  # a Hugging Face snapshot folder
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, not a config file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: cannot read: {e}") from None
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ConfigError(f"not valid JSON: {e.msg}", source=str(path), line=e.lineno) from None
        try:
            doc = parse_text(text, str(path))  # JSON is YAML: reuse it for line numbers
        except ConfigError:
            return Doc(data, str(path))
        return Doc(data, str(path), doc.lines)
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

    def _get(self, key: str, convert: Callable[[Any], T], required: bool, default: T) -> T:
        if not self.has(key):
            if required:
                self.fail(key, "missing (required)")
            return default
        try:
            return convert(self.data[key])
        except (InputError, ValueError, TypeError) as e:
            self.fail(key, str(e))
        raise AssertionError  # unreachable: fail() raises

    def get_int(self, key: str, *, required: bool = False, default: Any = None, minimum: int = 1) -> Any:
        return self._get(key, lambda v: _int(v, minimum), required, default)

    def get_tokens(self, key: str, *, required: bool = False, default: Any = None) -> Any:
        return self._get(key, _tokens, required, default)

    def get_bytes(self, key: str, *, required: bool = False, default: Any = None, minimum: int = 1) -> Any:
        return self._get(key, lambda v: _bytes(v, minimum), required, default)

    def get_fraction(self, key: str, *, default: Any = None) -> Any:
        return self._get(key, _fraction, False, default)

    def get_str(self, key: str, *, required: bool = False, default: Any = None) -> Any:
        return self._get(key, _str, required, default)

    def get_choice(self, key: str, choices: tuple[str, ...], *, default: Any = None) -> Any:
        return self._get(key, lambda v: _choice(v, choices), False, default)

    def get_bool(self, key: str, *, default: bool = False) -> bool:
        return bool(self._get(key, _bool, False, default))

    def get_str_list(self, key: str, choices: tuple[str, ...]) -> tuple[str, ...] | None:
        if not self.has(key):
            return None
        value = self.data[key]
        if not isinstance(value, list):
            self.fail(key, f"expected a list, got {_kind(value)}")
        for i, item in enumerate(value):
            if item not in choices:
                self.fail((key, i), f"expected one of {', '.join(choices)}, got {item!r}")
        return tuple(value)


def _kind(v: Any) -> str:
    if v is None:
        return "nothing"
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}.get(
        type(v), "a list" if isinstance(v, list) else "a mapping" if isinstance(v, dict) else "a value"
    )


def _suggest(key: str, allowed: set[str] | tuple[str, ...]) -> str:
    import difflib

    close = difflib.get_close_matches(key, list(allowed), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _int(v: Any, minimum: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        if isinstance(v, str) and v.strip().lstrip("-").isdigit():
            v = int(v)
        else:
            raise ValueError(f"expected an integer, got {_kind(v)} {v!r}")
    if v < minimum:
        raise ValueError(f"expected an integer >= {minimum}, got {v}")
    return int(v)


def _tokens(v: Any) -> int:
    if isinstance(v, bool | float):
        raise ValueError(f"expected a token count such as 131072 or 128K, got {v!r}")
    n = parse_tokens(v if isinstance(v, int) else str(v))
    if n <= 0:
        raise ValueError(f"expected a positive token count, got {v!r}")
    return n


def _bytes(v: Any, minimum: int) -> int:
    if isinstance(v, bool | int | float):
        raise ValueError(f"byte size {v!r} has no unit: write e.g. '{v}GiB' or '{v}GB'")
    n = parse_bytes(str(v))
    if n < minimum:
        raise ValueError(f"expected a size of at least {minimum} B, got {v!r}")
    return n


def _fraction(v: Any) -> float:
    if isinstance(v, bool):
        raise ValueError(f"expected a fraction between 0 and 1, got {v!r}")
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise ValueError(f"expected a fraction between 0 and 1, got {v!r}") from None
    if not 0 < f <= 1:
        raise ValueError(f"expected a fraction in (0, 1], got {v!r}")
    return f


def _str(v: Any) -> str:
    if not isinstance(v, str) or not v.strip():
        raise ValueError(f"expected a non-empty string, got {_kind(v)}")
    return v.strip()


def _choice(v: Any, choices: tuple[str, ...]) -> str:
    s = str(v).strip().lower() if isinstance(v, str) else None
    if s not in choices:
        raise ValueError(f"expected one of {', '.join(choices)}, got {v!r}")
    return s


def _bool(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().lower() in ("true", "false", "yes", "no", "1", "0", "on", "off"):
        return v.strip().lower() in ("true", "yes", "1", "on")
    raise ValueError(f"expected true or false, got {v!r}")


# --------------------------------------------------------------------------- presets


def _configs() -> Any:
    return resources.files("kvplan") / "configs"


def preset_names(kind: str) -> list[str]:
    folder = _configs() / kind
    return sorted(p.name.rsplit(".", 1)[0] for p in folder.iterdir() if p.name.endswith(".yaml"))


def _preset_doc(kind: str, name: str) -> Doc:
    item = _configs() / kind / f"{name}.yaml"
    if not item.is_file():
        names = ", ".join(preset_names(kind))
        raise InputError(f"unknown {kind[:-1]} preset {name!r}: choose one of {names}, or give a file path")
    return parse_text(item.read_text(encoding="utf-8"), f"{kind}/{name}.yaml (built-in)")


def _resolve(kind: str, ref: str, base: Path | None = None) -> Doc:
    looks_like_path = any(ch in ref for ch in "/\\") or ref.endswith((".yaml", ".yml", ".json"))
    if looks_like_path:
        path = Path(ref)
        if base is not None and not path.is_absolute():
            path = base / path
        return read_file(path)
    return _preset_doc(kind, ref)


def _check_schema(r: Reader) -> None:
    version = r.get_int("schema_version", required=True)
    if version > SCHEMA_VERSION:
        r.fail("schema_version", f"this file needs a newer kvplan (schema {version} > {SCHEMA_VERSION})")


# --------------------------------------------------------------------------- models

_HF_KEYS = {
    "architectures", "model_type", "num_hidden_layers", "num_nextn_predict_layers", "hidden_size",
    "num_attention_heads", "num_key_value_heads", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim",
    "qk_rope_head_dim", "v_head_dim", "index_head_dim", "index_n_heads", "index_topk", "index_kpool",
    "indexer_types", "index_topk_pattern", "index_topk_freq", "index_skip_topk_offset",
    "first_k_dense_replace", "n_routed_experts", "n_shared_experts", "num_experts_per_tok",
    "moe_intermediate_size", "intermediate_size", "vocab_size", "tie_word_embeddings",
    "max_position_embeddings", "torch_dtype", "dtype", "quantization_config", "head_dim",
}  # fmt: skip
_MODEL_KEYS = {"schema_version", "name", "description", "source", "checkpoint_dtype", "config",
               "measured_weights"}  # fmt: skip


def load_model(ref: str) -> ModelArch:
    """A preset name, a kvplan model YAML, or a Hugging Face config.json."""
    doc = _resolve("models", ref)
    r = Reader(doc)
    if doc.source.endswith(".json") or "config" not in r.data:
        if not doc.source.endswith(".json"):
            r.fail("config", "missing: a model YAML has a 'config' section of Hugging Face fields")
        stem = Path(doc.source).parent.name or Path(doc.source).stem
        return _model_from_hf(r, name=stem, source=doc.source, strict=False, checkpoint_dtype=None)
    _check_schema(r)
    r.reject_unknown(_MODEL_KEYS)
    arch = _model_from_hf(
        r.sub("config"),
        name=r.get_str("name", required=True),
        source=doc.source,
        strict=True,
        checkpoint_dtype=r.get_choice("checkpoint_dtype", ("fp8", "nvfp4", "bf16", "fp16", "fp32")),
        description=r.get_str("description", default=""),
    )
    points = []
    if r.has("measured_weights"):
        items = r.data["measured_weights"]
        if not isinstance(items, list):
            r.fail("measured_weights", f"expected a list, got {_kind(items)}")
        for i in range(len(items)):
            p = Reader(doc, ("measured_weights", i), items[i])
            p.reject_unknown({"tp", "dp_attention", "ep", "bytes", "source"})
            points.append(
                WeightPoint(
                    tp=p.get_int("tp", required=True),
                    dp_attention=p.get_int("dp_attention", default=1),
                    ep=p.get_int("ep", default=1),
                    bytes=p.get_bytes("bytes", required=True),
                    source=p.get_str("source", required=True),
                )
            )
    from dataclasses import replace

    return replace(arch, measured_weights=tuple(points))


def _model_from_hf(
    r: Reader,
    *,
    name: str,
    source: str,
    strict: bool,
    checkpoint_dtype: str | None,
    description: str = "",
) -> ModelArch:
    if strict:
        r.reject_unknown(_HF_KEYS)
    num_layers = r.get_int("num_hidden_layers", required=True)
    kv_lora_rank = r.get_int("kv_lora_rank", required=True)
    rope = r.get_int("qk_rope_head_dim", required=True)
    archs = r.data.get("architectures") or ["unknown"]
    architecture = str(archs[0]) if isinstance(archs, list) and archs else str(archs)
    index_topk = r.get_int("index_topk", default=0, minimum=0)
    index_head_dim = r.get_int("index_head_dim", default=128 if index_topk else 0, minimum=0)
    flags: tuple[bool, ...] = ()
    rule = IndexerRule.NONE
    pattern = r.get_str("index_topk_pattern")
    freq = r.get_int("index_topk_freq", default=1)
    offset = r.get_int("index_skip_topk_offset", default=None, minimum=0)
    if index_topk:
        types = r.get_str_list("indexer_types", ("full", "shared"))
        if types is not None and len(types) != num_layers:
            r.fail("indexer_types", f"has {len(types)} entries for {num_layers} layers")
        if types is None and pattern is not None and (len(pattern) != num_layers or set(pattern) - {"F", "S"}):
            r.fail("index_topk_pattern", f"expected {num_layers} letters F or S")
        flags, rule = full_indexer_layers(
            num_layers,
            indexer_types=types,
            pattern=pattern,
            freq=freq,
            offset=offset,
        )
    if checkpoint_dtype is None:
        checkpoint_dtype = _checkpoint_dtype(r.data)
    hidden = r.get_int("hidden_size", default=0, minimum=0)
    groups: tuple[Any, ...] = ()
    if hidden:
        heads = r.get_int("num_attention_heads", required=True)
        shape = MoeShape(
            hidden_size=hidden,
            num_layers=num_layers,
            num_mtp_layers=r.get_int("num_nextn_predict_layers", default=0, minimum=0),
            num_attention_heads=heads,
            q_lora_rank=r.get_int("q_lora_rank", default=None),
            kv_lora_rank=kv_lora_rank,
            qk_nope_head_dim=r.get_int("qk_nope_head_dim", default=128),
            qk_rope_head_dim=rope,
            v_head_dim=r.get_int("v_head_dim", default=128),
            index_n_heads=r.get_int("index_n_heads", default=0, minimum=0),
            index_head_dim=index_head_dim,
            first_k_dense_replace=r.get_int("first_k_dense_replace", default=0, minimum=0),
            intermediate_size=r.get_int("intermediate_size", default=0, minimum=0),
            n_routed_experts=r.get_int("n_routed_experts", default=0, minimum=0),
            n_shared_experts=r.get_int("n_shared_experts", default=0, minimum=0),
            moe_intermediate_size=r.get_int("moe_intermediate_size", default=0, minimum=0),
            vocab_size=r.get_int("vocab_size", default=0, minimum=0),
            tie_word_embeddings=r.get_bool("tie_word_embeddings", default=False),
        )
        groups = param_groups(shape, checkpoint_dtype=checkpoint_dtype)
    return ModelArch(
        name=name,
        source=source,
        description=description,
        architecture=architecture,
        num_layers=num_layers,
        num_mtp_layers=r.get_int("num_nextn_predict_layers", default=0, minimum=0),
        kv_lora_rank=kv_lora_rank,
        qk_rope_head_dim=rope,
        max_position_embeddings=r.get_tokens("max_position_embeddings", required=True),
        index_head_dim=index_head_dim,
        index_n_heads=r.get_int("index_n_heads", default=0, minimum=0),
        index_topk=index_topk,
        index_kpool=r.get_int("index_kpool", default=1),
        indexer_full=flags,
        indexer_rule=rule,
        index_topk_freq=freq,
        index_skip_topk_offset=offset,
        index_topk_pattern=pattern,
        param_groups=groups,
    )


def _checkpoint_dtype(config: dict[str, Any]) -> str:
    """The linear layers' storage from ``quantization_config`` (fp8 / NVFP4), else ``torch_dtype``."""
    q = config.get("quantization_config")
    if isinstance(q, dict):
        text = json.dumps(q).lower()
        if "nvfp4" in text or "fp4" in str(q.get("quant_algo", "")).lower():
            return "nvfp4"
        if q.get("quant_method") == "fp8" or "fp8" in text or '"num_bits": 8' in text:
            return "fp8"
    dtype = str(config.get("torch_dtype") or config.get("dtype") or "bfloat16")
    return {"float32": "fp32", "float16": "fp16"}.get(dtype, "bf16")


# --------------------------------------------------------------------------- GPUs

_GPU_KEYS = {"name", "nvml_total", "cuda_total", "sm", "vendor", "hbm_bandwidth_per_s", "source"}


@lru_cache(maxsize=1)
def gpu_catalog() -> dict[str, Gpu]:
    doc = parse_text((_configs() / "gpus.yaml").read_text(encoding="utf-8"), "gpus.yaml (built-in)")
    r = Reader(doc)
    _check_schema(r)
    gpus = r.sub("gpus")
    return {key: _gpu(gpus.sub(key), key) for key in gpus.data}


def _gpu(r: Reader, key: str) -> Gpu:
    r.reject_unknown(_GPU_KEYS)
    return Gpu(
        key=key,
        name=r.get_str("name", required=True),
        nvml_total_bytes=r.get_bytes("nvml_total", required=True),
        cuda_total_bytes=r.get_bytes("cuda_total", required=True),
        sm=r.get_int("sm", default=0, minimum=0),
        vendor=r.get_choice("vendor", ("nvidia", "amd"), default="nvidia"),
        hbm_bandwidth_bytes_per_s=r.get_bytes("hbm_bandwidth_per_s", default=0, minimum=0),
        source=r.get_str("source", default=""),
    )


def find_gpu(name: str) -> Gpu:
    catalog = gpu_catalog()
    key = name.strip().lower().replace(" ", "-").replace("_", "-")
    if key in catalog:
        return catalog[key]
    for gpu in catalog.values():
        if gpu.name.lower() == name.strip().lower():
            return gpu
    raise InputError(f"unknown GPU {name!r}: choose one of {', '.join(catalog)}")


# --------------------------------------------------------------------------- deployments

ALIASES = {
    "tensor_parallel_size": "tp", "tp_size": "tp", "dcp_size": "dcp",
    "decode_context_parallel_size": "dcp", "dp": "dp_attention", "dp_size": "dp_attention",
    "ep_size": "ep", "pp_size": "pp", "max_model_len": "context_length", "block_size": "page_size",
    "max_num_seqs": "max_running_requests", "kv_cache_memory_bytes": "kv_cache_memory",
    "num_speculative_tokens": "speculative_num_draft_tokens", "version": "engine_version",
}  # fmt: skip
_DEPLOY_META = {"schema_version", "name", "description", "requirements"}


def _knob_values(r: Reader) -> Iterator[tuple[str, Any]]:
    """Each knob present in r, converted and checked."""
    ints = ("gpus_per_node", "nodes", "tp", "dp_attention", "ep", "pp", "dcp", "page_size",
            "chunked_prefill_size", "max_running_requests", "speculative_eagle_topk",
            "cuda_graph_max_bs")  # fmt: skip
    tokens = ("context_length", "max_num_batched_tokens", "max_total_tokens")
    for key in r.data:
        if key in _DEPLOY_META or r.data[key] is None:
            continue
        if key in ints:
            yield key, r.get_int(key)
        elif key in tokens:
            yield key, r.get_tokens(key)
        elif key in ("kv_cache_memory", "weights_per_gpu", "pre_load_free"):
            yield key, r.get_bytes(key)
        elif key in ("runtime_overhead", "non_kv_other"):
            yield key, r.get_bytes(key, minimum=0)
        elif key in ("mem_fraction_static", "gpu_memory_utilization"):
            yield key, r.get_fraction(key)
        elif key == "speculative_num_draft_tokens":
            yield key, r.get_int(key, minimum=0)
        elif key == "disable_cuda_graph":
            yield key, r.get_bool(key)
        elif key == "engine":
            yield key, r.get_choice(key, tuple(ENGINES))
        elif key == "kv_cache_dtype":
            yield key, r.get_choice(key, KV_CACHE_DTYPES)
        elif key == "mla_layout":
            yield key, r.get_choice(key, tuple(m.value for m in MlaLayout))
        elif key == "gpu":
            if isinstance(r.data[key], dict):
                yield key, _gpu(r.sub(key), "custom")
            else:
                name = r.get_str(key)
                try:
                    yield key, find_gpu(name)
                except InputError as e:
                    r.fail(key, str(e))
        elif key in ("model", "engine_version", "attention_backend"):
            yield key, str(r.get_str(key))
        else:
            r.fail(key, f"unknown key{_suggest(key, KNOBS)}")


def parse_set(items: list[str] | tuple[str, ...]) -> Doc:
    """`--set key=value` items as a Doc whose source is '--set'."""
    data: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise InputError(f"--set {item!r}: expected KEY=VALUE, e.g. --set dcp=8")
        key, value = (s.strip() for s in item.split("=", 1))
        key = ALIASES.get(key.replace("-", "_"), key.replace("-", "_"))
        if not value:
            raise InputError(f"--set {item!r}: empty value")
        if key in data:
            raise InputError(f"--set {key} given twice")
        data[key] = _scalar(value)
    return Doc(data, "--set")


def _scalar(text: str) -> Any:
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("null", "none", "default"):
        return None
    try:
        return int(text)
    except ValueError:
        return text  # fractions, sizes and versions ('0.5.23', '0.1') stay text for the typed readers


def load_deployment(ref: str | None, sets: list[str] | tuple[str, ...] = ()) -> Deployment:
    """A deployment preset or YAML file, with `--set` overrides applied on top."""
    doc = _resolve("deployments", ref or DEFAULT_DEPLOYMENT)
    r = Reader(doc)
    _check_schema(r)
    for key in list(r.data):
        if key in ALIASES:
            r.fail(key, f"write {ALIASES[key]!r} (kvplan's name for this knob)")
    values = dict(_knob_values(r))
    override = Reader(parse_set(sets))
    overridden = dict(_knob_values(override))
    cleared = {k for k, v in override.data.items() if v is None}
    values.update(overridden)
    for k in cleared:
        values.pop(k, None)
    for required in ("model", "engine", "gpu"):
        if required not in values:
            r.fail(required, "missing (required)")
    engine = values["engine"]
    if "engine" in overridden and "engine_version" not in overridden:
        values["engine_version"] = ENGINES[engine][0]  # switching engines takes the new engine's semantics
    version = values.setdefault("engine_version", ENGINES[engine][0])
    if version not in ENGINES[engine]:
        where = override if "engine_version" in overridden or "engine" in overridden else r
        where.fail("engine_version", f"{engine} {version} is not modelled: choose {', '.join(ENGINES[engine])}")
    dep = Deployment(
        name=r.get_str("name", default=Path(doc.source).stem) + (" (+ --set)" if sets else ""),
        source=doc.source,
        description=r.get_str("description", default=""),
        explicit=frozenset(values) - {"model", "engine", "gpu"},
        **values,
    )
    _check_layout(dep, r, override)
    return dep


def _check_layout(d: Deployment, file: Reader, override: Reader) -> None:
    """Cross-knob rules, blamed on --set when --set gave one of the knobs involved, else on the file."""

    def blame(*keys: str) -> Reader:
        return override if any(k in override.data for k in keys) else file

    if d.tp % d.dcp:
        blame("dcp", "tp").fail("dcp", f"dcp {d.dcp} must divide tp {d.tp}")
    if d.tp % d.dp_attention:
        blame("dp_attention", "tp").fail("dp_attention", f"dp_attention {d.dp_attention} must divide tp {d.tp}")
    if d.tp * d.pp > d.gpus_per_node * d.nodes:
        blame("tp", "pp", "nodes", "gpus_per_node").fail(
            "tp", f"tp {d.tp} × pp {d.pp} needs more GPUs than {d.nodes} node(s) × {d.gpus_per_node}"
        )


def load_requirements(ref: str) -> Requirements:
    """The `requirements:` section of a deployment file (empty when there is none)."""
    r = Reader(_resolve("deployments", ref))
    if not r.has("requirements"):
        return Requirements()
    q = r.sub("requirements")
    q.reject_unknown({"ctx", "concurrency", "max_capacity_drop"})
    concurrency: list[tuple[int, int]] = []
    if q.has("concurrency"):
        items = q.data["concurrency"]
        if not isinstance(items, list):
            items = [items]
        for i, item in enumerate(items):
            try:
                concurrency.append(parse_concurrency(str(item)))
            except InputError as e:
                q.fail(("concurrency", i), str(e))
    return Requirements(
        min_ctx_tokens=q.get_tokens("ctx"),
        concurrency=tuple(concurrency),
        max_capacity_drop_ppm=q._get("max_capacity_drop", lambda v: parse_percent_ppm(str(v)), False, None),
    )


def deployment_model_ref(d: Deployment) -> str:
    """The model reference of a deployment, relative paths taken from the deployment file's folder."""
    if d.source.endswith("(built-in)") or not any(c in d.model for c in "/\\"):
        return d.model
    path = Path(d.model)
    return str(path if path.is_absolute() else Path(d.source).parent / path)
