"""WHAT is served (architecture, cache formats) and HOW (deployment): pure data plus the loader."""
