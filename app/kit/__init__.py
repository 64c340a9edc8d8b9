"""Plumbing shared by features: common dependencies, the caller, canonical digests,
metrics, singleflight, notify, wire-schema building blocks. Imports no feature (the error
envelope and the HTTP edge are app/edge)."""
