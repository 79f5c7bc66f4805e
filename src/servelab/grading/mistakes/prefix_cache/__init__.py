"""Known mistakes of topic `prefix-cache`: ``correct.py`` and one module per mistake."""
