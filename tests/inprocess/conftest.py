"""Fixtures for the in-process helper's tests: real servers, started once per module that uses them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from inprocess_harness import Host


@pytest.fixture(scope="module")
def host() -> Iterator[Host]:
    """Model, resources and one server per test agent, under uvicorn on 127.0.0.1. Stopped with
    the module: the servers' thread must not outlive it into tests that fork (flake8's jobs), which
    Python 3.12+ warns may deadlock."""
    servers = Host()
    servers.start()
    yield servers
    servers.stop()
