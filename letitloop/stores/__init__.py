"""Where runs are kept: the storage protocols the run speaks to, the registry that picks a
store by its path, and one folder per store (private: import from ``letitloop``).
"""
