"""The decision core: pure Python, imports neither FastAPI nor SQLAlchemy.

Everything here takes plain values and returns plain values, so the same functions serve
the HTTP API, the `toolgate test` replayer and the benchmarks.
"""
