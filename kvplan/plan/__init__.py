"""The questions kvplan answers (pure)."""
