"""The version of skillruntime-openai-agents: the one place it is set (read by the build)."""

__version__ = "0.1.0"
