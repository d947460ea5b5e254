"""The words no text the model reads under the published variant may contain: names a robot
owner could not tell the model (simulators, robot models, libraries) and "simulator" /
"simulation" (the episodes are rollouts wherever they run). `car_racing`, the task's own name,
is allowed."""

import re

FORBIDDEN = re.compile(r"car\s?racing(?!_)|gymnasium|\bgym\b|box2d|meta-?world|mujoco|sawyer|simulat", re.I)
