"""Fixtures for the kernel-to-model tests (helpers in model_helpers.py)."""
import pytest

from harness.authoring.tasks import load_task
from model_helpers import bucketed_softmax


@pytest.fixture
def task(tmp_path):
    return load_task(bucketed_softmax(tmp_path))
