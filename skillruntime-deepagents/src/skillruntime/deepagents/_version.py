"""The version of skillruntime-deepagents: the one place it is set (read by the build)."""

__version__ = "0.1.0"
