"""Fixtures shared by the study tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from juice import studies
from tests.studies.toy import Toy


@pytest.fixture
def toy() -> Iterator[Toy]:
    """The worked example of a study (tests/studies/toy.py), registered for the test."""
    study = Toy()
    studies.register(study)
    yield study
    studies.unregister(study.name)
