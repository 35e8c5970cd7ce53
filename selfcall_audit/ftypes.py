"""Value types of the analysis' results: findings, their evidence, agents and unreadable inputs."""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Evidence:
    path: str
    line: int
    note: str


@dataclass(frozen=True)
class Finding:
    code: str
    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    message: str
    agent: str
    method: str
    fixable: bool = False
    evidence: tuple[Evidence, ...] = field(default_factory=tuple)
    fix_blocker: str | None = None

    @property
    def sort_key(self) -> tuple[str, int, int, str]:
        return (self.path, self.line, self.column, self.code)


@dataclass(frozen=True)
class AgentInfo:
    name: str
    path: str
    line: int
    bases: tuple[str, ...]
    instances: tuple[str, ...]


_AT = re.compile(r" at line (\d+)(?:, column (\d+))?")


@dataclass(frozen=True)
class InputError:
    path: str
    message: str
    code: str = "SCA900"

    @property
    def position(self) -> tuple[int, int]:
        """Where the problem is, when the message names it (`syntax error at line 3, column 5`),
        so that a report points there; else the file's start."""
        found = _AT.search(self.message)
        return (int(found[1]), int(found[2] or 1)) if found else (1, 1)
