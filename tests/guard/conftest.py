"""Shared fixtures: the softmax task, re-targeted at each DSL (cute/cuda have no built-in task yet)."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from harness.authoring.tasks import Task, load_task

CORPUS = Path(__file__).parent / "corpus"


@pytest.fixture(scope="session")
def softmax_task() -> Task:
    return load_task("softmax", check_null=False)


def retarget(task: Task, dsl: str) -> Task:
    """The same task with another required DSL (its rules packs minus the old dsl-* pack)."""
    return dataclasses.replace(task, dsl=dsl, rules=[r for r in task.rules if not r.startswith("dsl-")])


@pytest.fixture(scope="session")
def task_for(softmax_task):
    cache: dict[str, Task] = {}

    def get(dsl: str) -> Task:
        if dsl not in cache:
            cache[dsl] = retarget(softmax_task, dsl)
        return cache[dsl]

    return get
