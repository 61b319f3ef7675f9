"""Shared fixtures: one quorum communicator per process (every test on every
rank runs in the same order, so the collectives match up)."""
import pytest

import quorum


@pytest.fixture(scope="session")
def comm():
    c = quorum.init()
    yield c
    c.finalize()
