"""kvplan: capacity planning for DSA models on SGLang and vLLM."""

import sys as _sys

__version__ = "0.1.0"
DIST = "kvplan-dsa"
"""The distribution name on the package index (`pip install kvplan-dsa`); the command and import stay `kvplan`."""

if "kvplan._interrupt" not in _sys.modules:  # the command's Ctrl-C handler, before any heavy import
    from kvplan import _interrupt

    if _interrupt.is_the_command():
        _interrupt.install()
