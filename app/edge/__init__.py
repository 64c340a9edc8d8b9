"""The HTTP edge: limits on a request's head and body, JSON routes, middleware, request
ids and logs, the one error envelope and its handlers, the envelope in OpenAPI. Imports
no feature."""
