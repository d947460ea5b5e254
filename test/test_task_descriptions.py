"""What the analyst is told about a task: the published information by default, the richer
facts as the named option, and the same information everywhere it reads (description, input,
action and metric lines, column names), while storage keeps the task's own names. Under the
published variant nothing the model reads names a simulator, a robot model or a library, and
the diagnostics are told of the demonstration table only when the run gives it to them."""

import re

import pytest
from published_words import FORBIDDEN

from refine_core.analyst import prompts
from refine_core.loop import analyst_table
from refine_core.rollout.schema import RolloutSchema, analyst_renames
from refine_core.tasks.registry import UnknownDescriptionError, get_task
from refine_core.tasks.spec import LEGACY_VARIANT, ROBOT_OWNER_VARIANT

TASKS = ("car_racing", "door_open")


def _words(text: str) -> str:
    return " ".join(text.split())


def test_published_is_the_default_and_detailed_the_named_option():
    for name in TASKS:
        assert get_task(name).spec.description_variant == "published"
        assert get_task(name, "detailed").spec.description_variant == "detailed"
        assert get_task(name).spec.describe() != get_task(name, "detailed").spec.describe()
        assert type(get_task(name)).description_variants[0] == "published"
        assert LEGACY_VARIANT in type(get_task(name)).description_variants
    # the pendulum has no published counterpart: its one text is a detailed one, and asking for
    # a published one is refused with what it has
    assert get_task("pendulum").spec.description_variant == "detailed"
    with pytest.raises(UnknownDescriptionError, match="it has: detailed"):
        get_task("pendulum", "published")


def test_the_published_car_description_has_the_published_facts_and_no_more():
    text = _words(get_task("car_racing").spec.describe())
    for fact in ("nearest first", "positive when the car is left of the centre", "positive when the road turns left",
                 "sharp corner", "normalised from [0, 100] to [0, 1]", "normalised from [-pi, pi] to [-1, 1]",
                 "angular velocity", "approximate wheel omega", "front-left, front-right, rear-left and rear-right",
                 "0.4 units wide", "|x| = 0.2 is the edge", "grass", "about 1.4 tiles long",
                 "steer in [-1, 1]", "negative steers left", "gas in [0, 1]", "brake in [0, 1]",
                 "visits for the first time earns reward", "small penalty", "forward(tiles, indicators)"):
        assert fact in text, fact
    for extra in ("slip", "spin", "rad/s", "expert", "1000 steps", "50 steps", "3 tiles", "rear wheels", "locks",
                  "counter-clockwise", "0.105", "0.15 long"):
        assert extra not in text, extra


def test_the_published_door_description_calls_features_4_to_6_the_doors():
    spec = get_task("door_open").spec
    text = _words(spec.describe())
    for fact in ("x, y, z coordinates of the door (4-6)", "quaternion of the door's orientation (7-10)",
                 "previous step (18-35)", "target the door should be opened to (36-38)", "vertical axis",
                 "the handle is horizontal", "the gripper points down", "relative to its current position",
                 "1 open, 0 close", "pull the door open to the desired angle"):
        assert fact in text, fact
    # no success rule, frames, offsets, target geometry, step size or action ranges (none were published)
    for extra in ("0.08", "world frame", "4.5 cm", "clockwise", "0.5 m", "1 cm", "handle (4-6)", "500 steps",
                  "qx, qy", "[-1, 1]", "[0, 1]"):
        assert extra not in text, extra
    # no metric line: it would tie features 4-6 to the target, which the published text does not
    assert not [line for line in spec.describe().splitlines() if line.startswith("Metric")]
    # the published reward, in one sentence: reach and grasp the handle, pull towards the target, a
    # success bonus and a time penalty
    sentences = [x for x in re.split(r"(?<=[.;:])\s+", text) if "reward" in x.lower()]
    assert len(sentences) == 1, sentences
    for term in ("reaches", "grasps the handle", "towards the target", "bonus for success", "penalty"):
        assert term in sentences[0], term
    detailed = _words(get_task("door_open", "detailed").spec.describe())
    assert "handle (4-6)" in detailed and "0.08 m" in detailed and "dx in [-1, 1]" in detailed
    assert "in [-1, 1]" in _words(get_task("car_racing").spec.describe()), "the car's ranges were published"


def test_columns_follow_the_variant_for_the_analyst_and_never_in_storage():
    published, detailed = get_task("door_open").spec, get_task("door_open", "detailed").spec
    # storage: the task's own names, whatever the variant (one demonstration serves both)
    assert published.observation_columns == detailed.observation_columns
    assert published.observation_columns[4:7] == ("handle_x", "handle_y", "handle_z")
    shown = published.for_analyst().observation_columns
    assert shown[4:7] == ("door_x", "door_y", "door_z") and shown[22:25] == ("prev_door_x", "prev_door_y",
                                                                              "prev_door_z")
    assert not any("handle" in c for c in shown)
    assert detailed.for_analyst().observation_columns == detailed.observation_columns
    schema = RolloutSchema.for_task(published.for_analyst(), ("latent_reach",)).columns
    assert "next_door_x" in schema and not any("handle" in c for c in schema)
    assert analyst_renames(published)["next_handle_z"] == "next_door_z"
    assert analyst_renames(detailed) == {} and analyst_renames(get_task("car_racing").spec) == {}


def test_no_request_the_analyst_reads_under_the_published_door_names_the_handle_as_a_column():
    import pandas as pd

    spec = get_task("door_open").spec
    shown = spec.for_analyst()
    schema = RolloutSchema.for_task(shown, ("latent_reach",)).columns
    requests = [prompts.generation_messages(shown), prompts.diagnostics_messages(shown, "class X: pass", schema),
                prompts.revision_messages(shown, "class X: pass", "results")]
    for messages in requests:
        text = "\n".join(m["content"] for m in messages)
        assert not re.search(r"handle_|handle \(4", text), text[:300]
    table = pd.DataFrame({"handle_x": [0.1], "next_handle_x": [0.2], "gripper_x": [0.0]})
    assert list(analyst_table(spec, table).columns) == ["door_x", "next_door_x", "gripper_x"]
    assert analyst_table(get_task("door_open", "detailed").spec, table) is table


def test_the_generation_rules_ask_for_a_variance_per_output_without_requiring_a_diagonal():
    rules = _words(prompts.GENERATION_RULES + prompts.contract(get_task("car_racing").spec))
    assert "variance for every action dimension" in rules
    assert "log standard deviation per action" not in rules and "learnable log-std" not in rules
    assert "allowed but not required" in rules and "may depend on the inputs" in rules


def _published_requests(spec, *, demo: bool) -> dict[str, str]:
    """Every request the model is sent for `spec` (each question, fresh and continued), as text."""
    shown = spec.for_analyst()
    schema = RolloutSchema.for_task(shown, ("latent_reach",)).columns
    program = "class X: pass"
    diagnose = prompts.diagnostics_messages(shown, program, schema, demo=demo)
    asked = diagnose + [{"role": "assistant", "content": "1. Task analysis ...\n```python\nprint(1)\n```"}]
    revise = prompts.revision_messages(shown, program, "results", conversation=asked, demo=demo)
    requests = {
        "system": prompts.system_text(shown),
        "generate": prompts.generation_messages(shown),
        "regenerate (fresh)": prompts.regeneration_messages(shown, failed_program=program, error="boom"),
        "regenerate (continued)": prompts.regeneration_messages(shown, failed_program=program, error="boom",
                                                                context=asked),
        "diagnose": diagnose,
        "revise (continued)": revise,
        "revise (more tests)": prompts.revision_messages(shown, program, "more", conversation=revise + [
            {"role": "assistant", "content": "DECISION: more_tests"}], demo=demo),
        "revise (fresh)": prompts.revision_messages(shown, program, "results", demo=demo),
        "correction": [prompts.correction_message("no code block", prompts.revision_format(demo=demo))],
        "analyst columns": schema,
    }
    return {k: v if isinstance(v, str) else "\n".join(m["content"] if isinstance(m, dict) else str(m) for m in v)
            for k, v in requests.items()}


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("demo", (False, True), ids=("rollout-only", "demo-access"))
@pytest.mark.parametrize("variant", ("published", ROBOT_OWNER_VARIANT))
def test_nothing_the_model_reads_under_the_published_variant_names_a_simulator_or_library(task, demo, variant):
    """The published variant and the robot owners' (what the real profiles send) alike."""
    spec = get_task(task, variant).spec
    for name, text in _published_requests(spec, demo=demo).items():
        found = FORBIDDEN.findall(text)
        assert not found, f"{task} {variant} {name} names {found}"
    assert not FORBIDDEN.search(" ".join(spec.for_analyst().observation_columns))


# what the owner's description must say about where each input comes from on the robot
OWNER_SOURCES = {
    "door_open": ("joint encoders", "fiducial tag", "camera", "hide the tag", "last sighting", "target",
                  "base frame", "x forward", "z up", "m/s"),
    "car_racing": ("camera", "road detector", "odometry", "electrical RPM", "all four the same", "m/s", "rad",
                   "start line", "never reverses"),
}
# ... and what it must not: a reward (a robot measures none), a metric line, an expert
OWNER_NEVER = ("reward", "Metric", "expert", "scripted")


@pytest.mark.parametrize("task", TASKS)
def test_the_robot_owners_description_says_where_each_input_comes_from_on_the_robot(task):
    text = _words(get_task(task, ROBOT_OWNER_VARIANT).spec.describe())
    for fact in OWNER_SOURCES[task]:
        assert fact in text, fact
    for word in OWNER_NEVER:
        assert word not in text, word
    assert type(get_task(task)).description_variants[0] == "published", "the owner's is never the default"


@pytest.mark.parametrize("task, profile", (("door_open", "arm_real"), ("car_racing", "rc_car_real")))
def test_the_real_profiles_send_the_owners_description_and_its_numbers_are_the_profiles(task, profile):
    """What the owner's text says about the robot (its speed limits, rates, the live episode's
    length, the observation timeout) is what the real profile sets: one changed without the
    other fails here."""
    from refine_ros.bringup import resolve_profile

    text = _words(get_task(task, ROBOT_OWNER_VARIANT).spec.describe())
    resolved = resolve_profile(profile, check_modules=False)
    assert resolved.node("analysis_node").parameters["task_description"] == ROBOT_OWNER_VARIANT
    learner = resolved.node("learner_node").parameters
    steps = int(learner["episode_steps"])
    assert f"an episode lasts {steps // 50} s ({steps} steps)" in text
    assert "50 per second" in text
    assert f"after {learner['observation_timeout']:g} s the episode ends" in text
    if task == "door_open":
        bridge = resolved.node("arm_bridge").parameters
        assert f"as a fraction of {bridge['max_speed']:g} m/s" in text
        # how long a hidden tag's last sighting lasts: the camera's own limit plus the hold
        assert f"repeated, for up to {bridge['handle_timeout'] + bridge['handle_hold']:g} s" in text
        assert f"after {learner['observation_timeout']:g} s the episode ends" in text
    else:
        bridge = resolved.node("rc_car_bridge").parameters
        assert f"as a fraction of {bridge['max_steering_angle']:g} rad" in text
        assert f"x {bridge['max_speed']:g} m/s" in text
        assert f"m/s x {bridge['speed_to_sim'] / 100:.3f}" in text


@pytest.mark.parametrize("task", TASKS)
def test_the_check_for_simulator_names_can_fail(task):
    """The legacy wording (what the runs recorded before it was fixed were sent) names them, and
    the same check finds them there."""
    found = {name for name, text in _published_requests(get_task(task, LEGACY_VARIANT).spec, demo=True).items()
             if FORBIDDEN.search(text)}
    assert {"system", "generate", "diagnose", "revise (fresh)"} <= found
    assert not FORBIDDEN.search(prompts.SYSTEM) and FORBIDDEN.search(prompts.LEGACY_SYSTEM)


@pytest.mark.parametrize("task", TASKS)
def test_the_model_is_told_of_the_demonstration_table_only_when_the_code_receives_it(task):
    spec = get_task(task).spec
    off, on = _published_requests(spec, demo=False), _published_requests(spec, demo=True)
    for name in ("diagnose", "revise (continued)", "revise (more tests)", "revise (fresh)"):
        assert "`demo`" not in off[name] and "demo.columns" not in off[name], name
        assert "`df` is defined" in off[name] or "only data the code receives" in off[name], name
        assert "demonstration's actions" not in off[name], "no comparison with a table the code cannot read"
        assert "`demo`" in on[name], name
    assert "demonstration's actions in similar states" in on["diagnose"]


def test_the_legacy_variant_is_the_wording_the_committed_runs_were_sent():
    """The runs under results/llm/ recorded before the published variant was corrected were sent
    the legacy wording: their zero-shot requests hash the same as today's legacy requests."""
    import json
    from pathlib import Path

    from refine_core.analyst.transcript import request_hash
    from refine_core.run_setup import upgrade_recorded

    root = Path(__file__).resolve().parent.parent / "results" / "llm"
    checked = 0
    for path in sorted(root.glob("*/*/transcript.jsonl")):
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        settings = upgrade_recorded(lines[0]["settings"])
        if settings["task_description"] != LEGACY_VARIANT:
            continue
        generate = next((x for x in lines[1:] if x["role"] == "generate"), None)
        if generate is None:
            continue
        spec = get_task(settings["task"], LEGACY_VARIANT).spec.for_analyst()
        assert request_hash(prompts.generation_messages(spec), "generate") == generate["hash"], path
        checked += 1
    assert checked >= 2 or not list(root.glob("*/*/transcript.jsonl"))
