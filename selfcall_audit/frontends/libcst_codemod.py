"""`fix`'s per-file rewrite for LibCST's own codemod runner:

    python -m libcst.tool codemod -x selfcall_audit.frontends.libcst_codemod.FixSelfCalls FILE...

Each file's self-calls are found by the whole-project analysis of the project around it (its text
as the runner hands it over), then rewritten by the same codemod `fix` runs. Unlike `fix`, this
neither vendors the helper nor writes a diff: the import names `--helper` (default: the installed
tool's helper), and the runner writes the files.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import libcst as cst
from libcst.codemod import CodemodContext

from .. import api
from ..config import DEFAULT_HELPER
from ..migrate.codemod import first_party_of, tried_by_fix
from ..migrate.fixes import Helper
from ..migrate.rewrite import SelfCallRewrite
from ..rules import SELF_CALL


class FixSelfCalls(SelfCallRewrite):
    DESCRIPTION = "Rewrite agent self-calls (selfcall-audit SCA001) to the in-process helper."

    def __init__(self, context: CodemodContext, helper: str = DEFAULT_HELPER) -> None:
        super().__init__(context, (), Helper.parse(helper))

    @staticmethod
    def add_args(arg_parser: argparse.ArgumentParser) -> None:
        arg_parser.add_argument(
            "--helper",
            default=DEFAULT_HELPER,
            metavar="MODULE:NAME",
            help=f"the in-process helper the rewritten calls import (default: {DEFAULT_HELPER})",
        )

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        path = Path(os.path.abspath(self.context.filename or ""))
        report = api.analyze([path], sources={path: tree.bytes})
        own = os.path.relpath(path, report.root).replace(os.sep, "/")
        self.findings = tuple(
            f for f in report.findings if f.code == SELF_CALL and tried_by_fix(f) and f.path == own
        )
        self.first_party = first_party_of(report.root)  # the helper's import joins the project's own
        return super().transform_module_impl(tree)
