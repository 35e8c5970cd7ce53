"""Fixtures for the in-process helper's tests: real servers, started once per session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from inprocess_harness import Host


@pytest.fixture(scope="session")
def host() -> Iterator[Host]:
    """Model, resources and one server per test agent, under uvicorn on 127.0.0.1."""
    servers = Host()
    servers.start()
    yield servers
    servers.stop()
