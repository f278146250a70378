"""ibdiag: InfiniBand health check and support-bundle collector for GPU/HPC nodes."""

__version__ = "0.1.0"
