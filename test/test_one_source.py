"""One source per concept: rollout column names are built only by `refine_core/rollout/schema.py`
(in refine_core and refine_ros alike), the step streams' wire format lives only in
`refine_ros/wire/messages.py`, the episode kinds are defined once, the 'more tests' cap has one
default, and a column added in one place (a program's info key) reaches the table, the MCAP
export and the analyst's schema."""

from __future__ import annotations

import ast
from pathlib import Path

import refine_core
import refine_ros
from refine_core.rollout import schema

ROOT = Path(refine_core.__file__).parent
ROS_ROOT = Path(refine_ros.__file__).parent
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


def test_refine_ros_builds_column_names_only_through_the_schema():
    offending = [hit for path in _sources(ROS_ROOT) for hit in prefix_spellings(path)]
    assert not offending, "build the names with refine_core.rollout.schema:\n" + "\n".join(offending)


def wire_spellings(path: Path) -> list[str]:
    """Where a module handles the counted-vector layout itself instead of calling
    refine_ros.wire.messages: compares or sets `data_offset`, or writes a `data_offset` field."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Compare):
            parts = [node.left, *node.comparators]
            if any(isinstance(p, ast.Attribute) and p.attr == "data_offset" for p in parts):
                found.append(f"{path.name}:{node.lineno} compares data_offset")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Attribute) and t.attr == "data_offset" for t in targets):
                found.append(f"{path.name}:{node.lineno} sets data_offset")
        elif isinstance(node, ast.Dict):
            if any(isinstance(k, ast.Constant) and k.value == "data_offset" for k in node.keys):
                found.append(f"{path.name}:{node.lineno} writes a data_offset field")
    return found


def test_the_wire_format_lives_in_one_module():
    home = ROS_ROOT / "wire" / "messages.py"
    offending = [hit for path in _sources(ROS_ROOT) if path != home for hit in wire_spellings(path)]
    assert not offending, "encode and decode step streams with refine_ros.wire.messages:\n" + "\n".join(offending)
    assert wire_spellings(home), "the scan must find the codec itself (else it tests nothing)"


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


def test_a_column_added_in_one_place_reaches_the_table_the_export_and_the_analyst(tmp_path):
    """The one place is the program: an info key it returns becomes a column of the logged
    table, a named value of the exported `refine/policy_step` stream, and a column the analyst
    is told about, with no other file changed."""
    import json

    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory

    from refine_core.policy.bundle import PolicyBundle
    from refine_core.policy.contract import validate_policy
    from refine_core.policy.programs import starter_program
    from refine_core.rollout.runner import run_episode
    from refine_core.store.db import RunDatabase
    from refine_core.tasks.registry import get_task
    from refine_ros.viewers.export import export_mcap

    task = get_task("pendulum")
    source = starter_program("pendulum")
    anchor = '"latent_restoring": restoring,'
    assert anchor in source
    policy = PolicyBundle(source.replace(anchor, anchor + ' "latent_probe": restoring * 0.0 + 7.5,'), {})
    module = policy.build(task.spec)

    keys = validate_policy(module, task.spec).keys
    analyst_schema = schema.RolloutSchema.for_task(task.spec, keys).columns  # what refine() shows
    assert "latent_probe" in analyst_schema

    db_path = tmp_path / "run.db"
    result = run_episode(task, module, 200, mode="mean", max_steps=5,
                         ids={"run_id": 1, "round": 0, "kind": "diagnostic", "episode": 0})
    with RunDatabase(db_path) as db:
        run_id = db.create_run("pendulum", analyst="offline")
        db.save_round(run_id, 0, status="committed", program=source, selection_metric=-1.0)
        db.save_episode(run_id, 0, "diagnostic", 0, seed=200, summary=result.summary, table=result.table)
        table = db.load_steps(run_id, 0)
    assert list(table["latent_probe"]) == [7.5] * 5
    assert set(analyst_schema) <= set(table.columns)

    export_mcap(db_path, tmp_path / "round.mcap", round_=0)
    with open(tmp_path / "round.mcap", "rb") as stream:
        messages = [(channel.topic, decoded) for _s, channel, _m, decoded
                    in make_reader(stream, decoder_factories=[DecoderFactory()]).iter_decoded_messages()]
    names = json.loads(next(m.data for topic, m in messages if topic == "refine/policy_step_columns"))
    steps = [m for topic, m in messages if topic == "refine/policy_step"]
    assert "latent_probe" in names and len(steps) == 5
    assert all(list(m.names) == names and m.values[names.index("latent_probe")] == 7.5 for m in steps)
