"""A repo id to its snapshot in the local Hugging Face cache (kvplan/models/hf_cache.py ``resolve_repo_id``),
pinned where the mutation check moves it. The layout is huggingface_hub's (``file_download.py``:
``models--ORG--NAME/snapshots/<40-hex commit>/`` and ``refs/main`` holding the commit of ``main``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvplan.errors import InputError
from kvplan.models.hf_cache import resolve_repo_id


def _snapshot(hub: Path, repo: str, rev: str) -> Path:
    org, name = repo.split("/")
    snap = hub / f"models--{org}--{name}" / "snapshots" / rev
    snap.mkdir(parents=True)
    (snap / "config.json").write_text("{}")
    return snap


def test_dot_dot_in_a_repo_id_never_reaches_a_path(tmp_path: Path) -> None:
    # 'org/na..me' passes the character class but holds '..': refused even where such a folder exists
    _snapshot(tmp_path / "hub", "org/na..me", "a" * 40)
    assert resolve_repo_id("org/na..me", {"HF_HOME": str(tmp_path)}) is None


def test_refs_main_naming_a_missing_snapshot_falls_back_to_the_only_one(tmp_path: Path) -> None:
    # refs/main names a commit whose snapshot is not downloaded: the one snapshot there is the answer
    one = _snapshot(tmp_path / "hub", "org/m", "c" * 40)
    refs = tmp_path / "hub" / "models--org--m" / "refs"
    refs.mkdir()
    (refs / "main").write_text("d" * 40 + "\n")
    assert resolve_repo_id("org/m", {"HF_HOME": str(tmp_path)}) == one
    (refs / "main").write_text("main\n")  # not a commit hash: the listing decides too
    assert resolve_repo_id("org/m", {"HF_HOME": str(tmp_path)}) == one


def test_no_snapshot_is_none(tmp_path: Path) -> None:
    (tmp_path / "hub" / "models--org--m" / "snapshots").mkdir(parents=True)
    assert resolve_repo_id("org/m", {"HF_HOME": str(tmp_path)}) is None


def test_several_snapshots_are_named_four_at_most_by_12_characters(tmp_path: Path) -> None:
    revs = [c * 40 for c in "abcde"]
    for rev in revs:
        _snapshot(tmp_path / "hub", "org/m", rev)
    with pytest.raises(InputError) as e:
        resolve_repo_id("org/m", {"HF_HOME": str(tmp_path)})
    shown = ", ".join(r[:12] for r in revs[:4])  # aaaaaaaaaaaa, ..., dddddddddddd: the short hashes git prints
    assert f"5 snapshots ({shown}) and no refs/main; give the snapshot folder" in str(e.value)


def test_an_unreadable_cache_says_the_os_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _snapshot(tmp_path / "hub", "org/m", "a" * 40)

    def denied(self: Path) -> object:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "iterdir", denied)
    with pytest.raises(InputError) as e:
        resolve_repo_id("org/m", {"HF_HOME": str(tmp_path)})
    assert str(e.value).endswith("models--org--m: cannot read: Permission denied")
