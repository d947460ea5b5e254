"""Task specs built directly (no simulator) for the policy/IL tests, with the contract's schemas:
car racing tiles (12, 4) + indicators (7,) -> 3 actions; door opening features (39,) -> 4."""

from refine_core.tasks.spec import ActionSpec, InputSpec, MetricSpec, TaskSpec

TILE_FIELDS = ("x", "y", "theta", "border")
CAR = TaskSpec(
    name="car_racing",
    env_id="refine/CarRacingSemantic-v0",
    description="Drive around the track.",
    policy_class="RacecarPolicy",
    inputs=(
        InputSpec("tiles", (12, 4), tuple(f"tile{i}_{f}" for i in range(12) for f in TILE_FIELDS)),
        InputSpec(
            "indicators",
            (7,),
            ("speed", "heading", "angular_velocity", "wheel_fl", "wheel_fr", "wheel_rl", "wheel_rr"),
        ),
    ),
    actions=(ActionSpec("steer", -1.0, 1.0), ActionSpec("gas", 0.0, 1.0), ActionSpec("brake", 0.0, 1.0)),
    metric=MetricSpec("return", True),
    episode_steps=1000,
)

DOOR = TaskSpec(
    name="door_open",
    env_id="refine/DoorOpen-v0",
    description="Open the door.",
    policy_class="OpenDoorPolicy",
    inputs=(InputSpec("features", (39,), tuple(f"obs_{i}" for i in range(39))),),
    actions=(
        ActionSpec("dx", -1.0, 1.0),
        ActionSpec("dy", -1.0, 1.0),
        ActionSpec("dz", -1.0, 1.0),
        ActionSpec("grip", 0.0, 1.0),
    ),
    metric=MetricSpec("min_handle_target_distance", False),
    episode_steps=500,
)
