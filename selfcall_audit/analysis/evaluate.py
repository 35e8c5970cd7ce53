"""Evaluation: the strings an expression can be (a url path) and the servers a name can denote.

Names, module and class constants, values stored on `self` in any method, enum members and
their `.value`, and calls of project functions (read from what their bodies return) are
followed; what cannot be told becomes an unknown part, which route matching treats as a wildcard.
"""

from __future__ import annotations

from itertools import product
from math import inf

from ..config import Settings
from ..ftypes import Evidence
from .arguments import bind_params, expand_kwargs
from .expr import (
    SELF,
    UNKNOWN,
    Alt,
    Attr,
    Call,
    Const,
    DictOf,
    Expr,
    Global,
    Item,
    Join,
    Name,
    Named,
    Or,
    Param,
    SelfRef,
    Seq,
    Str,
    Unknown,
    inline,
    qualify,
)
from .facts import Binding, CallFact, FunctionFacts, Inlined
from .formats import str_format, str_join
from .hierarchy import Hierarchy
from .index import ClassAttr, ClassRef, ConstRef, External, FunctionRef
from .limits import LIMITS
from .values import (
    HOLE,
    PARAM,
    PREFIX,
    ConfigRef,
    FromParam,
    Marker,
    OwnName,
    Path,
    Server,
    Unresolved,
    bounded,
    cut_path,
    join_paths,
    named_field,
    path_limit,
    server_of,
    stripped,
)

_PATH_JOINS = (External("os.path.join"), External("posixpath.join"))
_PREFIX_BUILDER = "rollout_path_prefix"  # upstream's: "" or `/ng-rollout/{rollout_id}` for an id
_PATH_CLASSES = tuple(
    External(f"pathlib.{name}") for name in ("PurePosixPath", "PurePath", "Path", "PosixPath")
)
_ENVIRONMENT = (External("os.environ.get"), External("os.getenv"))
_DUMPS = frozenset({"model_dump", "dict"})  # a pydantic config as a dict
_CONFIG = Attr(SELF, "config")


class Ctx:
    """Where an expression is read: its module, the agent class `self` is, and the evidence
    gathered while following names."""

    __slots__ = ("cls", "evidence", "path")

    def __init__(self, path: str, cls: ClassRef | None, evidence: list[Evidence] | None = None):
        self.path = path
        self.cls = cls
        self.evidence = [] if evidence is None else evidence

    def inside(self, path: str, cls: ClassRef | None) -> Ctx:
        return Ctx(path, cls, self.evidence)


class Evaluator:
    def __init__(self, hierarchy: Hierarchy, settings: Settings, inlined: Inlined | None = None):
        """`inlined`: what the last run inlined, for a long-lived process (see `facts.Inlined`)."""
        self.hierarchy = hierarchy
        self.index = hierarchy.index
        self.settings = settings
        self.inlined = inlined if inlined is not None else Inlined()

    def calls_of(self, function: FunctionFacts) -> tuple[CallFact, ...]:
        """The function's calls, callees inlined (once per function: see `facts.Inlined`)."""
        return self.inlined.calls(function)

    def arguments_of(self, call: CallFact, function: FunctionFacts) -> tuple[tuple[Expr, ...], tuple]:
        """The call's arguments, local bindings substituted (once per call: see `facts.Inlined`)."""
        return self.inlined.arguments(call, function)

    # names ----------------------------------------------------------------------------------
    def constant(self, expr: Expr, ctx: Ctx) -> tuple[Expr, Ctx] | None:
        """The expression a name, module attribute, class constant or `self` attribute is bound to,
        with the context to read it in."""
        match expr:
            case Attr(Attr() as member, "value"):  # `Route.RESPONSES.value`
                return self.constant(member, ctx)
            case Attr(
                Call(Name("type"), (SelfRef(),)) | Attr(SelfRef(), "__class__"), attr
            ):  # `type(self).X`
                return self.constant(Attr(SELF, attr), ctx)
            case Item(base, key):  # `ROUTES["answer"]`: a dict written in place
                found = self.constant(base, ctx)
                if found is not None and isinstance(found[0], DictOf):
                    value = dict(found[0].items).get(key)
                    return (value, found[1]) if value is not None else None
                return None
            case Attr(SelfRef(), attr) if ctx.cls is not None:
                if attr in ("config", "server_client"):
                    return None
                read = self.property_value(attr, ctx)
                if read is not None:
                    return read
                found = self.hierarchy.class_binding(ctx.cls, attr)
                if found is None:
                    return None
                owner, binding = found
                ctx.evidence.append(Evidence(owner.path, binding.line, "bound", f"self.{attr}"))
                if isinstance(binding.expr, Param):
                    keyword = self._class_keyword(owner, binding, ctx.cls)
                    if keyword is not None:
                        return keyword
                return qualify(binding.expr, owner.path, {}), ctx  # a stored parameter is unknown here
            case Name() | Global() | Attr():
                pass
            case _:
                return None
        match self.index.lookup_dotted(ctx.path, expr):
            case ConstRef(path, binding):
                ctx.evidence.append(Evidence(path, binding.line, "defined", binding.name))
                return binding.expr, ctx.inside(path, None)
            case ClassAttr(cls, attr):
                klass = self.index.klass(cls)
                for binding in klass.constants if klass else ():
                    if binding.name == attr:
                        ctx.evidence.append(Evidence(cls.path, binding.line, "defined", f"{cls.name}.{attr}"))
                        return binding.expr, ctx.inside(cls.path, None)
        return None

    def property_value(self, attr: str, ctx: Ctx) -> tuple[Expr, Ctx] | None:
        """`self.attr` where the agent's class defines `attr` as a property: what it returns."""
        found = self.hierarchy.method(ctx.cls, attr) if ctx.cls is not None else None
        if found is None or not found[1].is_property or found[1].returns == UNKNOWN:
            return None
        owner, function = found
        ctx.evidence.append(Evidence(owner.path, function.line, "property", attr))
        return qualify(inline(function.returns, function.locals), owner.path, {}), ctx

    def _class_keyword(self, owner: ClassRef, binding: Binding, cls: ClassRef) -> tuple[Expr, Ctx] | None:
        """`cls.attr = param` in `owner.__init_subclass__`: for the class `cls`, what its class
        statement passes (`class A(Base, route="/x")`), else the parameter's default."""
        found = self.hierarchy.method(owner, "__init_subclass__")
        klass = self.index.klass(owner)
        if found is None or found[0] != owner or klass is None or cls == owner:
            return None
        init = found[1]
        end = min((m.line for m in klass.methods if m.line > init.line), default=inf)
        if not init.line < binding.line < end:
            return None
        name = binding.expr.name  # type: ignore[union-attr]
        concrete = self.index.klass(cls)
        given = dict(concrete.keywords) if concrete else {}
        if name in given:
            return given[name], Ctx(cls.path, cls)
        default = dict(init.defaults).get(name)
        return (qualify(default, owner.path, {}), Ctx(owner.path, cls)) if default is not None else None

    # paths ----------------------------------------------------------------------------------
    def path(self, expr: Expr, ctx: Ctx, depth: int = 0) -> list[Path]:
        """Alternatives of a string, each a tuple of text and markers."""
        if depth > LIMITS.evaluation_depth:
            return [cut_path("evaluation_depth")]
        match expr:
            case Str(text):
                return [(text,)]
            case Unknown(limit=limit) if limit:
                return [cut_path(limit)]
            case Param(name):
                return [(Marker(PARAM.name, name),)]
            case Named(label, value):
                return named_field(label, self.path(value, ctx, depth + 1))
            case Join(parts):
                options = [self.path(part, ctx, depth + 1) for part in parts]
                combined = [tuple(p for alt in combo for p in alt) for combo in product(*options)]
                return combined if len(combined) <= LIMITS.alternatives else [cut_path("alternatives")]
            case Alt(options) | Or(options):
                return bounded([alt for option in options for alt in self.path(option, ctx, depth + 1)])
            case Call():
                return self._call_path(expr, ctx, depth)
        found = self.constant(expr, ctx)
        if found is not None:
            return self.path(found[0], found[1], depth + 1)
        return [(HOLE,)]

    def _call_path(self, expr: Call, ctx: Ctx, depth: int) -> list[Path]:
        """A string some call returns: a configured route wrapper keeps its path argument behind
        a prefix; `os.path.join`/`posixpath.join` join; a project function is read from its body."""
        callee = expr.func
        name = (
            callee.attr
            if isinstance(callee, Attr)
            else callee.name
            if isinstance(callee, (Name, Global))
            else None
        )
        if name == _PREFIX_BUILDER:  # builds the prefix from a rollout id, not from a path
            returned = self.returned(expr, ctx)
            if returned is not None:
                return self.path(returned[0], returned[1], depth + 1)
            return [(), ("/ng-rollout/", Marker(HOLE.name, "rollout_id"))]
        if name in self.settings.route_wrappers:
            first = expr.args[0] if expr.args else dict(expr.kwargs).get("url_path")
            if first is None:
                return [(PREFIX,)]
            return [(PREFIX, *alt) for alt in self.path(first, ctx, depth + 1)]
        if (
            isinstance(callee, (Name, Global, Attr))
            and self.index.lookup_dotted(ctx.path, callee) in _PATH_JOINS
        ):
            return join_paths(self.path(arg, ctx, depth + 1) for arg in expr.args)
        if isinstance(callee, Name) and callee.name == "str" and len(expr.args) == 1:
            return self.path(expr.args[0], ctx, depth + 1)
        parts = self._path_object(expr, ctx)
        if parts is not None:  # `PurePosixPath("/v1") / "responses"`
            return join_paths(self.path(part, ctx, depth + 1) for part in parts)
        match callee, expr.args:
            case Attr(base, "rstrip" | "lstrip" | "strip" as strip), () | (Str(),):  # `path.rstrip("/")`
                chars = expr.args[0].text if expr.args else None  # type: ignore[union-attr]
                return [stripped(alt, strip, chars) for alt in self.path(base, ctx, depth + 1)]
        match callee:
            case Attr(Str(separator), "join") if len(expr.args) == 1:  # `"/".join(SEGMENTS)`
                found = self.constant(expr.args[0], ctx)
                if found is not None and isinstance(found[0], Seq):
                    return self.path(str_join(separator, found[0]), found[1], depth + 1)
            case Attr(template, "format") if not isinstance(template, Str):  # `TEMPLATE.format(...)`
                texts = self.path(template, ctx, depth + 1)
                if all(all(isinstance(part, str) for part in text) for text in texts):
                    built = [str_format("".join(t), list(expr.args), expr.kwargs) for t in texts]  # type: ignore[arg-type]
                    return bounded([alt for value in built for alt in self.path(value, ctx, depth + 1)])
        returned = self.returned(expr, ctx)
        if returned is None:
            return [(HOLE,)]
        return self.path(returned[0], returned[1], depth + 1)

    def _path_object(self, expr: Expr, ctx: Ctx) -> tuple[Expr, ...] | None:
        """The parts a `pathlib` pure path is built from (`PurePosixPath(a, b)`, `.joinpath(c)`
        and `/ d`), None if the expression is not one."""
        match expr:
            case Call(Attr(inner, "joinpath"), args):
                parts = self._path_object(inner, ctx)
                return (*parts, *args) if parts is not None else None
            case Call(Name() | Global() | Attr() as func, args) if (
                self.index.lookup_dotted(ctx.path, func) in _PATH_CLASSES
            ):
                return args
        return None

    # calls ------------------------------------------------------------------------------------
    def function_target(self, func: Expr, ctx: Ctx) -> tuple[FunctionRef, bool] | None:
        """The project function a call reaches, and whether through `self`."""
        match func:
            case Attr(SelfRef(), attr) if ctx.cls is not None:
                found = self.hierarchy.method(ctx.cls, attr)
                return (FunctionRef(found[0].path, found[0].name, attr), True) if found else None
            case Attr(Call(Name("super")), attr) if ctx.cls is not None:
                for owner in self.hierarchy.mro(ctx.cls)[1:]:
                    klass = self.index.klass(owner)
                    if klass and any(m.name == attr for m in klass.methods):
                        return FunctionRef(owner.path, owner.name, attr), True
                return None
            case Name() | Global() | Attr():
                found_name = self.index.lookup_dotted(ctx.path, func)
                if isinstance(found_name, FunctionRef):
                    return found_name, False
        return None

    def returned(self, expr: Call, ctx: Ctx) -> tuple[Expr, Ctx] | None:
        """What a call of a project function or method returns, in the caller's terms: its return
        expressions with the parameters bound to the call's arguments."""
        target = self.function_target(expr.func, ctx)
        if target is None:
            return None
        ref, via_self = target
        function = self.hierarchy.function(ref)
        if function is None or (function.returns == UNKNOWN and not function.returns.limit):  # type: ignore[union-attr]
            return None
        kwargs, _ = expand_kwargs(expr.kwargs)
        args = tuple(qualify(a, ctx.path) for a in expr.args)
        bindings = bind_params(function, args, {k: qualify(v, ctx.path) for k, v in kwargs.items()}, via_self)
        value = qualify(inline(function.returns, function.locals), ref.path, bindings)
        owner = ctx.cls if via_self else ClassRef(ref.path, ref.owner) if ref.owner else None
        return value, ctx.inside(ref.path, owner)

    def is_client(self, receiver: Expr, ctx: Ctx) -> bool:
        """A server client: `self.server_client`, one stored on `self` in any method, or a parameter."""
        match receiver:
            case Param() | Attr(_, "server_client"):
                return True
            case Attr(SelfRef(), attr) if ctx.cls is not None:
                read = self.property_value(attr, ctx)  # `@property def client(self): return ...`
                if read is not None:
                    return isinstance(read[0], Attr) and self.is_client(read[0], ctx)
                found = self.hierarchy.class_binding(ctx.cls, attr)
                return (
                    found is not None
                    and isinstance(found[1].expr, Attr)
                    and found[1].expr.attr == "server_client"
                )
        return False

    # servers ----------------------------------------------------------------------------------
    def server(self, expr: Expr, ctx: Ctx, depth: int = 0) -> list[Server]:
        """Alternatives of a server name."""
        if depth > LIMITS.evaluation_depth:
            return [Unresolved("evaluation_depth")]
        match expr:
            case Unknown(limit=limit) if limit:
                return [Unresolved(limit)]
            case Alt(options):
                return [alt for option in options for alt in self.server(option, ctx, depth + 1)]
            case Named(_, value):
                return self.server(value, ctx, depth + 1)
            case Or(options):
                return self._first_set(options, ctx, depth)
            case Param():
                return [FromParam()]
            case Attr(owner, "name") | Item(Call(Attr(owner, "model_dump" | "dict")), "name") if (
                owner == _CONFIG
            ):
                return [OwnName()]
            case Attr(Attr(config, key), "name") if config == _CONFIG:
                return [ConfigRef(key)]
            case Attr(Item(Attr(config, key), member), "name") if config == _CONFIG:
                return [ConfigRef(f"{key}.{member}")]  # a mapping of references: `participants["a"]`
            case Item(Item(Call(Attr(config, dump)), key), "name") if config == _CONFIG and dump in _DUMPS:
                return [ConfigRef(key)]
            case Str() | Join():
                return [server_of(alt) for alt in self.path(expr, ctx, depth + 1)]
            case Call(func, (_, default)) if (
                isinstance(func, (Name, Global, Attr))
                and self.index.lookup_dotted(ctx.path, func) in _ENVIRONMENT
            ):  # `os.environ.get(VAR, self.config.name)`: the default unless the variable is set
                return self._first_set((UNKNOWN, default), ctx, depth)
            case Call():
                returned = self.returned(expr, ctx)
                if returned is not None:
                    return self.server(returned[0], returned[1], depth + 1)
        found = self.constant(expr, ctx)
        if found is not None:
            return self.server(found[0], found[1], depth + 1)
        match expr:
            case Attr(Attr(SelfRef(), alias), attr) if ctx.cls is not None:
                # `self.<alias>.name` where <alias> was bound to self.config
                bound = self.hierarchy.class_binding(ctx.cls, alias)
                if bound and bound[1].expr == _CONFIG:
                    ctx.evidence.append(Evidence(bound[0].path, bound[1].line, "bound", f"self.{alias}"))
                    return self.server(Attr(_CONFIG, attr), ctx, depth + 1)
        return [Unresolved()]

    def _first_set(self, options: tuple[Expr, ...], ctx: Ctx, depth: int) -> list[Server]:
        """`a or b`: the first option that names a server; one that cannot be resolved (an
        optional override, an environment variable) is taken as not set, as it is by default."""
        unset = False
        cut: list[Server] = []  # options not followed to the end: they may be set, and name anything
        for option in options:
            if isinstance(option, Const):  # `None`, `""`: not set
                continue
            found = self.server(option, ctx, depth + 1)
            if not found:
                continue
            if all(isinstance(s, Unresolved) for s in found):
                unset = True
                cut.extend(s for s in found if s.limit)  # type: ignore[union-attr]
                continue
            return cut + found
        return cut or ([Unresolved()] if unset else [])

    def http_method(self, expr: Expr, ctx: Ctx) -> tuple[str | None, str | None]:
        """The HTTP method a client call uses, when it is one text (`"POST"`, `Method.POST`,
        `http.HTTPMethod.POST`); else None, with the bound of `LIMITS` that cut the evaluation of
        the method, if one did (a cut method may still be POST)."""
        if isinstance(expr, (Name, Global, Attr)):
            found = self.index.lookup_dotted(ctx.path, expr)
            if isinstance(found, External) and found.dotted.startswith("http.HTTPMethod."):
                return found.dotted.rsplit(".", 1)[1], None
        alternatives = self.path(expr, ctx)
        texts = {"".join(alt) for alt in alternatives if all(isinstance(p, str) for p in alt)}  # type: ignore[arg-type]
        if len(texts) == 1 and len(alternatives) == 1:
            return texts.pop().upper(), None
        return None, path_limit(alternatives)
