"""SARIF 2.1.0 for GitHub code scanning and other SARIF viewers: rules from the registry, evidence as
related locations, fingerprints that survive line shifts, unreadable inputs as tool notifications."""

from __future__ import annotations

import json
from urllib.parse import quote

from .. import __version__
from ..ftypes import Report
from ..rules import FINDING_CODES, RULES, UNREADABLE, Rule
from .baseline import fingerprints
from .messages import message, note

SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
SRCROOT = "%SRCROOT%"
FINGERPRINT_KEY = "selfcallAudit/v1"
ERROR_CODE = UNREADABLE


def _level(code: str) -> str:
    return RULES[code].severity


def _help_markdown(rule: Rule) -> str:
    return "\n".join(
        [
            rule.explanation,
            "",
            "Example:",
            "",
            "```python",
            rule.bad,
            "```",
            "",
            "Instead:",
            "",
            "```python",
            rule.good,
            "```",
        ]
    )


def _descriptor(rule: Rule) -> dict:
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": rule.explanation},
        "help": {
            "text": f"{rule.explanation}\n\nExample:\n{rule.bad}\n\nInstead:\n{rule.good}",
            "markdown": _help_markdown(rule),
        },
        "defaultConfiguration": {"enabled": rule.default_on, "level": _level(rule.code)},
        "properties": {
            "tags": ["performance", "maintainability"],
            "precision": rule.precision,
            "problem.severity": rule.severity,
        },
    }


def _artifact(path: str) -> dict:
    return {"uri": quote(path, errors="surrogateescape"), "uriBaseId": SRCROOT}  # a non-UTF-8 name: its bytes


def as_dict(report: Report) -> dict:
    rule_index = {code: number for number, code in enumerate(FINDING_CODES)}
    results = []
    for finding, fingerprint in zip(report.findings, fingerprints(report), strict=True):
        results.append(
            {
                "ruleId": finding.code,
                "ruleIndex": rule_index[finding.code],
                "level": _level(finding.code),
                "message": {"text": message(finding)},
                "locations": [
                    {
                        "physicalLocation": {
                            "artifactLocation": _artifact(finding.path),
                            "region": {
                                "startLine": finding.line,
                                "startColumn": finding.column,
                                "endLine": finding.end_line,
                                "endColumn": finding.end_column,
                            },
                        }
                    }
                ],
                "relatedLocations": [
                    {
                        "id": number,
                        "physicalLocation": {
                            "artifactLocation": _artifact(evidence.path),
                            "region": {"startLine": evidence.line},
                        },
                        "message": {"text": note(evidence)},
                    }
                    for number, evidence in enumerate(finding.evidence, start=1)
                ],
                "partialFingerprints": {FINGERPRINT_KEY: fingerprint},
                "properties": {"agent": finding.agent, "method": finding.method, "fixable": finding.fixable},
            }
        )
    notifications = [
        {
            "descriptor": {"id": error.code, "index": 0},
            "level": error.severity,
            "message": {"text": error.message},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": _artifact(error.path),
                        "region": {"startLine": error.line, "startColumn": error.column},
                    }
                }
            ],
        }
        for error in report.errors
    ]
    driver = {
        "name": "selfcall-audit",
        "version": __version__,
        "semanticVersion": __version__,
        "rules": [_descriptor(RULES[code]) for code in FINDING_CODES],
        "notifications": [_descriptor(RULES[ERROR_CODE])],
    }
    return {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": driver},
                "originalUriBaseIds": {SRCROOT: {"uri": report.root.as_uri() + "/"}},
                "columnKind": "unicodeCodePoints",
                "invocations": [{"executionSuccessful": True, "toolExecutionNotifications": notifications}],
                "results": results,
            }
        ],
    }


def render(report: Report) -> str:
    return json.dumps(as_dict(report), indent=2) + "\n"
