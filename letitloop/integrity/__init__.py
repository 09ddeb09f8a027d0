"""What proves a journal's rows whole and untampered: checksums, the sealed chain,
encryption at rest, redaction (private: import from ``letitloop``).
"""
