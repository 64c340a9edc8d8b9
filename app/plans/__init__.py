"""Plans: creation (resolve + lock), lifecycle, the plan-lock cache."""
