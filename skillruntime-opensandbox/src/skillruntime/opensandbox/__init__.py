"""OpenSandbox runtime: per-conversation sandboxes on the official ``opensandbox`` SDK (to come)."""
