"""Settings: defaults, `[tool.selfcall-audit]` in pyproject.toml, then command-line overrides."""

from __future__ import annotations

import keyword
import os
import re
import stat
import sys
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, NamedTuple

from .rules import POSSIBLE_SELF_CALL, UnknownCode, check_codes, code_selected

if TYPE_CHECKING:
    from typing import Any

BASE_MODULES = (
    "nemo_gym.base_responses_api_agent",
    "nemo_gym.agents.base_responses_api_agent",
    "nemo_gym.agents.base",
)
BASE_CLASSES = ("SimpleResponsesAPIAgent", "BaseResponsesAPIAgent")

DEFAULT_TEST_PATTERNS = ("tests/", "test_*.py", "*_test.py", "conftest.py")


def _toml() -> Any:
    if sys.version_info >= (3, 11):
        import tomllib

        return tomllib
    import tomli  # pragma: no cover - exercised on 3.10 only

    return tomli


class ConfigError(Exception):
    """A user error in settings: reported with exit code 2, never as a traceback."""


HELPER_NAME = "responses_in_process"
DEFAULT_HELPER = f"selfcall_audit.inprocess:{HELPER_NAME}"


def is_dotted(text: str) -> bool:
    """A dotted Python name (`a.b.c`), as an import statement takes it."""
    return bool(text) and all(part.isidentifier() and not keyword.iskeyword(part) for part in text.split("."))


def helper_parts(spec: str) -> tuple[str, str]:
    """`MODULE:NAME` as its module and its name; a ValueError says how it should look."""
    module, sep, name = spec.strip().partition(":")
    if not sep or not is_dotted(module) or not is_dotted(name) or "." in name:
        raise ValueError(f"the helper must be given as MODULE:NAME (like {DEFAULT_HELPER}), not {spec!r}")
    return module, name


class Settings(NamedTuple):
    """A project's settings. A named tuple: a dataclass would load `dataclasses` (and `inspect`
    with it) in every run, where a one-file run that parses nothing needs neither."""

    agent_bases: tuple[str, ...] = tuple(f"{m}.{c}" for m in BASE_MODULES for c in BASE_CLASSES)
    route: str = "/v1/responses"
    own_routes: tuple[str, ...] = ("/run", "/aggregate_metrics", "/rollouts/{rollout_id}/stop")
    route_wrappers: tuple[str, ...] = (
        "url_path_for_run",
        "url_path_for_request",
        "rollout_path_prefix",
        "apply_rollout_prefix",
    )
    config_globs: tuple[str, ...] = ("*.yaml", "*.yml")
    exclude: tuple[str, ...] = ()  # `exclude` and `extend-exclude` together
    extend_exclude: tuple[str, ...] = ()  # what `extend-exclude` added: kept when --exclude replaces
    include_tests: bool = False
    helper: str = ""  # MODULE:NAME; empty: the copy `fix` writes into the project
    baseline: str | None = None
    select: tuple[str, ...] = ()  # empty: the rules on by default
    # On top of the selection, but not more specific than it: `ignore = ["SCA"]` still turns off the
    # rules on by default, as ruff's `--extend-select B --ignore F` leaves F off.
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    strict: bool = False
    max_file_size: int = 2_000_000
    cache_dir: str = ".selfcall_audit_cache"
    jobs: int = 0
    config_file: str | None = None
    # Nested projects (a folder below the root whose pyproject.toml holds [tool.selfcall-audit]) are
    # analysed as projects of their own; not with --config, whose settings govern every file.
    nested_projects: bool = True

    def with_overrides(self, **overrides: Any) -> Settings:
        return self._replace(**{k: v for k, v in overrides.items() if v is not None})

    def selects(self, code: str) -> bool:
        """Is `code` reported? As ruff selects, and `strict` adds SCA003 unless it is ignored."""
        if self.strict and code == POSSIBLE_SELF_CALL and not code.startswith(self.ignore):
            return True
        return code_selected(code, self.select, self.ignore, self.extend_select)


_KEYS = {
    name.replace("_", "-"): name
    for name in Settings._fields
    if name not in ("config_file", "nested_projects", "extend_select", "extend_exclude")
}


def _coerce(key: str, value: Any, default: Any) -> Any:
    if isinstance(default, bool) or key == "include-tests":
        if not isinstance(value, bool):
            raise ConfigError(f"`{key}` must be true or false, not {value!r}")
        return value
    if isinstance(default, tuple):
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"`{key}` must be a list of strings, not {value!r}")
        return tuple(value)
    if isinstance(default, int):
        if not isinstance(value, int) or value < 0:
            raise ConfigError(f"`{key}` must be a non-negative integer, not {value!r}")
        return value
    if not isinstance(value, str):
        raise ConfigError(f"`{key}` must be a string, not {value!r}")
    return value


_EXTENDING = ("extend-exclude", "extend-select")  # settings that add to another one, as in ruff


def _inside(folder: str) -> bool:
    """A relative path below the root ("" turns the cache off): the cache is never written, nor
    cleaned, anywhere else."""
    parts = PurePath(folder).parts
    return not folder or not (PurePath(folder).is_absolute() or ".." in parts or parts in ((), (".",)))


def settings_from_table(table: dict[str, Any], source: str) -> Settings:
    values: dict[str, Any] = {}
    defaults = Settings()
    extend: dict[str, tuple[str, ...]] = {}
    for key, value in table.items():
        name = _KEYS.get(key)
        if name is None and key not in _EXTENDING:
            known = ", ".join(sorted([*_KEYS, *_EXTENDING]))
            raise ConfigError(f"{source}: unknown setting `{key}` in [tool.selfcall-audit] (known: {known})")
        try:  # which file: in a monorepo, each project has its own
            if name is None:
                extend[key] = _coerce(key, value, ())
            else:
                values[name] = _coerce(key, value, Settings._field_defaults[name])
        except ConfigError as exc:
            raise ConfigError(f"{source}: {exc}") from None
    if values.get("helper"):  # checked as it is read: `scan` looks for the copy it names (SCA004)
        try:
            helper_parts(values["helper"])
        except ValueError as exc:
            raise ConfigError(f"{source}: `helper`: {exc}") from None
    if not _inside(values.get("cache_dir", defaults.cache_dir)):
        raise ConfigError(
            f"{source}: `cache-dir` must be a folder inside the project root, not {values['cache_dir']!r}"
        )
    try:
        for key in ("select", "ignore"):
            if key in values:
                values[key] = check_codes(values[key])
        values["extend_select"] = check_codes(extend.get("extend-select", ()))
    except UnknownCode as exc:
        raise ConfigError(f"{source}: [tool.selfcall-audit]: {exc}") from None
    settings = defaults._replace(config_file=source, **values)
    if "extend-exclude" in extend:
        added = extend["extend-exclude"]
        settings = settings._replace(exclude=settings.exclude + added, extend_exclude=added)
    return settings


_MAX_PYPROJECT_SIZE = 2_000_000


def declares_settings(pyproject: Path) -> bool:
    """Does this pyproject.toml hold a [tool.selfcall-audit] table? Only then is it a config file,
    as ruff reads only a pyproject.toml with [tool.ruff]: it makes its folder a project root, and
    its settings govern the files below it."""
    try:  # without blocking, and only a regular file: a named pipe cannot hang the run
        fd = os.open(pyproject, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        with open(fd, "rb", closefd=False) as handle:
            data = handle.read(_MAX_PYPROJECT_SIZE)
    except OSError:
        return False
    finally:
        os.close(fd)
    if b"selfcall-audit" not in data:  # most files: neither decoded nor parsed
        return False
    try:
        tool = _toml().loads(data.decode("utf-8")).get("tool")
    except ValueError:  # broken, and it names us: loading its settings will say what is wrong
        return True
    return isinstance(tool, dict) and "selfcall-audit" in tool


_REQUIRES_PYTHON = re.compile(r"""^requires-python\s*=\s*["']([^"']*)["']""", re.MULTILINE)
_FLOOR = re.compile(r"(?:>=|~=|==|>)\s*(\d+)\.(\d+)")


def python_floor(root: Path) -> tuple[int, int] | None:
    """The oldest Python the project at `root` supports (`requires-python` in its pyproject.toml),
    the grammar its files may use; None when it does not say."""
    try:
        text = (root / "pyproject.toml").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    declared = _REQUIRES_PYTHON.search(text)
    floors = [(int(a), int(b)) for a, b in _FLOOR.findall(declared[1])] if declared else []
    return max(floors) if floors else None


def load_settings(root: Path, config_file: Path | None = None) -> Settings:
    """Read `[tool.selfcall-audit]` from the given file or the root's pyproject.toml."""
    if config_file is None:
        return _read_settings(root / "pyproject.toml", None)
    return _read_settings(config_file, config_file)._replace(nested_projects=False)


def _read_settings(path: Path, config_file: Path | None) -> Settings:
    if not path.is_file():
        if config_file is not None:
            raise ConfigError(f"config file not found: {config_file}")
        return Settings()
    try:
        text = path.read_text(encoding="utf-8")
        if config_file is None and "selfcall-audit" not in text:
            return Settings(config_file=str(path))  # no table of ours: not worth a TOML parser
        data = _toml().loads(text)
    except (OSError, ValueError) as exc:  # ValueError: undecodable text, TOMLDecodeError
        raise ConfigError(f"cannot read {_shown(path)}: {exc}") from exc
    tool = data.get("tool", {})
    table = tool.get("selfcall-audit") if isinstance(tool, dict) else None
    if table is None and path.name != "pyproject.toml":
        table = data  # a dedicated file holds the settings at top level
    if table is None:
        return Settings(config_file=str(path))
    if not isinstance(table, dict):  # `selfcall-audit = ...` under [tool]: settings that say nothing
        raise ConfigError(f"{_shown(path)}: [tool.selfcall-audit] must be a table, not {table!r}")
    return settings_from_table(table, _shown(path))


def _shown(path: Path) -> str:
    """The file as the user finds it from the current folder: which pyproject.toml of a monorepo."""
    try:
        return os.path.relpath(path)
    except ValueError:  # another drive
        return str(path)
