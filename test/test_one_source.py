"""One source per concept in refine_core: rollout column names are built only by
`refine_core/rollout/schema.py`, the episode kinds are defined once, and the 'more tests' cap
has one default. (refine_ros is checked the same way once its wire format uses the schema.)"""

from __future__ import annotations

import ast
from pathlib import Path

import refine_core
from refine_core.rollout import schema

ROOT = Path(refine_core.__file__).parent
PREFIXES = tuple(f"{family}_" for family in schema.ACTION_FAMILIES) + (schema.NEXT_PREFIX, *schema.INFO_PREFIXES)


def _sources(root: Path = ROOT) -> list[Path]:
    """refine_core's modules, without program texts (a program spells its own info keys)."""
    return [p for p in sorted(root.rglob("*.py")) if "programs" not in p.relative_to(root).parts]


def prefix_spellings(path: Path) -> list[str]:
    """Where a module builds or tests a column name from a prefix itself: an f-string or a `+`
    that starts with a bare prefix, or a prefix given to startswith / removeprefix."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        literal = None
        if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
            literal = node.values[0].value
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and isinstance(node.left, ast.Constant):
            literal = node.left.value
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("startswith", "removeprefix") and node.args):
            arg = node.args[0]
            items = arg.elts if isinstance(arg, ast.Tuple) else [arg]
            literal = next((i.value for i in items if isinstance(i, ast.Constant) and i.value in PREFIXES), None)
        if isinstance(literal, str) and literal in PREFIXES:
            found.append(f"{path.name}:{node.lineno} {literal!r}")
    return found


def test_column_names_are_built_only_by_the_rollout_schema():
    offending = [hit for path in _sources() if path != ROOT / "rollout" / "schema.py"
                 for hit in prefix_spellings(path)]
    assert not offending, "build the names with refine_core.rollout.schema:\n" + "\n".join(offending)


def test_the_scan_finds_a_spelled_prefix(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("a = f'act_{name}'\nb = 'mean_' + name\nc = col.startswith(('weight_', 'x'))\n"
                     "d = f'mean_action_{k}'\ne = 'see act_steer'\n")
    assert prefix_spellings(probe) == ["probe.py:1 'act_'", "probe.py:2 'mean_'", "probe.py:3 'weight_'"]


def _assigned(name: str) -> list[str]:
    return [f"{p.relative_to(ROOT)}:{n.lineno}" for p in _sources() for n in ast.walk(ast.parse(p.read_text()))
            if isinstance(n, (ast.Assign, ast.AnnAssign))
            and any(isinstance(t, ast.Name) and t.id == name for t in (n.targets if isinstance(n, ast.Assign)
                                                                        else [n.target]))]


def test_episode_kinds_are_defined_once():
    assert _assigned("EPISODE_KINDS") == ["rollout/schema.py:" + str(_line_of("EPISODE_KINDS = "))]


def _line_of(text: str) -> int:
    lines = (ROOT / "rollout" / "schema.py").read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if line.startswith(text))


def test_the_more_tests_cap_has_one_default():
    """Every default of a `max_test_requests` (a field, a parameter) is the one constant, never
    a number written again."""
    literal = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "max_test_requests":
                if isinstance(node.value, ast.Constant):
                    literal.append(f"{path.name}:{node.lineno}")
            if isinstance(node, ast.arguments):
                args = [*node.posonlyargs, *node.args]
                pairs = list(zip(args[len(args) - len(node.defaults):], node.defaults, strict=True))
                pairs += [(a, d) for a, d in zip(node.kwonlyargs, node.kw_defaults, strict=True) if d is not None]
                literal += [f"{path.name}:{d.lineno}" for a, d in pairs
                            if a.arg == "max_test_requests" and isinstance(d, ast.Constant)]
    assert not literal, literal
    assigned = _assigned("DEFAULT_MAX_TEST_REQUESTS")
    assert assigned == [assigned[0]] and assigned[0].startswith("analyst/prompts.py")
    from refine_core.analyst.prompts import DEFAULT_MAX_TEST_REQUESTS
    from refine_core.loop import RefineConfig

    assert RefineConfig().max_test_requests == DEFAULT_MAX_TEST_REQUESTS
