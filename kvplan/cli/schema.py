"""``kvplan schema COMMAND``: the JSON Schema of a command's ``--format json`` output, as shipped in kvplan/schemas."""

from __future__ import annotations

import sys
from importlib import resources
from typing import Annotated

import typer

from kvplan.cli._common import boundary
from kvplan.errors import InputError

ALIASES = {"models list": "models", "deployments list": "deployments"}
"""The list commands' JSON says "command": "models" / "deployments"; their schemas carry that name."""


def schema_names() -> list[str]:
    """Every command with a shipped schema, as ``kvplan schema`` takes it ('models show', not models-show.json)."""
    files = resources.files("kvplan") / "schemas"
    return sorted(f.name[: -len(".json")].replace("-", " ") for f in files.iterdir() if f.name.endswith(".json"))


def schema_text(command: str) -> str:
    """The schema of ``command`` ('admit', 'models show' or models-show, 'models list'), or an InputError naming
    the commands that have one."""
    name = " ".join(command.replace("-", " ").split())
    name = ALIASES.get(name, name)
    if name not in schema_names():
        shown = ", ".join(schema_names())
        raise InputError(f"schema {command[:60]!r}: no schema for that command; kvplan ships one for: {shown}")
    return (resources.files("kvplan") / "schemas" / f"{name.replace(' ', '-')}.json").read_text(encoding="utf-8")


def schema(
    command: Annotated[
        str, typer.Argument(help="A command: admit, fit, gate, doctor, 'models show', …", metavar="COMMAND")
    ],
) -> None:
    """Print the JSON Schema (draft 2020-12) of COMMAND's --format json output (its error document included).

    Example: kvplan schema admit > admit.schema.json
    """
    with boundary():
        sys.stdout.write(schema_text(command))
