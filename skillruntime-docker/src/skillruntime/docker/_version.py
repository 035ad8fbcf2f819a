"""The version of skillruntime-docker: the one place it is set (read by the build)."""

__version__ = "0.1.0"
