"""bringup.py: every shipped profile resolves (with and without overrides) into a node set
whose modules exist, and every kind of bad input is a ProfileError that says what to fix.
Runs without rclpy or launch: the module must not import them."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from refine_ros import bringup
from refine_ros.bringup import ProfileError, coerce, profile_names, resolve_profile
from refine_ros.nodes.registry import NODES

ROOT = Path(__file__).resolve().parents[1]
PROFILES = ("door_sim", "car_sim", "pendulum_sim", "arm_real", "rc_car_real")
ALL_PROFILES = (*PROFILES, *(f"{p}_record_demo" for p in ("door_sim", "car_sim", "arm_real", "rc_car_real")))
"""The refinement profiles (an analysis node runs the method)."""
RECORD_PROFILES = ("door_sim_record_demo", "car_sim_record_demo", "arm_real_record_demo", "rc_car_real_record_demo")
"""The profiles that record a teleoperated demonstration, one per refinement profile with a teleop story."""
REAL_PAIRS = (("arm_real", "arm_real_record_demo"), ("rc_car_real", "rc_car_real_record_demo"))


def test_every_shipped_profile_is_found():
    assert sorted(profile_names()) == sorted(PROFILES + RECORD_PROFILES)


def test_import_needs_neither_rclpy_nor_launch():
    code = (
        "import sys; import refine_ros.bringup as b; b.resolve_profile('door_sim', check_modules=False); "
        "bad = [m for m in ('rclpy', 'launch', 'launch_ros') if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


@pytest.mark.parametrize("name", PROFILES)
def test_every_profile_resolves_with_defaults(name):
    profile = resolve_profile(name, check_modules=False)
    assert profile.name == name and profile.description
    assert profile.kind == ("real" if name.endswith("_real") else "sim")
    names = [n.name for n in profile.nodes]
    assert {"learner_node", "rollout_logger", "analysis_node"} <= set(names)
    if profile.kind == "sim":
        assert "sim_node" in names and "safety_node" not in names
        assert profile.node("sim_node").parameters["task"] == profile.task
    else:
        assert "safety_node" in names and profile.dry_run is True  # safe by default
        assert profile.node("safety_node").parameters["dry_run"] is True
    for node in profile.nodes:
        assert node.package == "refine_ros" and node.executable == node.name
        assert node.module == NODES[node.name].module and node.class_name
        if "task" in node.parameters:
            assert node.parameters["task"] == profile.task
    assert profile.urdf is not None and profile.urdf.is_file()
    assert profile.rviz_config.name == "refine.rviz"


@pytest.mark.parametrize("name", PROFILES)
def test_overrides_reach_the_node_parameters(name):
    overrides = {"analyst": "replay", "run_dir": "/tmp/somewhere", "max_rounds": "7", "rviz": "false"}
    if name.endswith("_real"):
        overrides["dry_run"] = "false"
    profile = resolve_profile(name, overrides, check_modules=False)
    assert profile.arguments["max_rounds"] == 7 and profile.rviz is False
    assert profile.node("analysis_node").parameters["analyst"] == "replay"
    assert profile.node("analysis_node").parameters["max_rounds"] == 7
    assert "max_rounds" not in profile.node("learner_node").parameters
    assert profile.node("rollout_logger").parameters["run_dir"] == "/tmp/somewhere"
    if name.endswith("_real"):
        assert profile.node("safety_node").parameters["dry_run"] is False
    # overrides never leak into the next resolution
    defaults = {a.name: a.default for a in bringup.launch_arguments(name)}
    assert resolve_profile(name, check_modules=False).arguments == defaults


@pytest.mark.parametrize("name", PROFILES)
def test_unset_arguments_leave_the_node_defaults_and_empty_means_unset(name):
    profile = resolve_profile(name, {"max_steps": ""}, check_modules=False)
    assert profile.arguments["max_steps"] is None
    assert "max_steps" not in profile.node("analysis_node").parameters
    capped = resolve_profile(name, {"max_steps": "40", "transcript": "/tmp/t.jsonl"}, check_modules=False)
    assert capped.node("analysis_node").parameters["max_steps"] == 40
    assert capped.node("analysis_node").parameters["transcript"] == "/tmp/t.jsonl"
    described = {a.name: a for a in bringup.launch_arguments(name)}
    assert described["max_steps"].default_text == "" and "node's own default" in described["max_steps"].description


def test_python_values_work_as_overrides_too():
    profile = resolve_profile("door_sim", {"max_rounds": 2, "rviz": False, "diagnostic_episodes": 1.0}, check_modules=False)
    assert profile.arguments["max_rounds"] == 2 and profile.arguments["diagnostic_episodes"] == 1


def test_node_modules_of_this_area_exist():
    """sim_node and rollout_logger (and the safety/bridge nodes) are importable modules."""
    profile = resolve_profile("rc_car_real", check_modules=False)
    for name in ("rollout_logger", "safety_node", "rc_car_bridge", "track_detector"):
        assert profile.node(name).module_available(), name
    assert resolve_profile("door_sim", check_modules=False).node("sim_node").module_available()


def test_unknown_profile_lists_the_profiles():
    with pytest.raises(ProfileError) as err:
        resolve_profile("moon_rover")
    assert "moon_rover" in str(err.value)
    for name in PROFILES:
        assert name in str(err.value)


def test_unknown_override_names_the_valid_arguments():
    with pytest.raises(ProfileError, match="no argument.*speed.*its arguments are: analyst"):
        resolve_profile("door_sim", {"speed": "9"}, check_modules=False)
    with pytest.raises(ProfileError, match="dry_run"):  # sim profiles have no dry_run
        resolve_profile("car_sim", {"dry_run": "true"}, check_modules=False)


@pytest.mark.parametrize(
    ("value", "default", "expected"),
    [("true", False, True), ("0", True, False), ("12", 3, 12), ("2.5", 1.0, 2.5), (4, "x", "4")],
)
def test_coerce_gives_launch_strings_the_default_type(value, default, expected):
    assert coerce(value, default, "arg") == expected
    assert type(coerce(value, default, "arg")) is type(expected)


@pytest.mark.parametrize(("value", "default"), [("maybe", True), ("3.5", 3), ("three", 3), ("x", 1.0)])
def test_coerce_rejects_values_of_the_wrong_type(value, default):
    with pytest.raises(ProfileError, match="argument 'arg' must be"):
        coerce(value, default, "arg")


def _write(tmp: Path, name: str, data) -> None:
    (tmp / "config").mkdir(exist_ok=True)
    text = data if isinstance(data, str) else yaml.safe_dump(data)
    (tmp / "config" / f"{name}.yaml").write_text(text)
    (tmp / "config" / "refine.rviz").write_text("Panels: []\n")


def _profile(**changes):
    data = {
        "profile": "mini", "kind": "sim", "task": "door_open", "description": "a test profile",
        "arguments": {"run_dir": {"default": "runs/x"}},
        "nodes": [{"name": "rollout_logger",
                   "parameters": {"batch_size": 10}, "from_arguments": {"run_dir": "run_dir"},
                   "remappings": {"refine/observation": "/robot/observation"}}],
    }
    data.update(changes)
    return data


@pytest.fixture
def fake_share(tmp_path, monkeypatch):
    monkeypatch.setattr(bringup.profiles, "share_dirs", lambda: [tmp_path])
    return tmp_path


def test_a_custom_profile_with_remappings_and_no_urdf(fake_share):
    _write(fake_share, "mini", _profile())
    profile = resolve_profile("mini", {"run_dir": "/data/run"})
    node = profile.node("rollout_logger")
    assert node.parameters == {"task": "door_open", "batch_size": 10, "run_dir": "/data/run"}, \
        "the registry says the logger takes the profile's task"
    assert node.remappings == (("refine/observation", "/robot/observation"),)
    assert node.target == "refine_ros.nodes.rollout_logger:RolloutLogger"
    assert profile.urdf is None and profile.robot_description() == ""
    with pytest.raises(KeyError, match="no node 'sim_node'"):
        profile.node("sim_node")


def test_a_node_outside_the_registry_is_reported(fake_share):
    nodes = _profile()["nodes"] + [{"name": "ghost"}]
    _write(fake_share, "mini", _profile(nodes=nodes))
    with pytest.raises(ProfileError, match=r"'ghost' is not a node of this package; the nodes are analysis_node, arm_bridge, "):
        resolve_profile("mini", check_modules=False)


def test_a_missing_node_module_is_reported(fake_share, monkeypatch):
    _write(fake_share, "mini", _profile())
    monkeypatch.setattr(bringup.NodeSpec, "module_available", lambda self: False)
    with pytest.raises(ProfileError, match=r"module\(s\) not found: rollout_logger \(refine_ros.nodes.rollout_logger\)"):
        resolve_profile("mini")
    assert [n.name for n in resolve_profile("mini", check_modules=False).nodes] == ["rollout_logger"]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"kind": "orbital"}, "kind must be one of"),
        ({"nodes": "sim_node"}, "'nodes' must be a list"),
        ({"arguments": {"rounds": 3}}, "argument 'rounds' needs a mapping with a 'default'"),
        ({"arguments": {"rounds": {"type": "integer"}}}, "or a 'type'"),
        ({"arguments": {"rounds": {"default": "3", "type": "int"}}}, "default that is not a int"),
        ({"nodes": [{"parameters": {}}]}, "needs a non-empty string 'name'"),
        ({"nodes": [{"name": "sim_node", "module": "m"}]}, "unknown key.*module.*come from the node registry"),
        ({"nodes": [{"name": "sim_node", "from_profile": {"task": "task"}}]}, "unknown key.*from_profile"),
        ({"urdf": "nowhere.urdf"}, "URDF 'nowhere.urdf' not found"),
    ],
)
def test_malformed_profiles_are_clear_errors(fake_share, changes, message):
    _write(fake_share, "mini", _profile(**changes))
    with pytest.raises(ProfileError, match=message):
        resolve_profile("mini", check_modules=False)


def test_duplicate_nodes_bad_argument_refs_and_empty_lists(fake_share):
    node = _profile()["nodes"][0]
    _write(fake_share, "mini", _profile(nodes=[node, node]))
    with pytest.raises(ProfileError, match="appears twice"):
        resolve_profile("mini", check_modules=False)
    _write(fake_share, "mini", _profile(nodes=[{**node, "from_arguments": {"rounds": "rounds"}}]))
    with pytest.raises(ProfileError, match="reads unknown argument 'rounds'"):
        resolve_profile("mini", check_modules=False)
    _write(fake_share, "mini", _profile(nodes=[{**node, "parameters": {"hold_axes": []}}]))
    with pytest.raises(ProfileError, match="empty list"):
        resolve_profile("mini", check_modules=False)
    _write(fake_share, "mini", _profile(arguments={"run_dir": {"default": "x"}, "rviz": {"default": True}}))
    with pytest.raises(ProfileError, match="launch option every profile has"):
        resolve_profile("mini", check_modules=False)


def test_invalid_yaml_is_a_clear_error(fake_share):
    _write(fake_share, "mini", "profile: mini\nnodes: [unclosed\n")
    _write(fake_share, "other", _profile(profile="other"))
    assert profile_names() == ["other"]  # only files that parse are offered
    with pytest.raises(ProfileError, match="mini.yaml: not valid YAML"):
        resolve_profile("mini")
    _write(fake_share, "third", {"something": "else"})
    with pytest.raises(ProfileError, match="not a profile"):
        resolve_profile("third")


def test_launch_arguments_carry_defaults_for_ros2_launch():
    args = {a.name: a for a in bringup.launch_arguments("arm_real")}
    assert {"analyst", "run_dir", "max_rounds", "rviz", "robot_state_publisher", "keep_alive", "dry_run", "diagnostic_episodes",
            "max_steps", "transcript"} <= set(args)
    assert args["dry_run"].default_text == "true" and args["max_rounds"].default_text == "3"
    assert args["rviz"].default_text == "true" and args["keep_alive"].default_text == "false"
    assert all(a.description for a in args.values())


def test_the_generic_launch_declares_every_argument_once_without_defaults():
    every = bringup.all_launch_arguments()
    names = [a.name for a in every]
    assert len(names) == len(set(names))
    assert set(names) == {a.name for p in ALL_PROFILES for a in bringup.launch_arguments(p)}
    assert all(a.default_text == "" for a in every), "unset: the chosen profile's default applies"
    by_name = {a.name: a for a in every}
    assert "every profile" in by_name["run_dir"].description
    assert "profiles arm_real, arm_real_record_demo, rc_car_real" in by_name["dry_run"].description


def test_launch_overrides_keep_the_profile_arguments_given_and_name_the_rest():
    given = {"profile": "door_sim", "max_rounds": "5", "max_steps": "", "dry_run": "false", "rviz": "false",
             "something_else": "x"}
    overrides, ignored = bringup.launch_overrides("door_sim", given)
    assert overrides == {"max_rounds": "5", "rviz": "false"}, "empty = not given; profile is not an argument"
    assert ignored == ["dry_run", "something_else"]
    assert resolve_profile("door_sim", overrides, check_modules=False).arguments["max_rounds"] == 5


def test_the_old_argument_names_still_work_with_a_warning():
    """rounds / episodes are now max_rounds / diagnostic_episodes (RefineConfig's fields, the
    `refine run` flags and the analysis node's parameters); launch lines written before work."""
    with pytest.warns(FutureWarning, match="'(rounds|episodes)' is deprecated: use '(max_rounds|diagnostic_episodes)'"):
        profile = resolve_profile("door_sim", {"rounds": "5", "episodes": "2"}, check_modules=False)
    assert profile.node("analysis_node").parameters["max_rounds"] == 5
    assert profile.node("analysis_node").parameters["diagnostic_episodes"] == 2
    with pytest.warns(FutureWarning):  # a launch file declares the new name with its default: the old one wins
        overrides, ignored = bringup.launch_overrides("door_sim", {"max_rounds": "3", "rounds": "8"})
    assert overrides == {"max_rounds": "8"} and ignored == []


@pytest.mark.parametrize("name", ALL_PROFILES)
def test_a_profile_sets_only_what_differs_from_the_node_defaults(name):
    """Every default has one home: a node's PARAMETERS table (or the safety node's DEFAULTS).
    A profile value equal to it, or an argument default equal to the default of a parameter it
    feeds, would be a second copy that silently stops mattering when the node's changes.
    Values must also have the declared type (rclpy refuses 50 for a float parameter)."""
    import importlib

    from refine_ros.params import Required, default_of

    ros_types = {"double": float, "integer": int, "bool": bool, "string": str, "double_array": list,
                 "integer_array": list, "string_array": list}
    data = yaml.safe_load((ROOT / "config" / f"{name}.yaml").read_text())
    arguments = data["arguments"]
    for node in data["nodes"]:
        module = importlib.import_module(NODES[node["name"]].module)
        table = getattr(module, "PARAMETERS", None) or module.DEFAULTS
        defaults = {k: default_of(v) for k, v in table.items()}
        for param, value in (node.get("parameters") or {}).items():
            default = defaults[param]
            if isinstance(default, Required):  # no code default: the profile is its one home
                assert isinstance(value, ros_types[default.type]), f"{name}: {node['name']}.{param} is not a " \
                    f"{default.type}"
                continue
            assert value != default, f"{name}: {node['name']}.{param} repeats the node's default {value!r}"
            assert type(value) is type(default), f"{name}: {node['name']}.{param} is not a {type(default).__name__}"
        for param, arg in (node.get("from_arguments") or {}).items():
            spec = arguments[arg]
            if "default" in spec:
                assert spec["default"] != defaults[param], \
                    f"{name}: argument {arg} repeats {node['name']}.{param}'s default; leave its default unset"
                assert type(spec["default"]) is type(defaults[param]), (name, arg)
            else:
                assert spec["type"] == type(defaults[param]).__name__, (name, arg)


@pytest.mark.parametrize("path", sorted((ROOT / "urdf").glob("*.urdf")), ids=lambda p: p.name)
def test_urdfs_are_valid_trees(path):
    robot = ET.parse(path).getroot()
    assert robot.tag == "robot" and robot.get("name")
    links = {link.get("name") for link in robot.findall("link")}
    joints = robot.findall("joint")
    assert joints and len(links) == len(robot.findall("link"))  # unique link names
    children = [j.find("child").get("link") for j in joints]
    parents = [j.find("parent").get("link") for j in joints]
    assert set(children) | set(parents) <= links
    assert len(children) == len(set(children))  # a tree: one parent per link
    roots = links - set(children)
    assert roots == {"world"}  # everything hangs off the RViz fixed frame
    for joint in joints:
        kind = joint.get("type")
        assert kind in {"fixed", "revolute", "continuous", "prismatic"}
        if kind in {"revolute", "prismatic"}:
            limit = joint.find("limit")
            assert limit is not None and float(limit.get("lower")) <= float(limit.get("upper"))


def test_urdf_joint_names_match_what_the_sim_publishes():
    from refine_core.tasks.car_racing.scene import POSE_JOINTS, WHEEL_JOINTS
    from refine_core.tasks.door_open.env import ARM_JOINTS, CLAW_JOINTS
    from refine_core.tasks.door_open.scene import DOOR_JOINTS

    door = {j.get("name") for j in ET.parse(ROOT / "urdf" / "door_scene.urdf").getroot().findall("joint")}
    assert set(ARM_JOINTS) | set(CLAW_JOINTS) | set(DOOR_JOINTS) <= door
    car = {j.get("name") for j in ET.parse(ROOT / "urdf" / "rc_car.urdf").getroot().findall("joint")}
    assert {*POSE_JOINTS, *WHEEL_JOINTS} <= car


def test_rviz_config_shows_markers_camera_and_robot_model():
    config = yaml.safe_load((ROOT / "config" / "refine.rviz").read_text())
    manager = config["Visualization Manager"]
    assert manager["Global Options"]["Fixed Frame"] == "world"
    displays = {d["Class"]: d for d in manager["Displays"]}
    assert displays["rviz_default_plugins/MarkerArray"]["Topic"]["Value"] == "/refine/markers"
    assert displays["rviz_default_plugins/Image"]["Topic"]["Value"] == "/refine/camera"
    assert displays["rviz_default_plugins/RobotModel"]["Description Topic"]["Value"] == "/robot_description"
    assert displays["rviz_default_plugins/Path"]["Topic"]["Value"] == "/refine/track_ahead"
    assert "rviz_default_plugins/TF" in displays


@pytest.mark.parametrize("name", PROFILES + RECORD_PROFILES)
def test_every_profile_parameter_is_one_the_node_declares(name):
    """A parameter a node does not declare is silently ignored by rclpy: a typo or a setting
    left on the wrong node would change nothing, without a word."""
    import importlib

    profile = resolve_profile(name, check_modules=True)
    for spec in profile.nodes:
        table = getattr(importlib.import_module(spec.module), "PARAMETERS", None)
        if not isinstance(table, dict):
            continue
        unknown = set(spec.parameters) - set(table)
        assert not unknown, f"{name}: {spec.name} does not declare {sorted(unknown)}"


# ---- record_demo profiles and the demonstration rules of real profiles ----------------------------
@pytest.mark.parametrize("name", RECORD_PROFILES)
def test_record_profiles_drive_through_the_safety_node_into_the_recorder(name):
    profile = resolve_profile(name, check_modules=True)
    names = [n.name for n in profile.nodes]
    assert {"safety_node", "joy_teleop", "demo_recorder"} <= set(names)
    assert not {"learner_node", "analysis_node", "rollout_logger"} & set(names), "no policy runs while recording"
    recorder = profile.node("demo_recorder").parameters
    assert recorder["task"] == profile.task == profile.node("joy_teleop").parameters["task"]
    refinement = name.removesuffix("_record_demo")
    assert recorder["robot"] == refinement, "the source the refinement profile's learner accepts"
    assert recorder["run_dir"] == bringup.launch_arguments(refinement)[
        [a.name for a in bringup.launch_arguments(refinement)].index("run_dir")].default, "same run directory"
    if profile.kind == "sim":
        sim = profile.node("sim_node")
        assert sim.parameters["real_time"] is True and recorder["reset_service"] == "sim/reset"
        assert dict(sim.remappings) == {"refine/action": "refine/safe_action"}, "the sim executes what the safety node sends"
        from refine_ros.nodes.sim_node import PARAMETERS as SIM_PARAMETERS

        # the task's demonstration seed: the sim node's own default, which the profile leaves
        assert sim.parameters.get("seed", SIM_PARAMETERS["seed"].default) == 0
    else:
        assert "sim_node" not in names and "reset_service" not in recorder
        assert profile.dry_run is True and profile.node("safety_node").parameters["dry_run"] is True


@pytest.mark.parametrize(("real", "record"), REAL_PAIRS)
def test_a_robots_drivers_and_safety_limits_are_written_once(real, record):
    """The record profile includes the robot's bridge and safety node: the same parameters,
    read from the same lines of the robot's profile."""
    robot, recorder = resolve_profile(real, check_modules=False), resolve_profile(record, check_modules=False)
    for node in recorder.nodes:
        if node.name in ("joy_teleop", "demo_recorder"):
            continue
        assert node.parameters == robot.node(node.name).parameters, node.name
    assert robot.node("learner_node").parameters["robot"] == recorder.node("demo_recorder").parameters["robot"] == real
    assert robot.node("analysis_node").parameters["demonstration"] == "recorded"
    text = (ROOT / "config" / f"{record}.yaml").read_text()
    assert "workspace_lower" not in text and "lower:" not in text, "limits are only in the robot's own profile"


@pytest.mark.parametrize("name", PROFILES + RECORD_PROFILES)
def test_profile_values_have_the_types_the_nodes_declare(name):
    """rclpy refuses a value of another type (and `ros2 launch` passes YAML as it is): a float
    parameter needs 1.0, not 1; a required parameter its declared type."""
    import importlib

    from refine_ros.params import Required, default_of

    kinds = {"double": float, "integer": int, "bool": bool, "string": str}
    for spec in resolve_profile(name, check_modules=True).nodes:
        table = getattr(importlib.import_module(spec.module), "PARAMETERS", None) or {}
        for param, value in spec.parameters.items():
            default = default_of(table[param])
            if isinstance(default, Required):
                base, is_array = default.type.removesuffix("_array"), default.type.endswith("_array")
            else:
                is_array = isinstance(default, list)
                base = next(k for k, t in kinds.items() if isinstance((default or [None])[0] if is_array else default, t)
                            and not (t is int and isinstance(default, bool)))
            items = value if is_array else [value]
            assert isinstance(value, list) == is_array, f"{name}: {spec.name}.{param}"
            assert all(type(v) is kinds[base] for v in items), f"{name}: {spec.name}.{param}={value!r} is not {base}"


def test_real_profiles_must_name_their_robot_and_never_record_the_expert(fake_share):
    def node(name, **parameters):
        return {"name": name, "parameters": parameters}

    _write(fake_share, "mini", _profile(kind="real", nodes=[node("learner_node", task="door_open")]))
    with pytest.raises(ProfileError, match="learner_node needs parameters.robot"):
        resolve_profile("mini", check_modules=False)
    _write(fake_share, "mini", _profile(kind="real", nodes=[node("analysis_node")]))
    with pytest.raises(ProfileError, match="demonstration: recorded"):
        resolve_profile("mini", check_modules=False)
    _write(fake_share, "mini", _profile(nodes=[node("demo_recorder", task="door_open")]))
    with pytest.raises(ProfileError, match="demo_recorder needs parameters.robot"):
        resolve_profile("mini", check_modules=False)
    _write(fake_share, "mini", _profile(kind="real", nodes=[node("learner_node", robot="arm"),
                                                            node("analysis_node", demonstration="recorded")]))
    assert resolve_profile("mini", check_modules=False).node("learner_node").parameters["robot"] == "arm"


def test_include_takes_nodes_from_another_profile_and_refuses_cycles_and_unknown_nodes(fake_share):
    _write(fake_share, "base", _profile(profile="base"))
    _write(fake_share, "mini", _profile(include={"profile": "base", "nodes": ["rollout_logger"]}, nodes=[]))
    node = resolve_profile("mini", {"run_dir": "/r"}, check_modules=False).node("rollout_logger")
    assert node.parameters == {"task": "door_open", "batch_size": 10, "run_dir": "/r"}, \
        "parameters and from_arguments come along"
    _write(fake_share, "mini", _profile(include={"profile": "base", "nodes": ["sim_node"]}, nodes=[]))
    with pytest.raises(ProfileError, match="has no node.*sim_node"):
        resolve_profile("mini", check_modules=False)
    _write(fake_share, "mini", _profile(include={"profile": "mini", "nodes": ["rollout_logger"]}))
    with pytest.raises(ProfileError, match="include each other"):
        resolve_profile("mini", check_modules=False)
    _write(fake_share, "mini", _profile(include={"profile": "base", "nodes": ["rollout_logger"]}))
    with pytest.raises(ProfileError, match="appears twice"):
        resolve_profile("mini", check_modules=False)


# ----------------------------------------------------------------------------- pre-launch checks
def _exe(path: Path, first_line: str = "#!/bin/sh") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(first_line + "\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def installed(tmp_path):
    """A finder over a fake install: every refine_ros executable, and the external packages
    the test puts there."""
    def make(*externals: str):
        found = {}
        for package in ("refine_ros", *externals):
            executables = ["rviz2"] if package == "rviz2" else (
                ["robot_state_publisher"] if package == "robot_state_publisher" else
                ["sim_node", "learner_node", "rollout_logger", "analysis_node", "safety_node", "arm_bridge",
                 "rc_car_bridge", "track_detector"])
            for exe in executables:
                found[(package, exe)] = _exe(tmp_path / "lib" / package / exe)
        return lambda package, exe: found.get((package, exe))
    return make


def test_missing_optional_nodes_are_skipped_with_a_warning(installed):
    plan = bringup.launch_plan(resolve_profile("car_sim"), finder=installed())
    names = [n.name for n in plan.nodes]
    assert names == ["sim_node", "learner_node", "rollout_logger", "analysis_node"]
    assert len(plan.skipped) == 2
    assert "robot_state_publisher is not installed" in plan.skipped[0] and "robot_state_publisher:=false" in plan.skipped[0]
    assert "rviz2 is not installed" in plan.skipped[1] and "rviz:=false" in plan.skipped[1]


def test_installed_optional_nodes_start_and_each_can_be_turned_off(installed):
    finder = installed("rviz2", "robot_state_publisher")
    plan = bringup.launch_plan(resolve_profile("door_sim"), finder=finder)
    optional = {n.name: n for n in plan.nodes if n.optional}
    assert set(optional) == {"robot_state_publisher", "rviz2"} and not plan.skipped
    assert "<robot" in optional["robot_state_publisher"].parameters["robot_description"]
    assert optional["rviz2"].arguments[0] == "-d" and optional["rviz2"].arguments[1].endswith("refine.rviz")
    off = bringup.launch_plan(resolve_profile("door_sim", {"rviz": "false", "robot_state_publisher": "false"}),
                              finder=finder)
    assert not [n for n in off.nodes if n.optional] and not off.skipped


@pytest.mark.parametrize("name, frame", [("arm_real", "base_link"), ("rc_car_real", "odom")])
def test_real_profiles_join_the_robots_own_tf_tree(installed, name, frame):
    """Issue 16: "The real profiles start a second robot_state_publisher and hang the robot
    under a `world` frame". By default a real profile starts none of ours and RViz looks from
    the robot's own frame; robot_state_publisher:=true still starts ours when asked."""
    finder = installed("rviz2", "robot_state_publisher")
    plan = bringup.launch_plan(resolve_profile(name), finder=finder)
    optional = {n.name: n for n in plan.nodes if n.optional}
    assert set(optional) == {"rviz2"} and not plan.skipped
    assert optional["rviz2"].arguments[2:] == ("-f", frame)
    defaults = {a.name: a.default for a in bringup.launch_arguments(name)}
    assert defaults["robot_state_publisher"] is False and defaults["rviz"] is True
    asked = bringup.launch_plan(resolve_profile(name, {"robot_state_publisher": "true"}), finder=finder)
    assert "robot_state_publisher" in {n.name for n in asked.nodes}


def test_a_missing_required_executable_stops_the_launch_before_anything_starts(installed):
    present = installed()

    def finder(package, exe):
        return None if exe in ("learner_node", "rollout_logger") else present(package, exe)

    with pytest.raises(bringup.LaunchCheckError) as err:
        bringup.launch_plan(resolve_profile("car_sim"), finder=finder)
    text = str(err.value)
    assert "nothing was started" in text
    assert "'learner_node' of package 'refine_ros' not found" in text and "'rollout_logger'" in text


def test_node_scripts_whose_python_lacks_the_dependencies_are_refused(tmp_path):
    """colcon writes the interpreter it ran under into every node script; one without the
    dependencies would start, crash on import and leave the rest of the graph waiting."""
    import sys

    good = _exe(tmp_path / "good" / "sim_node", f"#!{sys.executable}")
    bare = _exe(tmp_path / "bare" / "sim_node", f"#!{tmp_path}/gone/python3")  # a venv since deleted
    profile = resolve_profile("car_sim", {"rviz": "false", "robot_state_publisher": "false"})
    plan = bringup.launch_plan(profile, finder=lambda package, exe: good)
    assert len(plan.nodes) == 4
    with pytest.raises(bringup.LaunchCheckError, match="cannot be run"):
        bringup.launch_plan(profile, finder=lambda package, exe: bare)
    lacking = _exe(tmp_path / "lacking" / "python3", "#!/bin/sh\necho torch,gymnasium")  # finds neither
    with pytest.raises(bringup.LaunchCheckError, match=r"which cannot import torch, gymnasium.*python -m colcon"):
        bringup.launch_plan(profile, finder=lambda package, exe: _exe(tmp_path / "n" / exe, f"#!{lacking}"))
    missing = bringup.missing_imports(sys.executable, ("yaml", "surely_not_a_module_xyz"))
    assert missing == ["surely_not_a_module_xyz"]
    assert bringup.script_interpreter(good) == sys.executable
    assert bringup.script_interpreter(_exe(tmp_path / "env" / "x", "#!/usr/bin/env python3")) == "python3"


def test_the_plan_says_when_the_launch_ends(installed):
    plan = bringup.launch_plan(resolve_profile("car_sim", {"rviz": "false", "robot_state_publisher": "false"}),
                               finder=installed("rviz2"))
    assert plan.ends_with == "analysis_node" and plan.exit_reason("analysis_node").endswith(plan.FINISHED)
    assert "learner_node exited" in plan.exit_reason("learner_node")
    kept = bringup.launch_plan(resolve_profile("car_sim", {"keep_alive": "true"}), finder=installed("rviz2"))
    assert kept.ends_with is None and kept.exit_reason("analysis_node") is None
    assert kept.exit_reason("rviz2") is None, "closing RViz does not end a run"
    assert "sim_node exited" in kept.exit_reason("sim_node")


def test_the_command_is_what_launch_ros_runs(installed, tmp_path):
    plan = bringup.launch_plan(resolve_profile("car_sim", {"rviz": "false", "robot_state_publisher": "false"}),
                               finder=installed())
    sim = plan.nodes[0]
    assert sim.command(tmp_path / "p.yaml") == [str(sim.executable), "--ros-args", "-r", "__node:=sim_node",
                                                "--params-file", str(tmp_path / "p.yaml")]
    assert sim.params_document() == {"/sim_node": {"ros__parameters": {"task": "car_racing"}}}


def test_the_real_finder_finds_this_package_and_not_a_missing_one():
    assert bringup.find_executable("refine_ros", "sim_node") is not None
    assert bringup.find_executable("refine_ros", "no_such_node") is None
    assert bringup.find_executable("surely_not_a_ros_package", "rviz2") is None


def test_a_record_demo_launch_ends_with_the_stored_demonstration(installed):
    finder = installed()
    plan = bringup.launch_plan(resolve_profile("door_sim_record_demo", {"rviz": "false"}),
                               finder=lambda package, exe: finder("refine_ros", "sim_node") if package == "refine_ros"
                               else finder(package, exe))
    assert plan.ends_with == "demo_recorder" and plan.exit_reason("demo_recorder").endswith(plan.FINISHED)


# ---- the driver seam (driver:=NAME): which nodes drive a profile's robot ------------------------
@pytest.mark.parametrize("name", ALL_PROFILES)
def test_every_profile_takes_a_driver_choice_that_defaults_to_its_own(name):
    driver = {a.name: a for a in bringup.launch_arguments(name)}["driver"]
    assert driver.default is None and driver.default_text == ""
    own = resolve_profile(name, check_modules=False)
    assert resolve_profile(name, {"driver": ""}, check_modules=False).nodes == own.nodes


def test_an_unknown_driver_names_the_drivers():
    with pytest.raises(ProfileError, match=r"unknown driver 'moon'; drivers: ''"):
        resolve_profile("arm_real", {"driver": "moon"}, check_modules=False)


def test_a_driver_adds_nodes_and_changes_the_profile_nodes_it_names(monkeypatch):
    """What a driver (TWIN's `twin`) plugs in: new registry nodes, and changes to the profile's
    own (a bridge pointed at other topics), checked like any profile node."""
    from refine_ros.bringup import drivers

    def fake(profile, driver):
        if driver != "bench":
            return []
        return [{"name": "sim_node", "parameters": {"real_time": True}},
                {"name": "arm_bridge", "parameters": {"max_speed": 0.2}, "remappings": {"/joint_states": "/sim/js"}}]

    monkeypatch.setitem(drivers.DRIVERS, "bench", "a test driver")
    monkeypatch.setattr(drivers, "driver_nodes", fake)
    profile = resolve_profile("arm_real", {"driver": "bench"}, check_modules=False)
    assert [n.name for n in profile.nodes][0] == "sim_node", "a driver's own nodes start first"
    assert profile.node("sim_node").parameters == {"task": "door_open", "real_time": True}
    bridge = profile.node("arm_bridge")
    assert bridge.parameters["max_speed"] == 0.2 and bridge.parameters["gripper_closed_position"] == 0.8
    assert ("/joint_states", "/sim/js") in bridge.remappings
    assert "sim_node" not in [n.name for n in resolve_profile("arm_real", check_modules=False).nodes], \
        "the profile itself is unchanged"
    monkeypatch.setattr(drivers, "driver_nodes", lambda profile, driver: [{"name": "ghost_driver"}])
    with pytest.raises(ProfileError, match=r"\(driver:=bench\).*'ghost_driver' is not a node of this package"):
        resolve_profile("arm_real", {"driver": "bench"}, check_modules=False)


def test_a_node_process_dies_with_the_process_that_started_it(tmp_path):
    """A supervisor killed outright (SIGKILL: a CI timeout) must not leave its nodes on the graph."""
    import os
    import signal
    import subprocess
    import sys
    import time

    pid_file = tmp_path / "child.pid"
    parent = subprocess.Popen([sys.executable, "-c", (
        "import subprocess, sys, time; from refine_ros.bringup.processes import die_with_parent; "
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'], preexec_fn=die_with_parent); "
        f"open({str(pid_file)!r}, 'w').write(str(child.pid)); time.sleep(120)")])  # fmt: skip
    deadline = time.monotonic() + 30.0
    while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    child = int(pid_file.read_text())
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return
        # a dead child not yet reaped by init is a zombie: gone for the graph
        state = open(f"/proc/{child}/stat").read().split()[2] if os.path.exists(f"/proc/{child}/stat") else "X"
        if state in ("Z", "X"):
            return
        time.sleep(0.1)
    os.kill(child, signal.SIGKILL)
    raise AssertionError("the node process outlived the process that started it")
