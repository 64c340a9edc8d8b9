"""The floor every feature records through: the hash-chained decision log (records, chain,
tables, the group-commit writer and `append` inside a request's transaction, audit of
changes). Imports no feature."""
