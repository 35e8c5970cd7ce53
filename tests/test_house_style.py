"""The helper file `fix` writes is in the repo's own form: its neighbours' license header, one line
on where it came from, imports laid out by the repo's isort settings, and a layout `ruff format`
keeps at the repo's line length. ruff itself (the version this project is checked with) judges."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from selfcall_audit.migrate.house_style import ImportStyle, import_style, license_header, sorted_imports
from selfcall_audit.migrate.vendor import helper_source

SHIPPED = Path(__file__).resolve().parents[1] / "selfcall_audit" / "inprocess.py"
OURS = "# SPDX-FileCopyrightText: Copyright (c) 2026 Example Org. All rights reserved.\n# SPDX-License-Identifier: Apache-2.0\n"
OLDER = "# SPDX-FileCopyrightText: Copyright (c) 2025 Example Org. All rights reserved.\n# SPDX-License-Identifier: Apache-2.0\n"


def ruff(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ruff", *args], cwd=cwd, capture_output=True, text=True)


def test_the_header_is_the_one_most_neighbouring_modules_carry(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(OURS + "import os\n")
    (tmp_path / "b.py").write_text(OURS + "\nX = 1\n")
    (tmp_path / "c.py").write_text(OLDER + "Y = 2\n")
    (tmp_path / "d.py").write_text("# just a comment\nZ = 3\n")  # no copyright: not a header
    (tmp_path / "inprocess.py").write_text(OLDER)  # the file being written does not vote

    assert license_header(tmp_path, exclude=tmp_path / "inprocess.py") == OURS


def test_modules_without_a_license_header_give_none(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("#!/usr/bin/env python\n# -*- coding: utf-8 -*-\nimport os\n")

    assert license_header(tmp_path) == ""


SOURCE = '''"""Doc."""

from __future__ import annotations

import json
import asyncio
from typing import Any
from dataclasses import dataclass, field
import nemo_gym.server_utils
from starlette.types import Scope

LOG = 1
'''


@pytest.mark.parametrize(
    ("settings", "style", "expected"),
    [
        (
            "lint.isort.lines-after-imports = 2\nlint.isort.known-first-party = ['nemo_gym']\n",
            ImportStyle(known_first_party=("nemo_gym",), lines_after_imports=2),
            "import asyncio\nimport json\nfrom dataclasses import dataclass, field\nfrom typing import Any\n\n"
            "from starlette.types import Scope\n\nimport nemo_gym.server_utils\n\n\nLOG = 1\n",
        ),
        (
            "lint.isort.force-single-line = true\nlint.isort.force-sort-within-sections = true\n",
            ImportStyle(force_single_line=True, force_sort_within_sections=True),
            "import asyncio\nfrom dataclasses import dataclass\nfrom dataclasses import field\nimport json\n"
            "from typing import Any\n\nimport nemo_gym.server_utils\nfrom starlette.types import Scope\n\nLOG = 1\n",
        ),
    ],
    ids=["nemo-gym-like", "single-line-within-sections"],
)
def test_imports_are_laid_out_as_ruff_lays_them_out_with_the_repos_settings(
    settings: str, style: ImportStyle, expected: str, tmp_path: Path
) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.ruff]\n" + settings)
    assert import_style(tmp_path) == style
    laid_out = sorted_imports(SOURCE, style, first_party=lambda name: False)
    assert laid_out == '"""Doc."""\n\nfrom __future__ import annotations\n\n' + expected
    module = tmp_path / "module.py"
    module.write_text(laid_out)

    checked = ruff(
        "check",
        "--select",
        "I",
        "--config",
        "lint.isort.known-third-party = ['starlette']",
        module,
        cwd=tmp_path,
    )

    assert checked.returncode == 0, checked.stdout


@pytest.mark.parametrize("width", [88, 100, 110, 119, 120])
def test_ruff_format_leaves_the_shipped_helper_as_it_is_at_common_line_lengths(
    width: int, tmp_path: Path
) -> None:
    """What makes the copy pass a repo's format check whatever its width: every line fits in 88
    columns and every split is kept by a magic trailing comma."""
    done = ruff("format", "--isolated", "--line-length", str(width), "--check", SHIPPED, cwd=tmp_path)

    assert done.returncode == 0, done.stdout


def test_the_copy_passes_the_repos_lint_and_format_with_its_settings(tmp_path: Path) -> None:
    """A NeMo Gym-like repo: a license header on every module of the package, line length 119,
    first-party `nemo_gym`, two lines after the imports."""
    root = tmp_path / "repo"
    (root / "nemo_gym").mkdir(parents=True)
    (root / "pyproject.toml").write_text(
        '[project]\nname = "toy"\n\n[tool.ruff]\nline-length = 119\n\n[tool.ruff.lint]\nselect = ["F", "E741", "I"]\n\n'
        '[tool.ruff.lint.isort]\nknown-first-party = ["nemo_gym"]\nlines-after-imports = 2\n'
    )
    for name in ("__init__.py", "server_utils.py", "global_config.py"):
        (root / "nemo_gym" / name).write_text(OURS + "X = 1\n")

    copy = helper_source("nemo_gym/inprocess.py", root)
    (root / "nemo_gym" / "inprocess.py").write_bytes(copy)

    assert copy.startswith(OURS.encode() + b"\n# Vendored from selfcall-audit "), copy[:400]
    assert copy.count(b"\n# Vendored from selfcall-audit") == 1
    for args in (("check", "nemo_gym"), ("format", "--check", "nemo_gym")):
        done = ruff(*args, cwd=root)
        assert done.returncode == 0, done.stdout + done.stderr
