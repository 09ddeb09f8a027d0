"""The SQLite store: the journal file, its connections, lock files, migrations, and
``SqliteStorage`` (private).
"""
