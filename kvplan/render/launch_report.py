"""A launch command as the user runs it: a shell script (table, markdown) or argv and env (json)."""

from __future__ import annotations

import json
import shlex
import sys
from typing import Any, TextIO

from kvplan.plan.launch import ENGINE_NAMES, PROGRAM, Launch
from kvplan.render import SCHEMA_VERSION, OutputFormat, size, write_out


def launch_data(launch: Launch) -> dict[str, Any]:
    return {
        "engine": launch.engine,
        "engine_version": launch.engine_version,
        "argv": list(launch.argv),
        "env": dict(launch.env),
        "shell": launch.shell,
        "notes": list(launch.notes),
        "kvplan_inputs_bytes": dict(launch.inputs),
        "flags_from": launch.source,
    }


def launch_text(launch: Launch) -> str:
    """Comment lines, then ``export VAR=...`` lines, then the command, one flag (and its value) a line."""
    lines = [f"# {ENGINE_NAMES[launch.engine]} {launch.engine_version} launch command written by kvplan "
             f"(flags: {launch.source})"]  # fmt: skip
    lines += [f"# {n}" for n in launch.notes]
    lines += [f"# {knob} {size(n)} is kvplan's input, not an engine flag" for knob, n in launch.inputs]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in launch.env]
    argv = list(launch.argv)
    head = len(PROGRAM[launch.engine]) + (launch.engine == "vllm")  # the program, and vllm serve's MODEL
    parts = [shlex.join(argv[:head])]
    i = head
    while i < len(argv):  # one flag a line, with the values that follow it
        j = i + 1
        while j < len(argv) and not argv[j].startswith("--"):
            j += 1
        parts.append(shlex.join(argv[i:j]))
        i = j
    lines.append(" \\\n    ".join(parts))
    return "\n".join(lines) + "\n"


def emit_launch(launch: Launch, command: str, fmt: OutputFormat, out: TextIO | None = None) -> None:
    """Print the launch command; a reader that went away (``| head -1``) is not an error (as render.emit)."""
    stream = out or sys.stdout
    if fmt is OutputFormat.json:
        payload = {"schema_version": SCHEMA_VERSION, "command": command, "launch": launch_data(launch)}
        text = json.dumps(payload, indent=2, sort_keys=True) + "\n"
    elif fmt is OutputFormat.markdown:
        text = f"```sh\n{launch_text(launch)}```\n"
    else:
        text = launch_text(launch)

    def draw() -> None:
        stream.write(text)

    write_out(draw, stream)
