"""Safety profiles, the global configuration, projects and actions."""
