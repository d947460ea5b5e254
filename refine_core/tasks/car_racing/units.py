"""The car task's observation units that a robot's side must reproduce, in a module of their
own so a robot computer can read them without importing the Box2D simulator."""

SPEED_SCALE = 100.0
"""The speed indicator and the wheel readings are world units per second divided by this."""
