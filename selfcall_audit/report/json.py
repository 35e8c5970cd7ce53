"""The JSON report: its keys and shapes are a contract relied on by users' CI (extend, never break)."""

from __future__ import annotations

import json

from ..ftypes import Report
from .messages import message, note


def as_dict(report: Report) -> dict:
    return {
        "version": 1,
        "root": str(report.root),
        "findings": [
            {
                "code": f.code,
                "path": f.path,
                "line": f.line,
                "column": f.column,
                "end_line": f.end_line,
                "end_column": f.end_column,
                "message": message(f),
                "agent": f.agent,
                "method": f.method,
                "fixable": f.fixable,
                "evidence": [{"path": e.path, "line": e.line, "note": note(e)} for e in f.evidence],
                **({"limit": f.limit} if f.limit else {}),
            }
            for f in report.findings
        ],
        "errors": [
            {
                "code": e.code,
                "path": e.path,
                "message": e.message,
                "line": e.line,
                "column": e.column,
                "severity": e.severity,
            }
            for e in report.errors
        ],
        "summary": {
            "files_scanned": report.files_scanned,
            "files_parsed": report.files_parsed,
            "agents": report.agent_count,
            "findings": len(report.findings),
            "seconds": round(report.seconds, 3),
        },
    }


def render(report: Report) -> str:
    return json.dumps(as_dict(report), indent=2) + "\n"
