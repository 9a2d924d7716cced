"""The fuzz suite (issue 10): every reader of untrusted input, driven by hypothesis.

Each test asserts the one contract for untrusted input: exit 0/1/2 with at most one error line, never a
traceback, within a time budget. Default runs are a few seconds; `pytest --fuzz-long` runs 2,000 examples
per test.
"""
