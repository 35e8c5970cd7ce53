"""The project index: modules by path and dotted name, imports, classes and their bases.

Modules are parsed on demand: resolving an import or a base class parses the module it names,
so the prefilter only has to pick the files where a self-call can start.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from posixpath import dirname

from .facts import Binding, ClassFacts, Expr, FunctionFacts, Import, ModuleFacts

_MAX_DEPTH = 30


@dataclass(frozen=True)
class ClassRef:
    path: str
    name: str


@dataclass(frozen=True)
class FunctionRef:
    path: str
    owner: str | None  # class name, None for a module-level function
    name: str


def dotted(expr: Expr) -> str | None:
    """`a.b.c` for a chain of attributes on a free name."""
    if expr[0] == "n":
        return expr[1]
    if expr[0] == "a":
        base = dotted(expr[1])
        return f"{base}.{expr[2]}" if base else None
    return None


class Index:
    def __init__(self, py_files: set[str], load: Callable[[str], ModuleFacts | None]):
        self.py_files = py_files
        self._load = load
        self._modules: dict[str, ModuleFacts | None] = {}
        self._agent_memo: dict[ClassRef, bool] = {}
        self._lookup_memo: dict[tuple[str, str], tuple[str, object] | None] = {}
        self._bases_memo: dict[ClassRef, list[ClassRef | str]] = {}
        self._mro_memo: dict[ClassRef, list[ClassRef]] = {}
        self._names_memo: dict[str, dict[str, tuple[str, object]]] = {}
        self.agent_bases: frozenset[str] = frozenset()

    # modules ---------------------------------------------------------------------------
    def module(self, path: str) -> ModuleFacts | None:
        if path not in self._modules:
            self._modules[path] = self._load(path) if path in self.py_files else None
        return self._modules[path]

    def parsed(self) -> Iterator[ModuleFacts]:
        return (m for m in list(self._modules.values()) if m is not None)

    def module_path(self, name: str, importer: str, level: int = 0) -> str | None:
        """File of a dotted module name as seen from `importer` (relative, sibling, then root)."""
        parts = name.split(".") if name else []
        if level:
            base = dirname(importer)
            for _ in range(level - 1):
                base = dirname(base)
            bases = [base]
        else:
            bases = [dirname(importer), ""]  # the entrypoint's folder is on sys.path
        for base in bases:
            stem = "/".join([p for p in [base, *parts] if p])
            for candidate in (f"{stem}.py", f"{stem}/__init__.py"):
                if candidate in self.py_files:
                    return candidate
        return None

    @staticmethod
    def module_name(path: str) -> str:
        stem = path[: -len("/__init__.py")] if path.endswith("/__init__.py") else path.removesuffix(".py")
        return stem.replace("/", ".")

    def _names(self, path: str, module: ModuleFacts) -> dict[str, tuple[str, object]]:
        """Module-level names defined in the module itself (imports are resolved separately)."""
        if path not in self._names_memo:
            table: dict[str, tuple[str, object]] = {}
            for binding in module.constants:
                table[binding.name] = ("const", (path, binding))
            for function in module.functions:
                table[function.name] = ("function", FunctionRef(path, None, function.name))
            for klass in module.classes:
                table[klass.name] = ("class", ClassRef(path, klass.name))
            self._names_memo[path] = table
        return self._names_memo[path]

    # names ------------------------------------------------------------------------------
    def lookup(self, path: str, name: str, depth: int = 0) -> tuple[str, object] | None:
        """What a module-level name is: ("class", ClassRef), ("function", FunctionRef),
        ("const", (path, Binding)), ("module", path), ("external", dotted) or None."""
        key = (path, name)
        if key in self._lookup_memo:
            return self._lookup_memo[key]
        module = self.module(path)
        if module is None or depth > _MAX_DEPTH:
            return None
        self._lookup_memo[key] = None  # an import cycle resolves to nothing
        found = self._names(path, module).get(name)
        if found is None:
            imports = [imp for imp in module.imports if imp.local == name]
            if imports:
                found = self.resolve_import(path, imports[-1], depth + 1)
        self._lookup_memo[key] = found
        return found

    def resolve_import(self, path: str, imp: Import, depth: int) -> tuple[str, object] | None:
        if imp.name is None:
            target = self.module_path(imp.module, path)
            return ("module", target) if target else ("external", imp.module)
        target = self.module_path(imp.module, path, imp.level)
        if target is not None:
            found = self.lookup(target, imp.name, depth)
            if found is not None:
                return found
            submodule = self.module_path(
                f"{imp.module}.{imp.name}" if imp.module else imp.name, path, imp.level
            )
            if submodule:
                return ("module", submodule)
            return None
        if imp.level:
            return None
        return ("external", f"{imp.module}.{imp.name}")

    def origin(self, path: str, expr: Expr) -> str | None:
        """The file a name or `module.name` comes from, by the importing module's own import
        statements: no other module is parsed to find out (re-exports are not followed)."""
        if expr[0] == "g":
            path, expr = expr[1], ("n", expr[2])
        module = self.module(path)
        if module is None:
            return None
        if expr[0] == "a" and expr[1][0] == "n":
            imports = [i for i in module.imports if i.local == expr[1][1] and i.name is None]
            return self.module_path(imports[-1].module, path) if imports else None
        if expr[0] != "n":
            return None
        if expr[1] in self._names(path, module):
            return path
        imports = [i for i in module.imports if i.local == expr[1] and i.name is not None]
        return self.module_path(imports[-1].module, path, imports[-1].level) if imports else None

    def lookup_dotted(self, path: str, expr: Expr) -> tuple[str, object] | None:
        """Resolve `name` or `mod.attr.attr` in a module's namespace."""
        if expr[0] == "n":
            return self.lookup(path, expr[1])
        if expr[0] == "g":
            return self.lookup(expr[1], expr[2])
        if expr[0] != "a":
            return None
        base = self.lookup_dotted(path, expr[1])
        if base is None:
            return None
        kind, value = base
        if kind == "module":
            return self.lookup(value, expr[2])  # type: ignore[arg-type]
        if kind == "external":
            return ("external", f"{value}.{expr[2]}")
        if kind == "class":
            return ("attr", (value, expr[2]))
        return None

    # classes ----------------------------------------------------------------------------
    def klass(self, ref: ClassRef) -> ClassFacts | None:
        module = self.module(ref.path)
        if module is None:
            return None
        for klass in module.classes:
            if klass.name == ref.name:
                return klass
        return None

    def qualname(self, ref: ClassRef) -> str:
        return f"{self.module_name(ref.path)}.{ref.name}"

    def bases(self, ref: ClassRef) -> list[ClassRef | str]:
        """Direct bases: a ClassRef in the project, or the dotted name of an external class."""
        if ref not in self._bases_memo:
            self._bases_memo[ref] = self._bases(ref)
        return self._bases_memo[ref]

    def _bases(self, ref: ClassRef) -> list[ClassRef | str]:
        klass = self.klass(ref)
        if klass is None:
            return []
        result: list[ClassRef | str] = []
        for base in klass.bases:
            if base[0] == "c":  # Generic[...] parametrisations and the like
                continue
            for kind, value in self._candidates(ref.path, base):
                if (kind == "class" or kind == "external") and value not in result:
                    result.append(value)  # type: ignore[arg-type]
        return result

    def _candidates(self, path: str, expr: Expr) -> list[tuple[str, object]]:
        """Everything a base-class name may be: its binding in the module and each import of it
        (`try: from a import Base` / `except ImportError: Base = object` gives both)."""
        found = self.lookup_dotted(path, expr)
        candidates = [found] if found is not None else []
        module = self.module(path)
        if expr[0] == "n" and module is not None:
            for imp in module.imports:
                if imp.local == expr[1]:
                    other = self.resolve_import(path, imp, 1)
                    if other is not None and other not in candidates:
                        candidates.append(other)
        return candidates

    def mro(self, ref: ClassRef) -> list[ClassRef]:
        """Project classes in method-resolution order (depth first, left to right, no repeats).

        Iterative and without a depth cut: a long inheritance chain costs time linear in its length."""
        if ref in self._mro_memo:
            return self._mro_memo[ref]
        order: list[ClassRef] = []
        seen: set[ClassRef] = set()
        stack: list[ClassRef] = [ref]
        while stack:
            current = stack.pop()
            if current in seen:
                continue
            seen.add(current)
            order.append(current)
            stack.extend(reversed([b for b in self.bases(current) if isinstance(b, ClassRef)]))
        self._mro_memo[ref] = order
        return order

    def is_agent(self, ref: ClassRef) -> bool:
        """Does the class derive from a configured agent base? Decided for every class on the way
        up once (an explicit stack, so no inheritance depth exhausts the interpreter's recursion)."""
        memo = self._agent_memo
        if ref in memo:
            return memo[ref]
        stack: list[tuple[ClassRef, bool]] = [(ref, False)]
        on_path: set[ClassRef] = set()
        while stack:
            current, expanded = stack.pop()
            if current in memo:
                continue
            bases = self.bases(current)
            if expanded:
                on_path.discard(current)
                memo[current] = self.qualname(current) in self.agent_bases or any(
                    (base in self.agent_bases) if isinstance(base, str) else memo.get(base, False)
                    for base in bases
                )
                continue
            on_path.add(current)
            stack.append((current, True))
            stack.extend(
                (base, False)
                for base in bases
                if isinstance(base, ClassRef) and base not in memo and base not in on_path
            )
        return memo[ref]

    def method(self, ref: ClassRef, name: str) -> tuple[ClassRef, FunctionFacts] | None:
        for owner in self.mro(ref):
            klass = self.klass(owner)
            if klass is not None:
                for method in klass.methods:
                    if method.name == name:
                        return owner, method
        return None

    def class_binding(self, ref: ClassRef, name: str) -> tuple[ClassRef, Binding] | None:
        """A class constant, else an attribute assigned on `self`, along the MRO."""
        mro = self.mro(ref)
        for attr in ("constants", "instance_attrs"):
            for owner in mro:
                klass = self.klass(owner)
                if klass is not None:
                    for binding in getattr(klass, attr):
                        if binding.name == name:
                            return owner, binding
        return None

    def function(self, ref: FunctionRef) -> FunctionFacts | None:
        if ref.owner is not None:
            found = self.method(ClassRef(ref.path, ref.owner), ref.name)
            return found[1] if found else None
        module = self.module(ref.path)
        if module is None:
            return None
        for function in module.functions:
            if function.name == ref.name:
                return function
        return None
