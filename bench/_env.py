"""What every benchmark sets before it imports the project, and the percentile they report."""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "server.settings")
os.environ.setdefault("LOG_LEVEL", "WARNING")
# Benchmarks serve nobody: a throw-away key when none is set (DATABASE_URL makes one required).
os.environ.setdefault("SECRET_KEY", "benchmark-only-not-secret")


def percentile(values, q):
    """The q-quantile of values (nearest rank); NaN for none."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
