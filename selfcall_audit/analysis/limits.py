"""The bounds of the analysis, in one place: what it gives up on rather than work without end.

Every bound the tool applies to its input, and what a run says when one is reached (the fields
of `Limits` below; the others are named where they live):

| Bound | Value | When reached |
|---|---|---|
| `max-file-size` setting | 2,000,000 bytes | SCA900 "skipped: N bytes is over the max-file-size limit" |
| `helper_depth`: helpers followed from one call site | 25 | SCA900 "helpers forward a server-client call more than 25 deep: X ... not followed" |
| `evaluation_depth`: names, constants, calls followed for one value (a server name, path or HTTP method) | 25 | the value is unknown, marked with the bound (`Unknown.limit`, `Marker.limit`, `Unresolved.limit`): a call it leaves possibly a self-call is SCA003, and any finding on it carries `Finding.limit` |
| `alternatives`: strings one expression may evaluate to | 16 | as `evaluation_depth` (the first 16 are kept, and a cut standing for the rest) |
| `fact_alternatives`, `fact_depth`, `inlined_depth`, `sequence_items` | 8, 8, 32, 16 | as `evaluation_depth` (chains of plain rebindings, `n = n`, cost nothing) |
| `import_depth`: re-exports or aliases followed for an imported name or a base class | 30 | SCA900 "`X` is re-exported through more than 30 modules: it was not followed further ..." on the file where the chain was cut, also for a class's base followed through module aliases (`AgentBase = mod.X`) |
| YAML nodes copied by aliases (`yaml_nodes._MAX_NODES`) | 200,000 | SCA900 "more than 200,000 YAML nodes once aliases are expanded (an alias bomb?)" |
| YAML nesting (`yaml_nodes._MAX_DEPTH`) | 100 levels | SCA900 "YAML nested more than 100 levels deep" |
| `config_paths` chain (`gym_config._MAX_CHAIN`) | 100 files | SCA900 "config_paths chain more than 100 files deep; X not read", once per file |
| `${...}` references for one value, characters of the result | 100, 10,000 | the reference stays as written (unresolved) |
| baseline nesting | the JSON decoder's | usage error "not a selfcall-audit baseline (nested too deeply)", exit 2 |
| folders listed outside any project (`discovery.UNROOTED_FOLDER_LIMIT`) | 5,000 | SCA900 "stopped listing after 5,000 folders" |
| characters compared per changed block by `fix` (`splice.MAX_COMPARED_CHARS`) | 4,000 | none: the block is one edit (the bytes written are the same) |
"""

from typing import NamedTuple


class Limits(NamedTuple):
    fact_alternatives: int = 8  # values one name may hold in a function before it is unknown
    fact_depth: int = 8  # nesting of an expression kept in the facts
    inlined_depth: int = 32  # nesting once local bindings are substituted
    sequence_items: int = 16  # items of a list or tuple written in place kept (path segments)
    alternatives: int = 16  # strings one expression may evaluate to
    evaluation_depth: int = 25  # names, constants and calls followed to evaluate one expression
    helper_depth: int = 25  # helpers followed from one call site to the client call they make
    import_depth: int = 30  # re-exports or aliases followed to find what a name or a base class is


LIMITS = Limits()
