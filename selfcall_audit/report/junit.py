"""JUnit XML, as CI test-report viewers read it: one test suite per file, one failing test case per
finding (`classname` the file, `name` the code), and a suite per run; an unreadable file is an
error case. Text from the repository is neutralised first: XML 1.0 cannot carry control
characters at all, even escaped."""

from __future__ import annotations

from xml.etree import ElementTree

from ..analysis.project import Report
from .escape import neutralise


def render(report: Report) -> str:
    cases: dict[str, list[ElementTree.Element]] = {}
    failures = errors = 0
    for finding in report.findings:
        path = neutralise(finding.path)
        case = ElementTree.Element(
            "testcase",
            name=f"selfcall-audit.{finding.code}",
            classname=path,
            file=path,
            line=str(finding.line),
        )
        message = neutralise(finding.message)
        failure = ElementTree.SubElement(case, "failure", message=message, type=finding.code)
        failure.text = f"line {finding.line}, col {finding.column}, {message}"
        cases.setdefault(path, []).append(case)
        failures += 1
    for error in report.errors:
        path = neutralise(error.path)
        case = ElementTree.Element(
            "testcase",
            name=f"selfcall-audit.{error.code}",
            classname=path,
            file=path,
            line=str(error.position[0]),
        )
        ElementTree.SubElement(case, "error", message=neutralise(error.message), type=error.code)
        cases.setdefault(path, []).append(case)
        errors += 1
    top = ElementTree.Element(
        "testsuites",
        name="selfcall-audit",
        tests=str(failures + errors),
        failures=str(failures),
        errors=str(errors),
    )
    for path, members in cases.items():
        suite = ElementTree.SubElement(
            top,
            "testsuite",
            name=path,
            tests=str(len(members)),
            failures=str(sum(m.find("failure") is not None for m in members)),
            errors=str(sum(m.find("error") is not None for m in members)),
        )
        suite.extend(members)
    if not cases:  # a clean run is one passing case, so a viewer shows that the audit ran
        suite = ElementTree.SubElement(
            top, "testsuite", name="selfcall-audit", tests="1", failures="0", errors="0"
        )
        ElementTree.SubElement(suite, "testcase", name="selfcall-audit", classname="selfcall-audit")
        top.set("tests", "1")
    ElementTree.indent(top)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ElementTree.tostring(top, encoding="unicode") + "\n"
