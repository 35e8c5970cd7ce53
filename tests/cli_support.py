"""click's test runner as the tests read it: stdout and stderr apart, which click 8.2 and later
always keep and 8.1 (the lowest version the project supports) keeps when asked."""

from __future__ import annotations

from click.testing import CliRunner


def runner() -> CliRunner:
    try:
        return CliRunner(mix_stderr=False)  # type: ignore[call-arg]
    except TypeError:  # click 8.2+: no such argument, the streams are apart already
        return CliRunner()
