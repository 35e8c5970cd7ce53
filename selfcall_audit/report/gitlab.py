"""GitLab code quality (`artifacts: reports: codequality`): a JSON list of issues, each with a
description, a check name, a fingerprint unique in the report, a severity, and the file and line
(relative to the repository, as GitLab shows them in merge requests)."""

from __future__ import annotations

import hashlib
import json

from ..ftypes import Report
from ..rules import RULES
from .baseline import fingerprints
from .escape import neutralise
from .messages import message

_SEVERITY = {"error": "major", "warning": "minor"}  # the registry's, in GitLab's words
_UNREADABLE = "critical"  # a file the scan could not read may hide any finding


def as_list(report: Report) -> list[dict]:
    issues = [
        {
            "description": neutralise(f"{f.code} {message(f)}"),
            "check_name": f.code,
            "fingerprint": fingerprint,
            "severity": _SEVERITY[RULES[f.code].severity],
            "location": {"path": neutralise(f.path), "lines": {"begin": f.line, "end": f.end_line}},
        }
        for f, fingerprint in zip(report.findings, fingerprints(report), strict=True)
    ]
    for error in report.errors:
        identity = "\0".join((error.code, error.path, error.message))
        issues.append(
            {
                "description": neutralise(f"{error.code} {error.message}"),
                "check_name": error.code,
                "fingerprint": hashlib.sha256(identity.encode("utf-8", "surrogateescape")).hexdigest()[:20],
                "severity": _UNREADABLE,
                "location": {"path": neutralise(error.path), "lines": {"begin": error.position[0]}},
            }
        )
    return issues


def render(report: Report) -> str:
    return json.dumps(as_list(report), indent=2) + "\n"
