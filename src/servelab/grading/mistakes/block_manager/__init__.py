"""Known mistakes of topic `block-manager`: ``correct.py`` and one module per mistake."""
