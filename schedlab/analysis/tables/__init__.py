"""Each paper's tables, one module per paper (``saturn``, ...)."""
