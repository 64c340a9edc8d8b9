"""Storage: SQLAlchemy 2.x tables and repositories. All SQL lives here."""
