"""What the analyst is told about a task: the published information by default, the richer
facts as the named option, and the same information everywhere it reads (description, input,
action and metric lines, column names), while storage keeps the task's own names."""

import re

import pytest

from refine_core.analyst import prompts
from refine_core.loop import analyst_table
from refine_core.rollout.schema import RolloutSchema, analyst_renames
from refine_core.tasks.registry import UnknownDescriptionError, get_task


def _words(text: str) -> str:
    return " ".join(text.split())


def test_published_is_the_default_and_detailed_the_named_option():
    for name in ("car_racing", "door_open"):
        assert get_task(name).spec.description_variant == "published"
        assert get_task(name, "detailed").spec.description_variant == "detailed"
        assert get_task(name).spec.describe() != get_task(name, "detailed").spec.describe()
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
    # no success rule, frames, offsets, target geometry or step size; the metric line names the door
    for extra in ("0.08", "world frame", "4.5 cm", "clockwise", "0.5 m", "1 cm", "handle (4-6)", "500 steps",
                  "qx, qy"):
        assert extra not in text, extra
    metric_line = next(line for line in spec.describe().splitlines() if line.startswith("Metric"))
    assert "door's coordinates (4-6)" in metric_line and "handle" not in metric_line
    detailed = _words(get_task("door_open", "detailed").spec.describe())
    assert "handle (4-6)" in detailed and "0.08 m" in detailed


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
