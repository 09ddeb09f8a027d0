"""The run's primitives a step builds on: sleeps, waits, markers, budgets, reservations,
patches, the clock (private: import from ``letitloop``).
"""
