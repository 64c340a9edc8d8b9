"""The durable decision log: group-commit writer, hash chain, queries, export, verify."""
