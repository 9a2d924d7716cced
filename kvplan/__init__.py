"""kvplan: KV-cache capacity planning for LLM serving on SGLang and vLLM."""

import sys as _sys

__version__ = "0.1.0"
DIST = "kvplan-llm"
"""The distribution name on the package index (`pip install kvplan-llm`); the command and import stay `kvplan`.
It was kvplan-dsa, which read as "DSA only" for a tool that plans every attention family."""

if "kvplan._interrupt" not in _sys.modules:  # the command's Ctrl-C handler, before any heavy import
    from kvplan import _interrupt

    if _interrupt.is_the_command():
        _interrupt.install()
