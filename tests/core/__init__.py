"""Acceptance tests for the capture core (public API only)."""
