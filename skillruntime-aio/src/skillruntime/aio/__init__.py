"""AIO Sandbox runtime: skills in a running AIO Sandbox service over its HTTP API (to come)."""
