"""What makes a call the same call: fingerprints, step keys, canonical values, names and
ids (private: import from ``letitloop``).
"""
