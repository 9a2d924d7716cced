"""Trace-driven simulation of the paged KV pool with prefix caching (pure; no torch, no numpy).

- ``trace``: streaming readers (Mooncake JSONL, kv-cache-tester JSON, Azure CSV, kvplan JSONL) and format detection.
- ``paging``: trace blocks -> engine pages (expand, coarsen or keep), said in words.
- ``ideal``: the published hit-rate semantics (trace-native blocks, leaf-LRU / block FIFO over a trie), the
  one-pass LRU stack-distance curve, and the reuse bound.
- ``radix``: SGLang's radix tree over pages (page-aligned matches, lock refs, leaf eviction by policy).
- ``blockpool``: vLLM's block pool (hash chain, null block, free queue, the length − 1 cap, the EAGLE drop).
- ``replay``: order mode (requests in trace order) and occupancy mode (arrivals, a service-time model) over
  either engine's pool.
- ``pool``: the running-sequence record and the protocol both engine pools follow.
- ``result``: integer tallies (hits, hit lengths, evictions, usage, occupancy), no floats.
- ``published``: the Mooncake paper's Figure 9 and Table 2 numbers, for checks and plot overlays.
- ``run``: what the CLI calls: capacities from text, one replay, a curve (one pass, one read, or one process per
  capacity).
"""
