"""Known mistakes of topic `scheduler`: ``correct.py`` and one module per mistake."""
