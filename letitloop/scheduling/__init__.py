"""Schedules: a durable function's runs started by a cron expression, once per tick, and
the scheduler that claims and starts them (private: import from ``letitloop``).
"""
