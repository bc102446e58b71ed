"""tracekit: which communicator, which path, how much pure communication, how far from the bound."""

__version__ = "0.1.0"
