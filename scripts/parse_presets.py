"""Write kvplan/configs/parsed/: each shipped YAML preset parsed once, as JSON (kvplan.models.preset_cache).

    python scripts/parse_presets.py           # rewrite every entry, drop entries with no YAML
    python scripts/parse_presets.py --check   # exit 1 when an entry is missing, stale or left over

Run it after editing, adding or removing a file under kvplan/configs/ (tests/models/test_preset_cache.py fails
until then; kvplan itself reads a stale entry's YAML, so it is only slower).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kvplan.models.preset_cache import PARSED, entry_path, entry_text  # noqa: E402 (this checkout first)
from kvplan.models.presets import configs_root  # noqa: E402
from kvplan.models.reader import parse_text  # noqa: E402


def wanted(root: Path) -> dict[Path, str]:
    """Each entry's path -> its text, for every YAML file under ``root`` (not under parsed/)."""
    out: dict[Path, str] = {}
    for yaml_file in sorted(root.rglob("*.yaml")):
        relative = yaml_file.relative_to(root).as_posix()
        if relative.startswith(f"{PARSED}/"):
            continue
        text = yaml_file.read_text(encoding="utf-8")
        doc = parse_text(text, f"{relative} (built-in)")
        out[entry_path(root, relative)] = entry_text(doc, text)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 when an entry is not fresh")
    args = parser.parse_args(argv)
    root = configs_root()
    entries = wanted(root)
    extra = sorted(set((root / PARSED).rglob("*.json")) - set(entries))
    stale = [p for p, text in entries.items() if not p.is_file() or p.read_text(encoding="utf-8") != text]
    if args.check:
        for p in [*stale, *extra]:
            print(f"{p.relative_to(ROOT)}: {'left over' if p in extra else 'missing or stale'}")
        return 1 if stale or extra else 0
    for p in stale:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(entries[p], encoding="utf-8")
    for p in extra:
        p.unlink()
    print(f"{len(stale)} written, {len(extra)} removed, {len(entries)} entries")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
