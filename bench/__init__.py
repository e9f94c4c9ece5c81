"""The benchmark harness: `make bench` (see bench/README.md)."""
