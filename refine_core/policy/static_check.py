"""A static check of policy programs before any process imports them.

This is a second layer, not a security boundary (the sandbox is): it refuses what a policy never
needs and what escapes usually start from — imports outside torch/math/numpy/typing, file and
library loaders (`torch.load`, `torch.hub`, `cpp_extension`, `ctypeslib`), dunder walking
(`__subclasses__`, `__globals__`), dynamic evaluation and computed attribute names, and `os`/`sys`
reached as an attribute of an allowed module (`torch.os`). Because the check is on the syntax tree,
a refused program never runs, even at import time.
"""

from __future__ import annotations

import ast
import re

from refine_core.policy.errors import ForbiddenCodeError, ProgramSyntaxError

# Modules a program may import (exactly, or a submodule of an entry in _ALLOWED_PACKAGES).
_ALLOWED_MODULES = frozenset(
    {
        "__future__",
        "math",
        "typing",
        "numpy",
        "numpy.linalg",
        "numpy.random",
        "torch",
        "torch.nn",
        "torch.nn.functional",
        "torch.distributions",
        "torch.linalg",
        "torch.special",
    }
)
_ALLOWED_PACKAGES = ("torch.nn.", "torch.distributions.")

# Attribute names refused on any object: loaders/savers, native-code entry points, the system
# modules, and frame/code-object walking.
_FORBIDDEN_ATTRIBUTES = {
    "os": "reaches the os module",
    "sys": "reaches the sys module",
    "subprocess": "reaches the subprocess module",
    "builtins": "reaches the builtins module",
    "importlib": "reaches the import machinery",
    "ctypes": "reaches ctypes",
    "ctypeslib": "numpy.ctypeslib loads shared libraries",
    "cpp_extension": "torch.utils.cpp_extension compiles and loads native code",
    "utils": "torch.utils is not needed by a policy (cpp_extension, data loaders, checkpoints)",
    "hub": "torch.hub downloads and runs code",
    "load": "loading files (torch.load / numpy.load) is not allowed in a policy",
    "save": "saving files (torch.save / numpy.save) is not allowed in a policy",
    "savez": "writing files is not allowed in a policy",
    "savez_compressed": "writing files is not allowed in a policy",
    "savetxt": "writing files is not allowed in a policy",
    "loadtxt": "reading files is not allowed in a policy",
    "genfromtxt": "reading files is not allowed in a policy",
    "fromfile": "reading files is not allowed in a policy",
    "tofile": "writing files is not allowed in a policy",
    "memmap": "memory-mapping files is not allowed in a policy",
    "load_library": "loading shared libraries is not allowed",
    "ops": "torch.ops exposes load_library and custom native operators",
    "classes": "torch.classes exposes load_library",
    "jit": "torch.jit loads and compiles serialized code",
    "compile": "torch.compile invokes a compiler",
    "package": "torch.package loads pickled code",
    "multiprocessing": "spawning processes is not allowed in a policy",
    "distributed": "network communication is not allowed in a policy",
    "f_globals": "frame walking",
    "f_locals": "frame walking",
    "f_builtins": "frame walking",
    "f_back": "frame walking",
    "tb_frame": "frame walking",
    "tb_next": "frame walking",
    "gi_frame": "frame walking",
    "gi_code": "frame walking",
    "cr_frame": "frame walking",
    "ag_frame": "frame walking",
    "co_code": "code-object access",
    "func_globals": "frame walking",
    "library": "torch.library registers native operators",
    "serialization": "torch.serialization loads pickles",
    "from_file": "reading files is not allowed in a policy",
    "fromregex": "reading files is not allowed in a policy",
    "open_memmap": "memory-mapping files is not allowed in a policy",
    "DataSource": "numpy.DataSource opens files and URLs",
    "f2py": "numpy.f2py compiles native code",
    "distutils": "distutils compiles native code",
    "profiler": "the profiler writes trace files",
    "onnx": "onnx export writes files",
    "_C": "torch._C is the native core",
    "_dynamo": "torch._dynamo compiles code",
    "_inductor": "torch._inductor compiles native code",
}
# `__init__` is the one dunder attribute a policy needs (`super().__init__()`); calling it
# cannot reach anything that another refused dunder would not also be needed for.
_ALLOWED_DUNDER_ATTRIBUTES = frozenset({"__init__"})
_ALLOWED_DUNDER_NAMES = frozenset({"__name__"})
# String constants that look like dunders but are harmless (`if __name__ == "__main__":`).
_ALLOWED_DUNDER_STRINGS = frozenset({"__init__", "__main__", "__name__"})
_DUNDER_IN_TEXT = re.compile(r"__[A-Za-z]\w*?__")

_FORBIDDEN_NAMES = {
    "eval": "dynamic evaluation",
    "exec": "dynamic execution",
    "compile": "dynamic compilation",
    "__import__": "dynamic import",
    "open": "file access",
    "globals": "namespace access",
    "locals": "namespace access",
    "vars": "namespace access",
    "breakpoint": "debugger entry",
    "input": "reading standard input",
    "memoryview": "raw memory access",
    "help": "the interactive help system runs a pager",
    "exit": "exiting the process",
    "quit": "exiting the process",
}
_ATTRIBUTE_BUILTINS = frozenset({"getattr", "setattr", "delattr", "hasattr"})


def check_program_source(source: str) -> None:
    """Raise `ForbiddenCodeError` (with the line and the reason) if the program uses anything
    outside what a structured policy needs; `ProgramSyntaxError` if it does not parse."""
    if not isinstance(source, str):
        raise ProgramSyntaxError(f"program source must be text, got {type(source).__name__}")
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise ProgramSyntaxError(f"{exc.msg}: {(exc.text or '').strip()!r}", exc.lineno) from None
    except ValueError as exc:
        raise ProgramSyntaxError(str(exc)) from None
    _check_builtin_names(tree, ())
    module_aliases: set[str] = set()
    called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    for node in ast.walk(tree):
        _check_node(node, module_aliases)
        # `g = getattr; g(obj, name)` would dodge the constant-name rule below.
        if isinstance(node, ast.Name) and node.id in _ATTRIBUTE_BUILTINS and id(node) not in called:
            _refuse(node, f"{node.id} may only be called directly, with a constant name")
    # Private attributes anywhere along a module's attribute chain (torch._C, np.lib._x) lead to
    # native internals; checked once every import alias is known.
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and node.attr not in _ALLOWED_DUNDER_ATTRIBUTES
        ):
            root = _chain_root(node)
            if root is not None and root in module_aliases:
                _refuse(node, f"private attribute {node.attr!r} of module {root!r}")


def _check_builtin_names(node: ast.AST, arguments: tuple[frozenset[str], ...]) -> None:
    """Refuse uses of dangerous builtins, except where the name is an argument of an enclosing
    function (PyTorch code often writes `def forward(self, input)`). Arguments are the one
    binding that cannot alias the builtin itself (unlike `eval = eval`); defaults, decorators
    and annotations belong to the enclosing scope and are checked there."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
        args = node.args
        outer = [*args.defaults, *(d for d in args.kw_defaults if d is not None)]
        every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
        every = [a for a in every if a is not None]
        outer += [a.annotation for a in every if a.annotation is not None]
        if not isinstance(node, ast.Lambda):
            outer += [*node.decorator_list, *([node.returns] if node.returns else [])]
        for child in outer:
            _check_builtin_names(child, arguments)
        inner = arguments + (frozenset(a.arg for a in every),)
        for child in node.body if isinstance(node.body, list) else [node.body]:
            _check_builtin_names(child, inner)
        return
    if isinstance(node, ast.Global | ast.Nonlocal):
        for name in node.names:
            if name in _FORBIDDEN_NAMES:
                _refuse(node, f"declaring {name!r} global/nonlocal is not allowed")
    if isinstance(node, ast.Name) and node.id in _FORBIDDEN_NAMES:
        if not (isinstance(node.ctx, ast.Load) and any(node.id in scope for scope in arguments)):
            _refuse(node, f"name {node.id!r} is not allowed ({_FORBIDDEN_NAMES[node.id]})")
    for child in ast.iter_child_nodes(node):
        _check_builtin_names(child, arguments)


def _refuse(node: ast.AST, reason: str) -> None:
    raise ForbiddenCodeError(reason, getattr(node, "lineno", None))


def _module_allowed(name: str) -> bool:
    return name in _ALLOWED_MODULES or name.startswith(_ALLOWED_PACKAGES)


def _check_node(node: ast.AST, module_aliases: set[str]) -> None:
    if isinstance(node, ast.Import):
        for alias in node.names:
            if not _module_allowed(alias.name):
                _refuse(node, f"import of {alias.name!r} is not allowed (allowed: torch, "
                        "torch.nn, torch.nn.functional, torch.distributions, math, numpy, typing)")
            _check_dotted(node, alias.name)
            module_aliases.add(alias.asname or alias.name.split(".")[0])
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            _refuse(node, "relative imports are not allowed")
        module = node.module or ""
        if not _module_allowed(module):
            _refuse(node, f"import from {module!r} is not allowed")
        for alias in node.names:
            if alias.name == "*":
                _refuse(node, f"'from {module} import *' hides what is imported; name each item")
            full = f"{module}.{alias.name}"
            _check_dotted(node, full)
            if _is_dunder(alias.name):
                _refuse(node, f"import of dunder name {alias.name!r}")
            if module != "__future__":
                module_aliases.add(alias.asname or alias.name)
    elif isinstance(node, ast.Attribute):
        _check_attribute_name(node, node.attr)
    elif isinstance(node, ast.Name):
        if _is_dunder(node.id) and node.id not in _ALLOWED_DUNDER_NAMES:
            _refuse(node, f"dunder name {node.id!r} is not allowed")
    elif isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Name) and func.id in _ATTRIBUTE_BUILTINS:
            if len(node.args) < 2 or not (
                isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
            ):
                _refuse(node, f"{func.id}() needs a constant attribute name")
            _check_attribute_name(node, node.args[1].value)
    elif isinstance(node, ast.Constant) and isinstance(node.value, str):
        # A dunder spelled in a string is only useful for reflection tricks, including format
        # strings such as "{0.__globals__}".
        for word in _DUNDER_IN_TEXT.findall(node.value):
            if word not in _ALLOWED_DUNDER_STRINGS:
                _refuse(node, f"string constant names the dunder attribute {word!r}")


def _check_dotted(node: ast.AST, dotted: str) -> None:
    for part in dotted.split(".")[1:]:
        _check_attribute_name(node, part)


def _check_attribute_name(node: ast.AST, attr: str) -> None:
    if _is_dunder(attr) and attr not in _ALLOWED_DUNDER_ATTRIBUTES:
        _refuse(node, f"dunder attribute {attr!r} is not allowed (reflection can escape)")
    if attr in _FORBIDDEN_ATTRIBUTES:
        _refuse(node, f"attribute {attr!r} is not allowed: {_FORBIDDEN_ATTRIBUTES[attr]}")


def _chain_root(node: ast.AST) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")
