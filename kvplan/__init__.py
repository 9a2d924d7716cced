"""kvplan: capacity planning for DSA models on SGLang and vLLM."""

__version__ = "0.1.0"
DIST = "kvplan-dsa"
"""The distribution name on the package index (`pip install kvplan-dsa`); the command and import stay `kvplan`."""
