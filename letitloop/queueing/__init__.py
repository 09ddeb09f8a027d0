"""Work queues: runs enqueued with limits and priorities, claimed by workers that take over
a dead worker's runs at once (private: import from ``letitloop``).
"""
