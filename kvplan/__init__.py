"""kvplan: capacity planning for DSA models on SGLang and vLLM."""

__version__ = "0.1.0"
