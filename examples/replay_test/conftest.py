"""Makes ``import triage`` work from tests/ (the example has no package of its own)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
