"""Known mistakes of topic `weight-cache`: ``correct.py`` and one module per mistake."""
