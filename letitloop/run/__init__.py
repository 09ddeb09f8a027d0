"""One run in one process: the journal, its opening and closing, its steps, replay,
retries, cancellation, the decorators (private: import from ``letitloop``).
"""
