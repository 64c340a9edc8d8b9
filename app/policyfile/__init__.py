"""Config as code: the policy document model and its YAML reader (toolgate apply/export)."""
