"""The documentation against the code: a README or docs page that names a command, a flag, a
profile, a test or a topic that does not exist is a lie a user acts on, so these checks fail
loudly.

Static reads only (text and `ast`), apart from each sub-command's `--help` and parser, the
profiles' launch arguments, and one scene per registered task (the typed scene topics are named
after each task's scene primitives, so they are read from the tasks); no DDS.

The README is the five-minute page; the rest lives in `docs/`: every page is read by the checks
that apply to any page (commands, flags, profiles, launch arguments, make targets, node
parameters, test ids, links), and each page that holds a table of record by its own check
(USAGE.md the command table, SAFETY.md the safety rules, ROS_INTERFACES.md the topics,
NODES.md the parameters, ROS_GUIDE.md the topics and nodes at a glance).
"""

from __future__ import annotations

import argparse
import ast
import re
from functools import cache
from pathlib import Path

import pytest

from refine_core import cli
from refine_ros.nodes.registry import NODES

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
USAGE = DOCS / "USAGE.md"
SAFETY = DOCS / "SAFETY.md"
ROS_GUIDE = DOCS / "ROS_GUIDE.md"
INTERFACES = DOCS / "ROS_INTERFACES.md"
NODES_DOC = DOCS / "NODES.md"


def _node_file(name: str) -> Path:
    """The source of a registry node (refine_ros/nodes/ or a robot folder)."""
    return ROOT.joinpath(*NODES[name].module.split(".")).with_suffix(".py")

CREATE_CALLS = ("create_publisher", "create_subscription", "create_service", "create_client")
TEST_ID = re.compile(r"(test/[\w/]+\.py)::(\w+)")
README_MAX_LINES = 300
"""The README is read in five minutes: about 250 lines, and never more than this."""


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _pages() -> list[Path]:
    """Every page a user reads: the README and docs/*.md."""
    return [README, *sorted(DOCS.glob("*.md"))]


def _page_ids() -> list[str]:
    return [str(p.relative_to(ROOT)) for p in _pages()]


# ---- (a) every sub-command: --help works, the README names it, USAGE.md's table has its row ----
@pytest.mark.parametrize("command", list(cli.command_modules()))
def test_every_command_has_help_and_is_in_the_readme_and_the_command_table(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main([command, "--help"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip(), f"refine {command} --help printed nothing"
    shown = {m.group(1) for c in _commands(_read(README)) if (m := REFINE.search(c))}
    assert command in shown, f"README does not mention `refine {command}`"
    assert re.search(rf"^\| `refine {command}\b", _read(USAGE), flags=re.M), (
        f"docs/USAGE.md's command table has no row for `refine {command}`")


# ---- (b) every test id a page names exists ----------------------------------------------------
def _test_functions(path: Path) -> set[str]:
    tree = ast.parse(_read(path))
    return {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test")
    }


def _missing_test_ids(text: str) -> list[str]:
    missing = []
    found: dict[str, set[str]] = {}
    for file, name in TEST_ID.findall(text):
        path = ROOT / file
        if not path.is_file():
            missing.append(f"{file} (no such file)")
            continue
        if name not in found.setdefault(file, _test_functions(path)):
            missing.append(f"{file}::{name}")
    return missing


@pytest.mark.parametrize("page", _page_ids())
def test_every_test_id_a_page_names_exists(page):
    missing = _missing_test_ids(_read(ROOT / page))
    assert not missing, f"{page} names tests that do not exist: {missing}"


def test_the_safety_rules_name_their_tests():
    ids = TEST_ID.findall(_read(SAFETY))
    assert len(ids) >= 20, "docs/SAFETY.md's rules table should name the tests of every rule"


@pytest.mark.parametrize("page", _page_ids())
def test_the_placeholders_are_filled(page):
    text = _read(ROOT / page)
    left = re.findall(r"\b(?:ROS_TOPICS|ROS_NODES|SAFETY_TABLE|RESULTS_SECTION|FIGURES_[A-Z]+|BENCH_[A-Z]+)\b", text)
    assert not left, f"{page} still has placeholders: {left}"


# ---- (c) the interface tables and the code name the same topics -------------------------------
def _documented_names(text: str) -> set[str]:
    """The backticked names in the first cell of every table row, except names built from a
    parameter (`<...>`)."""
    names = set()
    for line in text.splitlines():
        if not line.startswith("| `"):
            continue
        first_cell = line.split("|")[1]
        for name in re.findall(r"`([^`]+)`", first_cell):
            if "<" not in name and ("/" in name or name == "joint_states"):
                names.add(name)
    return names


def _string_literals(paths: list[Path]) -> set[str]:
    found = set()
    for path in paths:
        for node in ast.walk(ast.parse(_read(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.add(node.value)
    return found


def _topic_table_values(node: ast.AST) -> set[str]:
    """String values of a `*TOPICS` dict, tuple or list (what create_* calls loop over)."""
    if isinstance(node, ast.Dict):
        items = node.values
    elif isinstance(node, (ast.Tuple, ast.List)):
        items = node.elts
    else:
        return set()
    return {v.value for v in items if isinstance(v, ast.Constant) and isinstance(v.value, str)}


def _literal_topics(paths: list[Path]) -> set[str]:
    """Topic and service names written as literals: the name argument of every create_* call,
    the keys of a dict literal that feeds create_publisher (the sim's typed topics), and the
    module-level `*TOPICS` tables."""
    topics: set[str] = set()
    for path in paths:
        for node in ast.walk(ast.parse(_read(path))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in CREATE_CALLS and len(node.args) >= 2):
                name = node.args[1]
                if isinstance(name, ast.Constant) and isinstance(name.value, str):
                    topics.add(name.value)
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id.endswith("TOPICS") for t in node.targets
            ):
                topics |= _topic_table_values(node.value)
    return topics


def _topic_sources() -> list[Path]:
    helpers = sorted((ROOT / "refine_ros" / "nodes").glob("_*.py"))
    return [*helpers, *(_node_file(name) for name in sorted(NODES)), ROOT / "refine_ros" / "wire" / "adapters.py"]


@cache
def _scene_topics() -> frozenset[str]:
    """The typed topics the sim node publishes for every registered task: refine_ros's naming
    rule applied to a real scene of each task."""
    from refine_core.tasks import get_task, task_names
    from refine_core.tasks.view import TaskView
    from refine_ros.viewers.scene_topics import scene_topics

    topics: set[str] = set()
    for name in task_names():
        task = get_task(name)
        env = task.make_env()
        try:
            env.reset(seed=0)
            topics |= set(scene_topics(TaskView(task).scene(env)))
        finally:
            env.close()
    return frozenset(topics)


def _code_topics() -> set[str]:
    return _literal_topics(_topic_sources()) | _scene_topics()


def _unknown_documented(text: str) -> list[str]:
    in_code = _string_literals(sorted((ROOT / "refine_ros").rglob("*.py"))) | _scene_topics()
    return sorted(_documented_names(text) - in_code)


def _undocumented(text: str) -> list[str]:
    return sorted(_code_topics() - _documented_names(text))


def test_every_documented_topic_exists_in_the_code():
    text = _read(INTERFACES)
    assert {"refine/observation", "refine/safe_action", "sim/reset", "/cmd_vel"} <= _documented_names(text)
    unknown = _unknown_documented(text)
    assert not unknown, f"docs/ROS_INTERFACES.md lists names no code under refine_ros/ uses: {unknown}"


def test_every_literal_topic_of_the_nodes_is_documented():
    in_code = _code_topics()
    assert {"refine/action", "logger/label_episode", "refine/gripper_pose", "refine/odom"} <= in_code
    undocumented = _undocumented(_read(INTERFACES))
    assert not undocumented, f"topics/services in refine_ros/nodes missing from docs/ROS_INTERFACES.md: {undocumented}"


def test_a_drift_between_docs_and_code_is_caught():
    """The two checks above can fail: a made-up row and a dropped row are both reported."""
    text = _read(INTERFACES)
    assert _unknown_documented(text + "\n| `refine/not_a_topic` | x | y | z | w |\n") == ["refine/not_a_topic"]
    without = "\n".join(line for line in text.splitlines() if not line.startswith("| `safety/rearm`"))
    assert _undocumented(without) == ["safety/rearm"]


# ---- docs/NODES.md lists every declared parameter ----------------------------------------------
def _declared_parameters(path: Path) -> set[str]:
    """Keys of the module-level PARAMETERS / DEFAULTS dict each node declares from."""
    for node in ast.parse(_read(path)).body:
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) else None)
        if isinstance(target, ast.Name) and target.id in ("PARAMETERS", "DEFAULTS") and isinstance(node.value, ast.Dict):
            return {k.value for k in node.value.keys if isinstance(k, ast.Constant)}
    return set()


NODE_FILES = sorted(NODES)  # the node registry; test_node_registry.py checks it lists every node module


@pytest.mark.parametrize("node", NODE_FILES)
def test_nodes_doc_lists_every_parameter(node):
    declared = _declared_parameters(_node_file(node))
    assert declared, f"{node}: no PARAMETERS/DEFAULTS table found"
    sections = re.split(r"^## ", _read(NODES_DOC), flags=re.M)
    section = next((s for s in sections if s.startswith(f"{node}\n")), None)
    assert section is not None, f"docs/NODES.md has no section for {node}"
    rows = set(re.findall(r"^\| `(\w+)` \|", section, flags=re.M))
    assert declared == rows, f"{node}: missing {sorted(declared - rows)}, stale {sorted(rows - declared)}"


# ---- (d) every command a page shows is real -----------------------------------------------------
# A command is read from each line of a fenced block (backslash continuations joined, comments
# read as their own text) and from each inline code span. In it: `refine VERB`, its flags and
# its profile; `ros2 launch refine_ros FILE ARG:=...`; `ros2 run refine_ros EXE`; `python -m
# MODULE`; `python tools/FILE --flag`; `make TARGET`. Names written as placeholders (upper case,
# `<...>`) are not checked.
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)
INLINE = re.compile(r"`([^`]+)`")
REFINE = re.compile(r"(?:^|[\s/(])refine\s+([a-z][\w-]*)(.*)", re.S)
FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")
SET = re.compile(r"--set\s+['\"]?([a-z_]+)\.([a-z_]+)=")
LAUNCH = re.compile(r"ros2 launch refine_ros\s+(\S+\.launch\.py)(.*)", re.S)
LAUNCH_ARG = re.compile(r"(?<![\w-])([a-z_]+):=")
ROS2_RUN = re.compile(r"ros2 run refine_ros\s+(\w+)")
PYTHON_M = re.compile(r"python3? -m ((?:refine_core|refine_ros|tools)(?:\.\w+)+)")
TOOL = re.compile(r"python3? (tools/\w+\.py)(.*)", re.S)
MAKE = re.compile(r"(?:^|[\s;&(])make\s+([a-z][\w-]*)")
PLACEHOLDER_NODES = {"node"}  # `--set node.param=value`
NOT_COMMANDS = ("refine safety",)  # the safety node's DiagnosticStatus name (docs/ROS_INTERFACES.md)


def _commands(text: str) -> list[str]:
    """The command texts of a page: fenced lines (a comment is its own text) and inline spans."""
    found = []
    for block in FENCE.findall(text):
        for line in block.replace("\\\n", " ").splitlines():
            code, _, comment = line.partition(" #") if not line.lstrip().startswith("#") else ("", "", line)
            found += [code, comment]
    for span in INLINE.findall(FENCE.sub("", text)):
        if "\n\n" not in span:
            found.append(span.replace("\n", " "))
    pieces = []
    for command in found:
        pieces += re.split(r"&&|;|(?<!\\)\|", command.replace("\\|", "/"))
    return [p.strip() for p in pieces if p.strip()]


@cache
def _verb_options(verb: str) -> frozenset[str]:
    parser = cli.build_parser(verb)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return frozenset(sub.choices[verb]._option_string_actions)


@cache
def _profiles() -> frozenset[str]:
    from refine_ros.bringup.profiles import profile_names

    return frozenset(profile_names())


@cache
def _launch_argument_names(launch_file: str) -> frozenset[str]:
    from refine_ros.bringup.arguments import RENAMED
    from refine_ros.bringup.profiles import all_launch_arguments, launch_arguments

    if launch_file == "refine.launch.py":
        names = {"profile", *(a.name for a in all_launch_arguments())}
    else:
        names = {a.name for a in launch_arguments(launch_file.removesuffix(".launch.py"))}
    return frozenset(names | set(RENAMED))


@cache
def _make_targets() -> frozenset[str]:
    return frozenset(re.findall(r"^([a-z][\w-]*):", _read(ROOT / "Makefile"), flags=re.M))


def _placeholder(name: str) -> bool:
    return "<" in name or name != name.lower()


def _refine_problems(command: str) -> list[str]:
    match = REFINE.search(command)
    if match is None or command in NOT_COMMANDS:
        return []
    verb, rest = match.groups()
    if verb not in cli.command_modules():
        return [f"`refine {verb}`: no such command"]
    problems = [f"`refine {verb} {flag}`: no such flag" for flag in FLAG.findall(rest)
                if flag not in _verb_options(verb)]
    if verb == "up":
        profile = rest.split()[0] if rest.split() else ""
        if profile and not profile.startswith("-") and not _placeholder(profile) and profile not in _profiles():
            problems.append(f"`refine up {profile}`: no such profile")
    for node, param in SET.findall(rest):
        if node in PLACEHOLDER_NODES:
            continue
        if node not in NODES:
            problems.append(f"`--set {node}.{param}`: no node {node}")
        elif param not in _declared_parameters(_node_file(node)):
            problems.append(f"`--set {node}.{param}`: {node} declares no parameter {param}")
    return problems


def _launch_problems(command: str) -> list[str]:
    match = LAUNCH.search(command)
    if match is None or _placeholder(match.group(1)):
        return []
    launch_file, rest = match.groups()
    if not (ROOT / "launch" / launch_file).is_file():
        return [f"`ros2 launch refine_ros {launch_file}`: no such launch file"]
    return [f"`{launch_file} {name}:=`: no such launch argument" for name in LAUNCH_ARG.findall(rest)
            if name not in _launch_argument_names(launch_file)]


def _other_problems(command: str) -> list[str]:
    import importlib.util

    problems = [f"`ros2 run refine_ros {exe}`: no such executable"
                for exe in ROS2_RUN.findall(command) if exe not in NODES]
    problems += [f"`python -m {module}`: no such module"
                 for module in PYTHON_M.findall(command) if importlib.util.find_spec(module) is None]
    for tool, rest in TOOL.findall(command):
        path = ROOT / tool
        if not path.is_file():
            problems.append(f"`python {tool}`: no such file")
            continue
        literals = _string_literals([path])
        problems += [f"`python {tool} {flag}`: no such flag" for flag in FLAG.findall(rest) if flag not in literals]
    problems += [f"`make {target}`: no such target" for target in MAKE.findall(command)
                 if target not in _make_targets()]
    return problems


def _command_problems(text: str) -> list[str]:
    problems = []
    for command in _commands(text):
        problems += _refine_problems(command) + _launch_problems(command) + _other_problems(command)
    return sorted(set(problems))


@pytest.mark.parametrize("page", _page_ids())
def test_every_command_a_page_shows_is_real(page):
    problems = _command_problems(_read(ROOT / page))
    assert not problems, f"{page}: {problems}"


def test_a_made_up_command_flag_profile_or_argument_is_caught():
    """The check above can fail: each kind of made-up name is reported."""
    text = "\n".join([
        "```bash",
        "refine up door_sim --max-rounds 2 --not-a-flag \\",
        "    --set learner_node.not_a_param=1",
        "refine up not_a_profile",
        "ros2 launch refine_ros door_sim.launch.py not_an_arg:=1",
        "ros2 launch refine_ros not_a.launch.py",
        "make not-a-target",
        "```",
        "and `refine not-a-verb --x`, `python tools/rehearse_twin.py --robot arm --no-such`,",
        "`ros2 run refine_ros not_a_node`, `python -m refine_ros.not_a_module`.",
    ])
    assert _command_problems(text) == sorted([
        "`refine up --not-a-flag`: no such flag",
        "`--set learner_node.not_a_param`: learner_node declares no parameter not_a_param",
        "`refine up not_a_profile`: no such profile",
        "`door_sim.launch.py not_an_arg:=`: no such launch argument",
        "`ros2 launch refine_ros not_a.launch.py`: no such launch file",
        "`make not-a-target`: no such target",
        "`refine not-a-verb`: no such command",
        "`python tools/rehearse_twin.py --no-such`: no such flag",
        "`ros2 run refine_ros not_a_node`: no such executable",
        "`python -m refine_ros.not_a_module`: no such module",
    ])


# ---- (e) links: every page linked resolves, and the README links every page of docs/ -----------
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    anchors: set[str] = set()
    for heading in re.findall(r"^#+ (.+)$", FENCE.sub("", _read(path)), flags=re.M):
        slug = _slug(heading)
        n = sum(1 for a in anchors if a == slug or re.fullmatch(rf"{re.escape(slug)}-\d+", a))
        anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


def _links(page: Path, text: str | None = None) -> list[tuple[str, Path, str]]:
    """(as written, resolved file, anchor) of every relative link of a page."""
    links = []
    for target in LINK.findall(FENCE.sub("", _read(page) if text is None else text)):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        links.append((target, (page.parent / file).resolve() if file else page, anchor))
    return links


def _broken_links(page: Path, text: str) -> list[str]:
    broken = []
    for target, file, anchor in _links(page, text):
        if not file.exists() or ROOT not in (file, *file.parents):
            broken.append(f"{target} (no such file in the repository)")
        elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
            broken.append(f"{target} (no such heading)")
    if "/work/shared" in text or "../shared" in text:
        broken.append("a path outside the repository")
    return broken


@pytest.mark.parametrize("page", _page_ids())
def test_every_link_resolves(page):
    broken = _broken_links(ROOT / page, _read(ROOT / page))
    assert not broken, f"{page}: broken links {broken}"


def test_a_broken_link_is_caught():
    text = ("[a](docs/NOT_A_PAGE.md) [b](docs/USAGE.md#not-a-heading) [c](docs/USAGE.md#the-sandbox) "
            "[d](https://example.org/x) [e](../shared/docs/METHOD.md)")
    assert _broken_links(README, text) == [
        "docs/NOT_A_PAGE.md (no such file in the repository)",
        "docs/USAGE.md#not-a-heading (no such heading)",
        "../shared/docs/METHOD.md (no such file in the repository)",
        "a path outside the repository",
    ]


def test_the_readme_is_short_and_links_every_docs_page():
    lines = _read(README).splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move detail into docs/"
    linked = {file for _, file, _ in _links(README)}
    unlinked = sorted(p.name for p in DOCS.glob("*.md") if p.resolve() not in linked)
    assert not unlinked, f"README.md links no docs page {unlinked}"


# ---- (f) ROS_GUIDE.md's tables at a glance hold what the code has ------------------------------
def _section(path: Path, title: str) -> str:
    sections = re.split(r"^## ", _read(path), flags=re.M)
    found = next((s for s in sections if s.startswith(f"{title}\n")), None)
    assert found is not None, f"{path.name} has no section '## {title}'"
    return found


def test_the_ros_guides_topics_exist_in_the_code():
    text = _section(ROS_GUIDE, "Topics, services, rates and QoS")
    assert {"refine/observation", "refine/safe_action", "sim/reset"} <= _documented_names(text)
    unknown = _unknown_documented(text)
    assert not unknown, f"docs/ROS_GUIDE.md lists names no code under refine_ros/ uses: {unknown}"


def test_the_ros_guides_node_table_lists_every_node():
    rows = set(re.findall(r"^\| `(\w+)` \| `\w+` \|", _section(ROS_GUIDE, "Nodes"), flags=re.M))
    assert rows == set(NODES), f"missing {sorted(set(NODES) - rows)}, stale {sorted(rows - set(NODES))}"


def test_the_launch_argument_table_lists_every_argument():
    from refine_ros.bringup.profiles import all_launch_arguments

    rows = set(re.findall(r"^\| `(\w+)` \|", _section(ROS_GUIDE, "Profiles and launch files"), flags=re.M))
    declared = {"profile", *(a.name for a in all_launch_arguments())}
    assert rows == declared, f"missing {sorted(declared - rows)}, stale {sorted(rows - declared)}"
