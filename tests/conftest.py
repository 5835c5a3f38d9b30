import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the scripts at the repository root
sys.path.insert(0, str(Path(__file__).resolve().parent))

from hypothesis import settings

# CI replays the same examples every run: a red build is never a coin flip.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")
