"""Call rules (SPEC §18): storage, the API and the compiled rule set decisions read."""
