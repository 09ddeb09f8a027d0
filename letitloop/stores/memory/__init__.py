"""The in-memory store (``memory://NAME``), for tests: ``MemoryStorage`` (private)."""
