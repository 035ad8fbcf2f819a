"""Observability: audit events and OpenTelemetry spans of every operation."""
