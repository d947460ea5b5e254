"""The offline analyst's pre-written edits of the car's starter (`programs/offline_template.py`
holds the starter with every edit's regions), each tied to the diagnostic results that call
for it; plain data that `refine_core.analyst.offline.catalogue` reads (its `edit_from_data`
says the format). Not an LLM: written here in advance, so never evidence for the method."""

EDITS: tuple[dict, ...] = (
    {
        "id": "car_corner_speed",
        "description": (
            "Replace the cruise-speed-minus-penalties planner by a corner speed limit: every "
            "visible bend allows speed^2 = grip / curvature, raised by the braking distance left "
            "before it, and the target is the lowest of these, capped by a top speed. The fitted "
            "planner contradicted its own physics (a slow-down term changed sign), so under "
            "wheel spin or off-centre it asked for more speed, not less."
        ),
        "any_of": (
            ("sign.weight_k_slip_slowdown", "ratio", "<", 0.0),
            ("sign.weight_k_offset_slowdown", "ratio", "<", 0.0),
            ("sign.weight_k_curvature_slowdown", "ratio", "<", 0.0),
            ("bend.speed", "ratio", ">", 1.15),
        ),
    },
    {
        "id": "car_coast",
        "description": (
            "Cut the gas in proportion to the steering magnitude. The rollout keeps the gas on "
            "while steering hard and its rear wheels spin far more often than in the "
            "demonstration, which lifts off in bends: with rear-wheel drive, gas in a bend "
            "costs the grip the steering needs."
        ),
        "any_of": (
            ("traction", "spin_excess", ">", 0.2),
            ("traction", "gas_hard_excess", ">", 0.3),
        ),
    },
    {
        "id": "car_pursuit",
        "description": (
            "Replace the sum of offset and heading terms by pure pursuit: steer along the arc "
            "through a point on the centre line a speed-dependent number of tiles ahead. The car "
            "leaves the track far more often than the demonstration although its wheels keep "
            "their grip, so the steering law, not the speed, is what fails."
        ),
        "all_of": (("traction", "spin_excess", "<", 0.2),),
        "any_of": (
            ("metric.car_racing", "offtrack_frac", ">", 0.1),
            ("offtrack", "ratio", ">", 3.0),
        ),
    },
)
