"""The project index: modules by path and dotted name, and what a name in a module stands for.

Modules are parsed on demand: resolving an import or a base class parses the module it names,
so the prefilter only has to pick the files where a self-call can start.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from posixpath import dirname
from typing import NamedTuple, get_args

from .expr import Attr, Expr, Global, Name, compare_by_type
from .facts import Binding, ClassFacts, FunctionFacts, Import, ModuleFacts
from .limits import LIMITS


class ClassRef(NamedTuple):
    path: str
    name: str


class FunctionRef(NamedTuple):
    path: str
    owner: str | None  # class name, None for a module-level function
    name: str


class ConstRef(NamedTuple):
    """A module-level constant."""

    path: str
    binding: Binding


class ModuleRef(NamedTuple):
    path: str


class External(NamedTuple):
    """Something outside the project, by dotted name (`functools.partial`)."""

    dotted: str


class ClassAttr(NamedTuple):
    """`Class.attr` where the class is in the project."""

    cls: ClassRef
    attr: str


Symbol = ClassRef | FunctionRef | ConstRef | ModuleRef | External | ClassAttr
compare_by_type(get_args(Symbol))


Names = dict[str, tuple["ModuleFacts", dict[str, Symbol]]]  # path → the facts, and their names
Paths = dict[tuple[str, str, int], "str | None"]  # (module, importing folder, level) → its file


class Index:
    def __init__(
        self,
        py_files: set[str],
        load: Callable[[str], ModuleFacts | None],
        names: Names | None = None,
        paths: Paths | None = None,
    ):
        """`names`, `paths`: what a long-lived process's last runs worked out of the same facts
        (each module's own names, checked against the very facts they come from) and of the same
        listing (where an import leads: only while the files are those of `py_files`)."""
        self.py_files = py_files
        self._load = load
        self._modules: dict[str, ModuleFacts | None] = {}
        self._lookup_memo: dict[tuple[str, str], Symbol | None] = {}
        self._names_memo: Names = names if names is not None else {}
        self._paths_memo: Paths = paths if paths is not None else {}
        self._importers_memo: dict[tuple[str, str, int], str | None] = {}
        # Where a chain of re-exports was cut at `LIMITS.import_depth`: path → the name not
        # followed and the line of its import there.
        self.cut: dict[str, tuple[str, int]] = {}

    # modules ---------------------------------------------------------------------------
    def module(self, path: str) -> ModuleFacts | None:
        if path not in self._modules:
            self._modules[path] = self._load(path) if path in self.py_files else None
        return self._modules[path]

    def parsed(self) -> Iterator[ModuleFacts]:
        return (m for m in list(self._modules.values()) if m is not None)

    def module_path(self, name: str, importer: str, level: int = 0) -> str | None:
        """File of a dotted module name as seen from `importer` (relative, sibling, then root);
        worked out once per importing folder, and found once per importer (resolution asks again
        for every name imported)."""
        key = (name, importer, level)
        if key not in self._importers_memo:
            folder = (name, dirname(importer), level)
            if folder not in self._paths_memo:
                self._paths_memo[folder] = self._module_path(*folder)
            self._importers_memo[key] = self._paths_memo[folder]
        return self._importers_memo[key]

    def _module_path(self, name: str, folder: str, level: int) -> str | None:
        parts = name.split(".") if name else []
        if level:
            base = folder
            for _ in range(level - 1):
                base = dirname(base)
            bases = [base]
        else:
            bases = [folder, ""]  # the entrypoint's folder is on sys.path
        for base in bases:
            stem = "/".join([p for p in [base, *parts] if p])
            for candidate in (f"{stem}.py", f"{stem}/__init__.py"):
                if candidate in self.py_files:
                    return candidate
        return None

    def imported(self, path: str) -> set[str]:
        """The project files the module's imports name as modules (`from a.b import c`: `a/b.py`)."""
        module = self.module(path)
        if module is None:
            return set()
        found = {self.module_path(imp.module, path, imp.level) for imp in module.imports}
        return {target for target in found if target is not None}

    @staticmethod
    def module_name(path: str) -> str:
        stem = path[: -len("/__init__.py")] if path.endswith("/__init__.py") else path.removesuffix(".py")
        return stem.replace("/", ".")

    def qualname(self, ref: ClassRef) -> str:
        return f"{self.module_name(ref.path)}.{ref.name}"

    def _names(self, path: str, module: ModuleFacts) -> dict[str, Symbol]:
        """Module-level names defined in the module itself (imports are resolved separately)."""
        kept = self._names_memo.get(path)
        if kept is None or kept[0] is not module:
            table: dict[str, Symbol] = {}
            for binding in module.constants:
                table[binding.name] = ConstRef(path, binding)
            for function in module.functions:
                table[function.name] = FunctionRef(path, None, function.name)
            for klass in module.classes:
                table[klass.name] = ClassRef(path, klass.name)
            kept = self._names_memo[path] = (module, table)
        return kept[1]

    # names ------------------------------------------------------------------------------
    def defines(self, path: str, name: str) -> bool:
        """Does the module bind `name` itself (a constant, function or class), not by an import?"""
        module = self.module(path)
        return module is not None and name in self._names(path, module)

    def lookup(self, path: str, name: str, depth: int = 0) -> Symbol | None:
        """What a module-level name stands for, following imports."""
        key = (path, name)
        if key in self._lookup_memo:
            return self._lookup_memo[key]
        module = self.module(path)
        if module is None:
            return None
        if depth > LIMITS.import_depth:  # said, not silent: the name may be the agent's route
            line = next((imp.line for imp in module.imports if imp.local == name), 1)
            self.cut.setdefault(path, (name, line))
            return None
        self._lookup_memo[key] = None  # an import cycle resolves to nothing
        found = self._names(path, module).get(name)
        if found is None:
            imports = [imp for imp in module.imports if imp.local == name]
            if imports:
                found = self.resolve_import(path, imports[-1], depth + 1)
        self._lookup_memo[key] = found
        return found

    def resolve_import(self, path: str, imp: Import, depth: int) -> Symbol | None:
        if imp.name is None:
            target = self.module_path(imp.module, path)
            return ModuleRef(target) if target else External(imp.module)
        target = self.module_path(imp.module, path, imp.level)
        if target is not None:
            found = self.lookup(target, imp.name, depth)
            if found is not None:
                return found
        # `from package import module`, the package with or without an `__init__.py`
        submodule = self.module_path(f"{imp.module}.{imp.name}" if imp.module else imp.name, path, imp.level)
        if submodule:
            return ModuleRef(submodule)
        if target is not None or imp.level:
            return None
        return External(f"{imp.module}.{imp.name}")

    def candidates(self, path: str, expr: Expr) -> list[Symbol]:
        """Everything a name may be: its binding in the module and each import of it
        (`try: from a import Base` / `except ImportError: Base = object` gives both)."""
        found = self.lookup_dotted(path, expr)
        result = [found] if found is not None else []
        module = self.module(path)
        if isinstance(expr, Name) and module is not None:
            for imp in module.imports:
                if imp.local == expr.name:
                    other = self.resolve_import(path, imp, 1)
                    if other is not None and other not in result:
                        result.append(other)
        return result

    def origin(self, path: str, expr: Expr) -> str | None:
        """The file a name or `module.name` comes from, by the importing module's own import
        statements: no other module is parsed to find out (re-exports are not followed)."""
        if isinstance(expr, Global):
            path, expr = expr.path, Name(expr.name)
        module = self.module(path)
        if module is None:
            return None
        match expr:
            case Attr(Name(base), _):
                imports = [i for i in module.imports if i.local == base and i.name is None]
                return self.module_path(imports[-1].module, path) if imports else None
            case Name(name):
                if name in self._names(path, module):
                    return path
                imports = [i for i in module.imports if i.local == name and i.name is not None]
                return self.module_path(imports[-1].module, path, imports[-1].level) if imports else None
        return None

    def lookup_dotted(self, path: str, expr: Expr) -> Symbol | None:
        """Resolve `name` or `mod.attr.attr` in a module's namespace."""
        match expr:
            case Name(name):
                return self.lookup(path, name)
            case Global(module_path, name):
                return self.lookup(module_path, name)
            case Attr(base, attr):
                match self.lookup_dotted(path, base):
                    case ModuleRef(module_path):
                        return self.lookup(module_path, attr)
                    case External(dotted):
                        return External(f"{dotted}.{attr}")
                    case ClassRef() as cls:
                        return ClassAttr(cls, attr)
        return None

    # definitions ------------------------------------------------------------------------
    def klass(self, ref: ClassRef) -> ClassFacts | None:
        module = self.module(ref.path)
        if module is None:
            return None
        for klass in module.classes:
            if klass.name == ref.name:
                return klass
        return None

    def module_function(self, path: str, name: str) -> FunctionFacts | None:
        module = self.module(path)
        for function in module.functions if module else ():
            if function.name == name:
                return function
        return None
