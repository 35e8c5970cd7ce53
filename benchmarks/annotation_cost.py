"""What evaluating the value types' annotations saves, measured side by side in one run.

    python benchmarks/annotation_cost.py [--rounds N]

`typing.NamedTuple` turns each field's annotation that is a string into a `ForwardRef`, which
compiles it, when the class is made: under `from __future__ import annotations` every field's is.
So the modules of value types (those `tests/test_architecture.py` lists) evaluate theirs. For each
of them this runs its body in a fresh process twice per round, compiled as it is written and
compiled with annotations postponed, after loading what it imports, and prints the medians and
their difference: what every run that loads the module saves. The last lines are `key=value`
pairs for scripts.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import subprocess
import sys

MODULES = (
    "selfcall_audit.ftypes",
    "selfcall_audit.rules",
    "selfcall_audit.analysis.limits",
    "selfcall_audit.analysis.calls",
    "selfcall_audit.analysis.facts",
    "selfcall_audit.analysis.policy",
)
# Runs one module's body (compiled first, with the flag or without) once what it imports is
# loaded, and prints how long the body took, in milliseconds.
BODY = r"""
import __future__, importlib, importlib.util, sys, time
name, postponed = sys.argv[1], sys.argv[2] == "1"
spec = importlib.util.find_spec(name)
source = spec.loader.get_source(name)
flags = __future__.annotations.compiler_flag if postponed else 0
code = compile(source, spec.origin, "exec", flags=flags, dont_inherit=True)
importlib.import_module(name)  # what it imports, loaded; the module itself is run again below
module = importlib.util.module_from_spec(spec)
started = time.perf_counter()
exec(code, module.__dict__)
print((time.perf_counter() - started) * 1000)
"""


def body_ms(name: str, postponed: bool) -> float:
    done = subprocess.run(
        [sys.executable, "-c", BODY, name, "1" if postponed else "0"],
        capture_output=True,
        text=True,
        check=True,
    )
    return float(done.stdout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=11, help="rounds, each running every body both ways")
    args = parser.parse_args(argv)
    missing = [name for name in MODULES if importlib.util.find_spec(name) is None]
    if missing:
        print(f"not importable: {', '.join(missing)} (pip install -e .)", file=sys.stderr)
        return 2
    times: dict[tuple[str, bool], list[float]] = {(n, p): [] for n in MODULES for p in (False, True)}
    for _ in range(args.rounds):
        for name in MODULES:
            for postponed in (False, True):
                times[name, postponed].append(body_ms(name, postponed))
    print(f"module bodies, medians of {args.rounds} rounds (ms)")
    print(f"{'module':40} {'evaluated':>10} {'postponed':>10} {'saved':>8}")
    values = {}
    total = 0.0
    for name in MODULES:
        evaluated = statistics.median(times[name, False])
        postponed = statistics.median(times[name, True])
        total += postponed - evaluated
        print(f"{name:40} {evaluated:10.2f} {postponed:10.2f} {postponed - evaluated:8.2f}")
        values[name.rsplit(".", 1)[-1]] = {
            "evaluated_ms": round(evaluated, 3),
            "postponed_ms": round(postponed, 3),
        }
    print(f"saved in all: {total:.2f} ms")
    print(f"saved_ms={total:.3f}")
    print(f"modules={json.dumps(values)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
