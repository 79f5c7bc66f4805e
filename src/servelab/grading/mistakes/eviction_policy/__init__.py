"""Known mistakes of topic `eviction-policy`: ``correct.py`` and one module per mistake."""
