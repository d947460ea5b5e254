"""The offline analyst's catalogue for this task: pre-written structural edits of the bundled
starter (`programs/offline_template.py` holds the starter with every edit's regions), each
tied to the diagnostic results that call for it. Not an LLM: these edits are written here in
advance, which is why the offline analyst's results are never evidence for the method."""

from __future__ import annotations

from refine_core.analyst.offline.catalogue import Edit, Trigger
from refine_core.analyst.offline.catalogue import when as _c

EDITS: tuple[Edit, ...] = (
    Edit(
        id="car_corner_speed",
        task="car_racing",
        description=(
            "Replace the cruise-speed-minus-penalties planner by a corner speed limit: every "
            "visible bend allows speed^2 = grip / curvature, raised by the braking distance left "
            "before it, and the target is the lowest of these, capped by a top speed. The fitted "
            "planner contradicted its own physics (a slow-down term changed sign), so under "
            "wheel spin or off-centre it asked for more speed, not less."
        ),
        trigger=Trigger(
            any_of=(
                _c("sign.weight_k_slip_slowdown", "ratio", "<", 0.0),
                _c("sign.weight_k_offset_slowdown", "ratio", "<", 0.0),
                _c("sign.weight_k_curvature_slowdown", "ratio", "<", 0.0),
                _c("bend.speed", "ratio", ">", 1.15),
            )
        ),
    ),
    Edit(
        id="car_coast",
        task="car_racing",
        description=(
            "Cut the gas in proportion to the steering magnitude. The rollout keeps the gas on "
            "while steering hard and its rear wheels spin far more often than in the "
            "demonstration, which lifts off in bends: with rear-wheel drive, gas in a bend "
            "costs the grip the steering needs."
        ),
        trigger=Trigger(
            any_of=(
                _c("traction", "spin_excess", ">", 0.2),
                _c("traction", "gas_hard_excess", ">", 0.3),
            )
        ),
    ),
    Edit(
        id="car_pursuit",
        task="car_racing",
        description=(
            "Replace the sum of offset and heading terms by pure pursuit: steer along the arc "
            "through a point on the centre line a speed-dependent number of tiles ahead. The car "
            "leaves the track far more often than the demonstration although its wheels keep "
            "their grip, so the steering law, not the speed, is what fails."
        ),
        trigger=Trigger(
            all_of=(_c("traction", "spin_excess", "<", 0.2),),
            any_of=(
                _c("metric.car_racing", "offtrack_frac", ">", 0.1),
                _c("offtrack", "ratio", ">", 3.0),
            ),
        ),
    ),
)
