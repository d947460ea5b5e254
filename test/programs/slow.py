"""A door program whose fit takes tens of seconds: the bundled starter with deliberate busy
work in its forward pass (a few 300x300 matrix products that change nothing), so a test can
cancel a fit that is surely still running (the plain starter fits in about three seconds)."""

from refine_core.policy.programs import starter_program

BUSY_WORK = ("        work = features.new_ones(300, 300) / 300.0\n"
             "        for _ in range(10):\n"
             "            work = torch.tanh(work @ work)\n")


def slow_door_program() -> str:
    source = starter_program("door_open")
    head = "    def forward(self, features):\n"
    assert head in source, "the starter's forward changed: update this helper"
    return source.replace(head, head + BUSY_WORK, 1)
