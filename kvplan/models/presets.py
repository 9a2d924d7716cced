"""Preset names and their resolution: a name or a path to the document it names, read through kvplan.models.reader
(the one module that imports yaml).

Every error names the file, the key path and, for YAML and JSON, the line:
``glm.yaml:12: config.num_hidden_layers: expected a positive integer, got -8``."""

from __future__ import annotations

import re
from pathlib import Path

from kvplan.errors import InputError
from kvplan.models.preset_cache import builtin_doc
from kvplan.models.preset_repos import PRESET_ALIASES, canonical_preset
from kvplan.models.reader import Doc, Reader, _show, read_file

SCHEMA_VERSION = 1
DEFAULT_DEPLOYMENT = "glm-5.3-8xh200-sglang"


_PRESET_NAME = re.compile(r"^[a-z0-9][a-z0-9._+-]{0,99}$")


def configs_root() -> Path:
    """The shipped presets' folder: what ``importlib.resources.files("kvplan") / "configs"`` names for kvplan's
    regular package, without importing importlib.resources (zipfile, tempfile: ~3 ms of every start)."""
    return Path(__file__).parent.parent / "configs"


def preset_names(kind: str) -> list[str]:
    folder = configs_root() / kind
    return sorted(p.name.rsplit(".", 1)[0] for p in folder.iterdir() if p.name.endswith(".yaml"))


def _preset_doc(kind: str, name: str) -> Doc:
    """A built-in preset by name, case-insensitively (``GLM-5.3`` is ``glm-5.3``)."""
    key = canonical_preset(name) if kind == "models" else name.strip().lower()
    if _PRESET_NAME.match(key) and key in preset_names(kind):
        return builtin_doc(configs_root(), f"{kind}/{key}.yaml", f"{kind}/{key}.yaml (built-in)")
    names = ", ".join(sorted([*preset_names(kind), *(PRESET_ALIASES if kind == "models" else ())]))
    raise InputError(f"unknown {kind[:-1]} preset {_show(name)}: choose one of {names}, or give a file path")


def resolve_preset(kind: str, ref: str, base: Path | None = None) -> Doc:
    if not ref.strip():
        option = "--model" if kind == "models" else "--deploy"
        raise InputError(f"{option} is empty: give a {kind[:-1]} preset name or a file path")
    looks_like_path = any(ch in ref for ch in "/\\") or ref.endswith((".yaml", ".yml", ".json"))
    if not looks_like_path and canonical_preset(ref) not in preset_names(kind):
        try:
            looks_like_path = Path(ref).exists()  # a snapshot folder or file in the working directory
        except OSError:
            looks_like_path = False
    if looks_like_path:
        path = Path(ref)
        if base is not None and not path.is_absolute():
            path = base / path
        return read_file(path)
    return _preset_doc(kind, ref)


def check_schema(r: Reader, *, required: bool = True) -> None:
    version = r.get_int("schema_version", required=required, default=SCHEMA_VERSION)
    if version > SCHEMA_VERSION:
        r.fail("schema_version", f"this file needs a newer kvplan (schema {version} > {SCHEMA_VERSION})")
