"""Plumbing shared by features: error envelope and handlers, middleware, common
dependencies, singleflight, notify. Imports no feature."""
