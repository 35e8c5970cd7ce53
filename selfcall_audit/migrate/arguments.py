"""The rewritten call's arguments: `self` first, the server name (and `method=`) gone, a positional
url path spelled `url_path=` (and an argument of a forwarding helper spelled as the client's
keyword for it); every line break and comment of the call stays on its line."""

from __future__ import annotations

from collections.abc import Mapping, Set

import libcst as cst

_SPACE = cst.SimpleWhitespace(" ")


def rewritten_call(
    call: cst.Call, callee: str, self_name: str, drop: Set[int], keywords: Mapping[int, str]
) -> cst.Call:
    """`call` made on `callee` with `self_name` first, without the arguments at `drop`."""
    args = list(call.args)
    self_arg = cst.Arg(value=cst.Name(self_name))
    kept: list[cst.Arg] = []
    if 0 in drop:  # the server name first, as usual: `self` takes its place, its layout and comment
        kept.append(
            self_arg.with_changes(comma=args[0].comma, whitespace_after_arg=args[0].whitespace_after_arg)
        )
    else:
        between = call.whitespace_before_args
        if not isinstance(between, cst.ParenthesizedWhitespace):
            between = _SPACE
        kept.append(self_arg.with_changes(comma=cst.Comma(whitespace_after=uncommented(between))))
    for index, arg in enumerate(args):
        if index == 0 and index in drop:
            continue
        if index in drop:
            kept[-1] = _without_next(kept[-1], arg, last=index == len(args) - 1)
            continue
        if index in keywords and arg.keyword is not None:
            arg = arg.with_changes(keyword=cst.Name(keywords[index]))
        elif index in keywords:
            arg = arg.with_changes(
                keyword=cst.Name(keywords[index]),
                equal=cst.AssignEqual(
                    whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
                ),
            )
        kept.append(arg)
    return call.with_changes(func=cst.Name(callee), args=kept)


def _without_next(before: cst.Arg, dropped: cst.Arg, last: bool) -> cst.Arg:
    """`before` followed by what followed the dropped argument; the dropped argument's own
    comment stays where it was, on a line of its own."""
    comma = before.comma
    assert isinstance(comma, cst.Comma)  # an argument came after it
    if isinstance(dropped.comma, cst.Comma):
        gap = _joined(comma.whitespace_after, dropped.comma.whitespace_after, last)
        return before.with_changes(comma=comma.with_changes(whitespace_after=gap))
    # the dropped argument ended the call without a trailing comma: so does `before` now
    gap = _joined(comma.whitespace_after, dropped.whitespace_after_arg, True)
    return before.with_changes(comma=cst.MaybeSentinel.DEFAULT, whitespace_after_arg=gap)


def _joined(
    before: cst.BaseParenthesizableWhitespace, after: cst.BaseParenthesizableWhitespace, last: bool
) -> cst.BaseParenthesizableWhitespace:
    """The whitespace from the end of one line (`before`, with its comment) to what came after the
    dropped argument (`after`)."""
    if isinstance(before, cst.ParenthesizedWhitespace) and isinstance(after, cst.ParenthesizedWhitespace):
        kept_comment = []
        if after.first_line.comment is not None:
            kept_comment = [
                cst.EmptyLine(
                    indent=before.indent, whitespace=before.last_line, comment=after.first_line.comment
                )
            ]
        return before.with_changes(
            empty_lines=[*before.empty_lines, *kept_comment, *after.empty_lines],
            indent=after.indent,
            last_line=after.last_line,
        )
    if isinstance(after, cst.ParenthesizedWhitespace):  # `f(a, dropped,  # note` and a line break
        return after
    return after if last else before


def uncommented(whitespace: cst.BaseParenthesizableWhitespace) -> cst.BaseParenthesizableWhitespace:
    """The same line break and indentation, without the comments: a copy must not repeat them."""
    if isinstance(whitespace, cst.ParenthesizedWhitespace):
        return whitespace.with_changes(
            first_line=cst.TrailingWhitespace(newline=whitespace.first_line.newline), empty_lines=()
        )
    return whitespace
