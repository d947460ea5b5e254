"""Reading a policy program's syntax tree for the facts the diagnostic battery checks.

Why the syntax tree and not the running module: diagnostics are generated from the program
and the column schema only, before any rollout exists, and the program is untrusted text, so
nothing here executes it. Two facts are extracted:
- the initial value of every parameter a `weight_*` key reports (the sign the author expected);
- for each `latent_*` key whose value is a closed-form combination of input coordinates,
  reported weights and constants, a NumPy expression over table columns that recomputes it.
Anything the reader does not understand is simply left out (the check is then not generated).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from refine_core.rollout.schema import is_info_key, is_latent, is_weight
from refine_core.tasks.spec import TaskSpec

_UNARY_FUNCS = {
    "sigmoid": "_sigmoid",
    "tanh": "np.tanh",
    "exp": "np.exp",
    "abs": "np.abs",
    "sqrt": "np.sqrt",
    "relu": "_relu",
    "sin": "np.sin",
    "cos": "np.cos",
    "log": "np.log",
}
_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**"}


@dataclass
class ProgramFacts:
    """What the battery may check about one program."""

    initial: dict[str, float] = field(default_factory=dict)
    """weight info key -> initial value of the parameter element it reports."""
    reconstructions: dict[str, str] = field(default_factory=dict)
    """latent info key -> NumPy expression over `C("<column>")` that recomputes it."""


@dataclass(frozen=True)
class _Cols:
    """Several columns along one tensor dimension (a slice), reduced later by mean/sum."""

    exprs: tuple[str, ...]


def _const_number(node: ast.AST) -> float | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(
        node.value, bool
    ):
        return float(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _const_number(node.operand)
        if inner is not None:
            return -inner if isinstance(node.op, ast.USub) else inner
    return None


def _call_name(node: ast.AST) -> str | None:
    """`torch.tensor` -> "tensor", `nn.Parameter` -> "Parameter", `slice` -> "slice"."""
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute):
            return func.attr
        if isinstance(func, ast.Name):
            return func.id
    return None


def _tensor_values(node: ast.AST) -> list[float] | None:
    """Initial values of `torch.tensor(c | [c, ...])`, `torch.full((n,), c)`,
    `torch.zeros(n)`, `torch.ones(n)` or a plain number."""
    number = _const_number(node)
    if number is not None:
        return [number]
    name = _call_name(node)
    if name is None or not isinstance(node, ast.Call):
        return None
    args = node.args
    if name in ("tensor", "as_tensor") and args:
        first = args[0]
        if isinstance(first, (ast.List, ast.Tuple)):
            values = [_const_number(e) for e in first.elts]
            return None if any(v is None for v in values) else values  # type: ignore[return-value]
        number = _const_number(first)
        return None if number is None else [number]
    if name in ("full", "zeros", "ones") and args:
        shape = args[0]
        dims = shape.elts if isinstance(shape, (ast.Tuple, ast.List)) else [shape]
        sizes = [_const_number(d) for d in dims]
        if any(s is None for s in sizes) or not sizes:
            return None
        count = 1
        for s in sizes:
            count *= int(s)  # type: ignore[arg-type]
        fill = {"zeros": 0.0, "ones": 1.0}.get(name)
        if name == "full":
            fill = _const_number(args[1]) if len(args) > 1 else None
        return None if fill is None else [fill] * count
    return None


def _self_attr(node: ast.AST) -> str | None:
    if (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    ):
        return node.attr
    return None


def _find_policy_class(tree: ast.Module, class_name: str) -> ast.ClassDef | None:
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    for cls in classes:
        if cls.name == class_name:
            return cls
    with_forward = [
        c for c in classes if any(isinstance(f, ast.FunctionDef) and f.name == "forward" for f in c.body)
    ]
    return with_forward[0] if len(with_forward) == 1 else None


def _method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    for node in cls.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    return None


class _Reader:
    def __init__(self, spec: TaskSpec, params: dict[str, list[float]], consts: dict, weights: dict):
        self.spec = spec
        self.params = params  # parameter attribute -> initial values
        self.consts = consts  # non-trainable attribute -> number or slice
        self.weights = weights  # (attr, index or None) -> weight info key
        self.env: dict[str, object] = {}

    # -- expressions ------------------------------------------------------------------------
    def expr(self, node: ast.AST) -> object | None:  # noqa: C901 - one case per syntax form
        number = _const_number(node)
        if number is not None:
            return repr(number)
        if isinstance(node, ast.Name):
            return self.env.get(node.id)
        attr = _self_attr(node)
        if attr is not None:
            if attr in self.params and len(self.params[attr]) == 1:
                key = self.weights.get((attr, None)) or self.weights.get((attr, 0))
                return f'C("{key}")' if key else None
            value = self.consts.get(attr)
            return repr(float(value)) if isinstance(value, (int, float)) else None
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            left, right = self.expr(node.left), self.expr(node.right)
            if isinstance(left, str) and isinstance(right, str):
                return f"({left} {_BINOPS[type(node.op)]} {right})"
            return None
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            inner = self.expr(node.operand)
            return f"(-{inner})" if isinstance(inner, str) else None
        if isinstance(node, ast.Subscript):
            return self.subscript(node)
        if isinstance(node, ast.Call):
            return self.call(node)
        return None

    def index(self, node: ast.AST) -> int | slice | None:
        number = _const_number(node)
        if number is not None:
            return int(number)
        attr = _self_attr(node)
        if attr is not None:
            value = self.consts.get(attr)
            return value if isinstance(value, (int, slice)) else None
        if isinstance(node, ast.Slice):
            parts = [None if p is None else self.number(p) for p in (node.lower, node.upper, node.step)]
            if any(p is None and q is not None for p, q in zip(parts, (node.lower, node.upper, node.step), strict=False)):
                return None
            return slice(*[None if p is None else int(p) for p in parts])
        return None

    def number(self, node: ast.AST) -> float | None:
        """A literal number or a numeric constant read through `self`."""
        number = _const_number(node)
        if number is not None:
            return number
        attr = _self_attr(node)
        value = self.consts.get(attr) if attr is not None else None
        return float(value) if isinstance(value, (int, float)) else None

    def subscript(self, node: ast.Subscript) -> object | None:
        base = node.value
        if not isinstance(base, ast.Name):
            return None
        value = self.env.get(base.id)
        if isinstance(value, _Cols):
            return self._cols_subscript(value, node)
        if not (isinstance(value, tuple) and value and value[0] == "input"):
            return None
        clip = value[2] if len(value) > 2 else None
        spec_input = self.spec.input(value[1])
        dims = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if len(dims) != len(spec_input.shape) + 1:
            return None
        first = self.index(dims[0])
        if not (isinstance(first, slice) and first == slice(None)):
            return None
        ranges: list[list[int]] = []
        sliced = 0
        for dim, size in zip(dims[1:], spec_input.shape, strict=False):
            idx = self.index(dim)
            if isinstance(idx, int):
                if not -size <= idx < size:
                    return None
                ranges.append([idx % size])
            elif isinstance(idx, slice):
                ranges.append(list(range(size))[idx])
                sliced += 1
            else:
                return None
        if sliced > 1:
            return None
        flat: list[str] = []

        def walk(level: int, offset: int) -> None:
            if level == len(ranges):
                leaf = f'C("{spec_input.columns[offset]}")'
                flat.append(leaf if clip is None else f"np.clip({leaf}, {clip[0]}, {clip[1]})")
                return
            stride = 1
            for s in spec_input.shape[level + 1:]:
                stride *= s
            for i in ranges[level]:
                walk(level + 1, offset + i * stride)

        walk(0, 0)
        return _Cols(tuple(flat)) if sliced else flat[0]

    def _cols_subscript(self, cols: _Cols, node: ast.Subscript) -> object | None:
        """`x[:, a:b]` or `x[:, k]` on a batch of per-element columns."""
        dims = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if len(dims) != 2:
            return None
        first = self.index(dims[0])
        if not (isinstance(first, slice) and first == slice(None)):
            return None
        idx = self.index(dims[1])
        size = len(cols.exprs)
        if isinstance(idx, int):
            return cols.exprs[idx] if -size <= idx < size else None
        if isinstance(idx, slice):
            chosen = cols.exprs[idx]
            return _Cols(chosen) if chosen else None
        return None

    def input_source(self, node: ast.AST) -> tuple | None:
        """The input a value stands for when it is an input wrapped in nan_to_num and/or a
        clamp with numeric bounds: ("input", name, clip bounds or None)."""
        if isinstance(node, ast.Name):
            value = self.env.get(node.id)
            return value if isinstance(value, tuple) and value and value[0] == "input" else None
        name = _call_name(node)
        if not isinstance(node, ast.Call) or not node.args:
            return None
        inner = self.input_source(node.args[0])
        if inner is None:
            return None
        if name == "nan_to_num":
            return inner
        if name in ("clamp", "clip"):
            bounds = self._bounds(node)
            if bounds is None or (len(inner) > 2 and inner[2] is not None):
                return None
            return ("input", inner[1], bounds)
        return None

    def _bounds(self, node: ast.Call) -> tuple[str, str] | None:
        """Bounds of `clamp(x, lo, hi)` / `clamp(x, min=lo, max=hi)` as NumPy expressions."""
        given = dict(zip(("min", "max"), node.args[1:3], strict=False))
        given.update({k.arg: k.value for k in node.keywords if k.arg in ("min", "max")})
        out = []
        for key, default in (("min", "-np.inf"), ("max", "np.inf")):
            bound = given.get(key)
            if bound is None:
                out.append(default)
                continue
            expr = self.expr(bound)
            if not isinstance(expr, str):
                return None
            out.append(expr)
        if out == ["-np.inf", "np.inf"]:
            return None
        return out[0], out[1]

    def call(self, node: ast.Call) -> object | None:
        func = node.func
        # method calls on an expression: x.mean(dim=1), x.abs(), x.sum(dim=1)
        if isinstance(func, ast.Attribute) and not (
            isinstance(func.value, ast.Name) and func.value.id in ("torch", "F", "nn")
        ):
            target = self.expr(func.value)
            if func.attr == "abs" and not node.args:
                if isinstance(target, _Cols):
                    return _Cols(tuple(f"np.abs({e})" for e in target.exprs))
                return f"np.abs({target})" if isinstance(target, str) else None
            if func.attr in ("mean", "sum") and isinstance(target, _Cols):
                total = " + ".join(target.exprs)
                return f"(({total}) / {len(target.exprs)})" if func.attr == "mean" else f"({total})"
            return None
        name = _call_name(node)
        if name == "nan_to_num" and node.args:
            return self.expr(node.args[0])
        if name in ("clamp", "clip") and node.args:
            inner = self.expr(node.args[0])
            bounds = self._bounds(node)
            if isinstance(inner, str) and bounds is not None:
                return f"np.clip({inner}, {bounds[0]}, {bounds[1]})"
            return None
        if name == "ones_like":
            return "1.0"
        if name == "zeros_like":
            return "0.0"
        if name in _UNARY_FUNCS and len(node.args) == 1 and not node.keywords:
            inner = self.expr(node.args[0])
            return f"{_UNARY_FUNCS[name]}({inner})" if isinstance(inner, str) else None
        return None

    # -- statements -------------------------------------------------------------------------
    def run(self, forward: ast.FunctionDef) -> dict[str, object]:
        names = [a.arg for a in forward.args.args[1:]]
        for name, spec_input in zip(names, self.spec.inputs, strict=False):
            self.env[name] = ("input", spec_input.name)
        for stmt in forward.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                target = stmt.targets[0]
                if isinstance(target, ast.Name):
                    source = self.input_source(stmt.value)
                    if source is not None and not isinstance(stmt.value, ast.Name):
                        self.env[target.id] = source
                        continue
                    self.env[target.id] = self.expr(stmt.value)
                else:
                    for name in ast.walk(target):
                        if isinstance(name, ast.Name):
                            self.env[name.id] = None
            elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
                if isinstance(stmt.target, ast.Name):
                    self.env[stmt.target.id] = None
            elif not isinstance(stmt, (ast.Return, ast.Expr, ast.Pass)):
                # control flow: anything assigned inside is no longer a closed form
                for node in ast.walk(stmt):
                    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                        self.env[node.id] = None
        return self.env


def _info_dict(forward: ast.FunctionDef) -> dict[str, ast.AST]:
    """Info keys -> value expressions, from a dict literal assigned or returned in forward, plus
    `info["key"] = value` statements."""
    out: dict[str, ast.AST] = {}
    for node in ast.walk(forward):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=False):
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    if is_info_key(key.value):
                        out[key.value] = value
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if (
                    isinstance(target, ast.Subscript)
                    and isinstance(target.slice, ast.Constant)
                    and isinstance(target.slice.value, str)
                    and is_info_key(target.slice.value)
                ):
                    out[target.slice.value] = node.value
    return out


def _weight_source(node: ast.AST, params: dict[str, list[float]]) -> tuple[str, int | None] | None:
    """`self.k.reshape(1)`, `self.k.view(1)`, `self.k[0:1]`, `self.k[2].reshape(1)`,
    `self.k.unsqueeze(0)` -> (attribute, element index or None)."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
        "reshape", "view", "unsqueeze", "flatten", "detach", "clone"
    ):
        node = node.func.value
    if isinstance(node, ast.Subscript):
        attr = _self_attr(node.value)
        if attr not in params:
            return None
        sl = node.slice
        number = _const_number(sl)
        if number is not None:
            return attr, int(number)
        if isinstance(sl, ast.Slice) and sl.lower is not None:
            lower = _const_number(sl.lower)
            return (attr, int(lower)) if lower is not None else None
        return None
    attr = _self_attr(node)
    return (attr, None) if attr in params else None


def read_program(program: str, spec: TaskSpec) -> ProgramFacts:
    """The facts of `program` the battery can check; empty facts for unreadable programs."""
    facts = ProgramFacts()
    try:
        tree = ast.parse(program)
    except (SyntaxError, ValueError):
        return facts
    cls = _find_policy_class(tree, spec.policy_class)
    if cls is None:
        return facts
    init, forward = _method(cls, "__init__"), _method(cls, "forward")
    if forward is None:
        return facts
    params: dict[str, list[float]] = {}
    consts: dict[str, object] = {}
    # Class-level constants (`NEAR_TILES = 3`) are read through `self` like attributes.
    for node in cls.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            number = _const_number(node.value)
            if isinstance(target, ast.Name) and number is not None:
                consts[target.id] = int(number) if float(number).is_integer() and isinstance(
                    node.value, ast.Constant) and isinstance(node.value.value, int) else number
    for node in ast.walk(init) if init is not None else ():
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        attr = _self_attr(node.targets[0])
        if attr is None:
            continue
        value = node.value
        if _call_name(value) == "Parameter" and isinstance(value, ast.Call) and value.args:
            values = _tensor_values(value.args[0])
            if values is not None:
                params[attr] = values
        elif _call_name(value) == "slice" and isinstance(value, ast.Call):
            bounds = [_const_number(a) for a in value.args]
            if bounds and all(b is not None for b in bounds):
                consts[attr] = slice(*[int(b) for b in bounds])  # type: ignore[arg-type]
        else:
            number = _const_number(value)
            if number is not None:
                consts[attr] = number
    info = _info_dict(forward)
    weights: dict[tuple[str, int | None], str] = {}
    for key, value in info.items():
        if not is_weight(key):
            continue
        source = _weight_source(value, params)
        if source is None:
            continue
        attr, index = source
        values = params[attr]
        if index is None and len(values) == 1:
            facts.initial[key] = values[0]
        elif index is not None and -len(values) <= index < len(values):
            facts.initial[key] = values[index]
        weights[(attr, index)] = key
    reader = _Reader(spec, params, consts, weights)
    env = reader.run(forward)
    for key, value in info.items():
        if is_latent(key) and isinstance(value, ast.Name):
            expr = env.get(value.id)
            if isinstance(expr, str) and "C(" in expr:
                facts.reconstructions[key] = expr
    return facts


def info_keys(program: str, spec: TaskSpec) -> tuple[str, ...]:
    """The `weight_*` / `latent_*` keys the program's forward names literally, in order."""
    try:
        tree = ast.parse(program)
    except (SyntaxError, ValueError):
        return ()
    cls = _find_policy_class(tree, spec.policy_class)
    forward = _method(cls, "forward") if cls is not None else None
    return tuple(_info_dict(forward)) if forward is not None else ()
