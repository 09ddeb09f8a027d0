"""The PostgreSQL store (``postgresql://…``): ``PostgresStorage`` (private)."""
