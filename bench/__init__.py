"""Benchmarks (`make bench`): load runs against uvicorn on loopback, and in-process timings
of the policy core. Every figure printed is measured in the same run; see
docs/performance.md."""
