"""Runbooks: engine startup-log parsers (``parse``) and the doctor's checks (``doctor``), both pure.

``parse`` turns the text of an SGLang or vLLM server log into frozen dataclasses (one ``Run`` per server
start found in the file); ``doctor`` rebuilds the pool the deployment implies, once from the config and once
from the memory figures the log reports, and explains any gap with the known causes.
"""
