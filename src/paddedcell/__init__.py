"""PaddedCell: agents use secrets without seeing them, and restart safely."""

__version__ = "0.1.0"
