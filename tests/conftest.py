"""Shared pytest set-up: a deterministic hypothesis profile for CI and local runs."""

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "default",
    deadline=None,
    derandomize=True,
    max_examples=60,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("thorough", deadline=None, max_examples=1000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

# Generator scripts, not tests: they import torch / TensorFlow (make goldens runs them).
collect_ignore_glob = ["golden/make_*.py", "conformance/make_*.py"]
