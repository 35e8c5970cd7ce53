"""The rules registry: the one place a rule's code, words, severity and examples live."""

from typing import NamedTuple

# The codes, for the code that emits or treats a rule specially; everything else about a rule is
# in its entry of RULES below.
SELF_CALL = "SCA001"
OTHER_ROUTE = "SCA002"
POSSIBLE_SELF_CALL = "SCA003"
STALE_HELPER = "SCA004"
UNREADABLE = "SCA900"


class Rule(NamedTuple):
    code: str
    name: str
    message: str
    summary: str
    explanation: str
    bad: str
    good: str
    default_on: bool = True
    fixable: bool = False
    severity: str = "error"  # "error" or "warning": how every reporter ranks its findings
    precision: str = "high"  # "high" or "medium": how sure a finding is (SARIF's precision)


RULES: dict[str, Rule] = {
    rule.code: rule
    for rule in (
        Rule(
            code=SELF_CALL,
            name="agent-self-call",
            message="{agent}.{method} posts to its own {route} over HTTP; call the handler in-process",
            summary="Agent server posts over HTTP to its own /v1/responses.",
            explanation=(
                "An agent server that sends `POST /v1/responses` to its own server through "
                "`self.server_client` (its own instance name, an alias of it, or a YAML reference that "
                "points back at the instance) pays for an aiohttp round trip, a middleware traversal, "
                "JSON serialisation and parsing, Pydantic re-validation and a socket on every call, and "
                "can exhaust file descriptors under high concurrency. The path counts as `/v1/responses` "
                "when it can only reach the agent's `/v1/responses` handler: it is matched against the "
                "routes the class and its bases register (a rollout-prefixed or suffixed twin registered "
                "with the same handler counts), parts the analysis cannot tell matching anything. Paths "
                "are followed as Python builds them (f-strings, `%`, `str.format`, `str.join`, "
                "`posixpath.join`, constants, enum values, helpers that return their path argument "
                "prefixed or suffixed). Call the handler in-process instead: `selfcall-audit fix` "
                "rewrites the call to `responses_in_process(self, ...)`, which returns a response object "
                "the surrounding code keeps using unchanged."
            ),
            bad=(
                "response = await self.server_client.post(\n"
                "    server_name=self.config.name,\n"
                '    url_path="/v1/responses",\n'
                "    json=body.responses_create_params,\n"
                "    cookies=cookies,\n"
                ")"
            ),
            good=(
                "from nemo_gym.inprocess import responses_in_process  # the copy `selfcall-audit fix` vendors\n"
                "\n"
                "response = await responses_in_process(\n"
                "    self,\n"
                '    url_path="/v1/responses",\n'
                "    json=body.responses_create_params,\n"
                "    cookies=cookies,\n"
                ")"
            ),
            fixable=True,
        ),
        Rule(
            code=OTHER_ROUTE,
            name="agent-self-call-other-route",
            message="{agent}.{method} calls its own {route} route over HTTP; call the method directly",
            summary="Agent server calls its own server on another path (e.g. /run, or one it cannot resolve) over HTTP.",
            explanation=(
                "The agent calls its own server through `self.server_client` on any path other than "
                "its `/v1/responses` handler: a route it registers (for example `/run`, "
                "`/aggregate_metrics` or a session route), a path it does not serve, or a path the "
                "analysis cannot resolve (which could reach any of its routes). The request loops back "
                "through the network stack and the web framework to reach code in the same process, or "
                "fails there. Call the method that serves the route directly."
            ),
            bad='await self.server_client.post(server_name=self.config.name, url_path="/aggregate_metrics", json=req)',
            good="await self.aggregate_metrics(req)",
        ),
        Rule(
            code=POSSIBLE_SELF_CALL,
            name="possible-agent-self-call",
            message="{agent}.{method} may post to itself: {reason}",
            summary="Possible self-call: a post to /v1/responses whose target cannot be resolved statically.",
            explanation=(
                "Inside an agent class, a server-client call posts to a path that can only be "
                "`/v1/responses` on a server whose name cannot be resolved statically (or a call to the "
                "agent's own `/v1/responses` with an HTTP method that cannot be resolved). It may be a "
                "self-call. Off by default; enable it with `--select SCA003` or `--strict` and review "
                "each case, then add `# noqa: SCA003` where the target is known to be another server. "
                "A call whose target is the agent's own server is never only possible: with a path it "
                "cannot resolve it is SCA002. A call whose target or path the analysis stopped "
                "following at one of its limits (a value built through more than 25 names and calls, "
                "say) is reported here too when it could still be a self-call, whatever its path if the "
                "target was cut, and the message names the limit."
            ),
            bad='await self.server_client.post(server_name=pick_server(), url_path="/v1/responses", json=b)',
            good='await self.server_client.post(server_name=self.config.model_server.name, url_path="/v1/responses", json=b)',
            default_on=False,
            severity="warning",
            precision="medium",
        ),
        Rule(
            code=STALE_HELPER,
            name="stale-vendored-helper",
            message="the vendored in-process helper {why}; refresh it with `{command}`",
            summary="The in-process helper vendored into the repo was edited or is older than the tool's.",
            explanation=(
                "`selfcall-audit fix` writes the in-process helper into the repository (by default "
                "`nemo_gym/inprocess.py`), so that the migrated agents run without selfcall-audit "
                "installed. A line at its top (below the license header of its neighbouring modules) "
                "records the tool's version and a digest of the helper's code. A copy whose code no "
                "longer matches that digest was edited by hand; a copy that differs from the installed "
                "tool's helper is older (or newer): the parity the tool tests holds for its own helper "
                "only. Refresh the copy with `selfcall-audit helper --write PATH --force` and review "
                "the diff; put local changes in the calling code instead."
            ),
            bad=(
                "# nemo_gym/inprocess.py, as `selfcall-audit fix` wrote it, then edited by hand:\n"
                "# Vendored from selfcall-audit 0.1.0 (selfcall_audit/inprocess.py, code 9f3c...).\n"
                "# Do not edit: refresh it with `selfcall-audit helper --write nemo_gym/inprocess.py --force`.\n"
                "...\n"
                "_TIMEOUT = 30  # a local change the parity tests never saw"
            ),
            good=(
                "# nemo_gym/inprocess.py, as `selfcall-audit helper --write nemo_gym/inprocess.py --force`\n"
                "# wrote it: the installed tool's helper, unchanged\n"
                "# Vendored from selfcall-audit 0.1.0 (selfcall_audit/inprocess.py, code 9f3c...).\n"
                "# Do not edit: refresh it with `selfcall-audit helper --write nemo_gym/inprocess.py --force`.\n"
                "..."
            ),
        ),
        Rule(
            code=UNREADABLE,
            name="unreadable-input",
            message="{detail}",
            summary="A file or config could not be read or parsed; the scan went on without it.",
            explanation=(
                "A Python file or YAML config could not be read or parsed (a syntax error, an encoding "
                "that is not UTF-8, a file too large, a YAML tag that a safe loader refuses, ...). The "
                "scan skips it and analyses every other file, so self-calls in that file, or bound by "
                "that config, may be missed. It is reported as an error entry, not a finding: it does "
                "not change the exit code unless `--strict` is given."
            ),
            bad="async def run(self, body:\n    return await self.responses(body)",
            good="async def run(self, body):\n    return await self.responses(body)",
        ),
    )
}

FINDING_CODES = (SELF_CALL, OTHER_ROUTE, POSSIBLE_SELF_CALL, STALE_HELPER)


class UnknownCode(ValueError):
    """A rule code or prefix that matches no rule: a typo would silently disable the gate."""


def check_codes(codes: tuple[str, ...]) -> tuple[str, ...]:
    """The codes, upper-cased, each a rule code or a prefix of one; else UnknownCode naming them."""
    codes = tuple(code.strip().upper() for code in codes)
    for code in codes:
        if not code or not any(known.startswith(code) for known in RULES):
            raise UnknownCode(f"unknown rule code or prefix {code!r} (known: {', '.join(RULES)})")
    return codes


def parse_codes(text: str | None) -> tuple[str, ...]:
    """Split a comma/space separated code list and check it; prefixes like `SCA` select every
    matching code. UnknownCode for a code no rule has."""
    if not text:
        return ()
    return check_codes(tuple(part for part in text.replace(",", " ").split() if part.strip()))


def code_selected(
    code: str, select: tuple[str, ...], ignore: tuple[str, ...], extend: tuple[str, ...] = ()
) -> bool:
    """ruff semantics: `select` replaces the defaults, `extend` adds to them, and the more specific
    prefix wins; the defaults are the least specific of all (any `ignore` that matches wins)."""
    if select:
        selected = max((len(p) for p in select if code.startswith(p)), default=-1)
    else:
        selected = 0 if RULES[code].default_on else -1
    selected = max([selected, *(len(p) for p in extend if code.startswith(p))])
    ignored = max((len(p) for p in ignore if code.startswith(p)), default=-1)
    return selected > ignored
