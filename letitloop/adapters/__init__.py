"""Framework integrations, one module each, imported only by the user (never by the core)."""
