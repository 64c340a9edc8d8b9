"""Operations: GET /metrics, and the API docs (/docs, /redoc) served offline."""
