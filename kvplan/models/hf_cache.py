"""The local Hugging Face cache: where it is, and a repo id to the snapshot folder its ``refs/main`` names."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from kvplan import limits
from kvplan.errors import InputError

_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")


def hf_cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """The hub cache as huggingface_hub finds it: HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub."""
    env = os.environ if env is None else env
    if env.get("HF_HUB_CACHE"):
        return Path(env["HF_HUB_CACHE"]).expanduser()
    if env.get("HF_HOME"):
        return Path(env["HF_HOME"]).expanduser() / "hub"
    base = Path(env["XDG_CACHE_HOME"]).expanduser() if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return base / "huggingface" / "hub"


def resolve_repo_id(ref: str, env: Mapping[str, str] | None = None) -> Path | None:
    """The snapshot folder of a repo id (``ORG/NAME``) in the local Hugging Face cache, or None.

    Never touches the network: ``models--ORG--NAME/refs/main`` names the revision when present, else the only
    snapshot (several snapshots and no ``refs/main`` is ambiguous: an error naming them).
    """
    if not _REPO_ID.match(ref) or ".." in ref:
        return None
    org, name = ref.split("/")
    repo = hf_cache_dir(env) / f"models--{org}--{name}"
    snaps = repo / "snapshots"
    try:
        if not snaps.is_dir():
            return None
        ref_file = repo / "refs" / "main"
        if ref_file.is_file():
            rev = limits.read_text(ref_file, limits.CONFIG, "Hugging Face cache ref").strip()
            if re.fullmatch(r"[0-9a-f]{40}", rev) and (snaps / rev).is_dir():
                return snaps / rev
        revs = sorted(p for p in snaps.iterdir() if p.is_dir())
    except OSError as e:
        raise InputError(f"Hugging Face cache {repo}: cannot read: {e.strerror or e}") from None
    if len(revs) == 1:
        return revs[0]
    if len(revs) > 1:
        shown = ", ".join(p.name[:12] for p in revs[:4])
        raise InputError(
            f"Hugging Face cache {repo}: {len(revs)} snapshots ({shown}) and no refs/main; give the snapshot folder"
        )
    return None
