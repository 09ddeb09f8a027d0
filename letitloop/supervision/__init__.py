"""A program as processes: the supervisor of ``lil watch`` and ``@supervise``, its restart
policy, its record, control from outside (private: import from ``letitloop``).
"""
