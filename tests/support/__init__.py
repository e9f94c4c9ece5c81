"""Helpers shared by the test suites: real processes on loopback, config builders, SSE parsing."""
