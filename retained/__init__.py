"""retained: memory for coding agents whose writes are provable."""

__version__ = "0.1.0"
