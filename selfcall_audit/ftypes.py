"""Value types of the analysis' results: findings, their evidence, agents and unreadable inputs."""

from __future__ import annotations

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


@dataclass(frozen=True)
class InputError:
    path: str
    message: str
    code: str = "SCA900"
