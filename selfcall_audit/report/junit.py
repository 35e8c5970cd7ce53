"""JUnit XML, as CI test-report viewers read it: one test suite per file, one failing test case per
finding (`classname` the file, `name` the code), and a suite per run; an unreadable file is an
error case. Text from the repository is neutralised first: XML 1.0 cannot carry control
characters at all, even escaped."""

from __future__ import annotations

from xml.etree import ElementTree

from ..ftypes import Report
from .escape import neutralise
from .messages import message as describe


def render(report: Report) -> str:
    cases: dict[str, list[ElementTree.Element]] = {}

    def case(path: str, code: str, line: int) -> ElementTree.Element:
        path = neutralise(path)
        element = ElementTree.Element(
            "testcase", name=f"selfcall-audit.{code}", classname=path, file=path, line=str(line)
        )
        cases.setdefault(path, []).append(element)
        return element

    for finding in report.findings:
        message = neutralise(describe(finding))
        failure = ElementTree.SubElement(
            case(finding.path, finding.code, finding.line), "failure", message=message, type=finding.code
        )
        failure.text = f"line {finding.line}, col {finding.column}, {message}"
    for error in report.errors:
        ElementTree.SubElement(
            case(error.path, error.code, error.position[0]),
            "error",
            message=neutralise(error.message),
            type=error.code,
        )
    failures, errors = len(report.findings), len(report.errors)
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
