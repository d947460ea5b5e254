"""The wire-format module (refine_ros/wire/messages.py) on its own: what a receiver accepts and what
it refuses, for the named Step streams and the command path's counted vectors."""

from __future__ import annotations

import math

import pytest

from refine_ros.wire.messages import (
    REWARD_NAMES,
    NotCounted,
    counted_fields,
    pack_step,
    pack_vector,
    read_counted,
    step_fields,
    unpack_vector,
    vector_label,
)


def test_a_step_carries_its_names_and_round_trips():
    msg = pack_step(1001, 7, REWARD_NAMES, [-0.5, 0.0, 1.0])
    vec = unpack_vector(msg)
    assert (vec.episode, vec.step, vec.values, vec.names) == (1001, 7, (-0.5, 0.0, 1.0), REWARD_NAMES)
    assert list(msg.names) == list(REWARD_NAMES) and msg.header.stamp.sec == 0


def test_a_counted_vector_round_trips_with_its_label():
    msg = pack_vector(3, 4, [0.1, 0.2], label="stale")
    vec = unpack_vector(msg, width=2, finite=True)
    assert (vec.episode, vec.step, vec.values, vec.names) == (3, 4, (0.1, 0.2), ())
    assert vector_label(msg) == "stale" and msg.layout.data_offset == 2


def test_the_plain_fields_are_the_messages_fields():
    """What the MCAP export writes is what the nodes publish."""
    fields = counted_fields(3, 4, [0.1], "action")
    msg = pack_vector(3, 4, [0.1], "action")
    assert fields["data"] == list(msg.data) and fields["layout"]["data_offset"] == msg.layout.data_offset
    step = step_fields(5, 6, ["a", "b"], [1, 2], stamp_ns=2_500_000_000)
    assert step["header"]["stamp"] == {"sec": 2, "nanosec": 500_000_000}
    assert (step["episode"], step["step"], step["names"], step["values"]) == (5, 6, ["a", "b"], [1.0, 2.0])
    with pytest.raises(ValueError, match="2 names for 1 values"):
        step_fields(0, 0, ["a", "b"], [1.0])


@pytest.mark.parametrize(("offset", "data", "kwargs", "why"), [
    (0, [0, 0, 1.0], {}, "not a counted vector"),
    (2, [0], {}, "not a counted vector"),
    (2, [0, 0, 1.0], {"width": 2}, "1 values, expected 2"),
    (2, [0, 0, math.nan], {"finite": True}, "NaN or inf"),
    (2, [math.inf, 0, 1.0], {}, "counters out of range"),
    (2, [2.0**60, 0, 1.0], {}, "counters out of range"),
])
def test_a_bad_counted_vector_is_refused_with_the_reason(offset, data, kwargs, why):
    with pytest.raises(NotCounted, match=why):
        read_counted(offset, data, **kwargs)


def test_a_step_whose_names_and_values_differ_is_refused():
    msg = pack_step(1, 2, ["a", "b"], [1.0, 2.0])
    msg.names = ["a"]
    with pytest.raises(NotCounted, match="1 names for 2 values"):
        unpack_vector(msg)
    with pytest.raises(NotCounted, match="NaN"):
        unpack_vector(pack_step(1, 2, ["a"], [math.nan]), finite=True)
    assert math.isnan(unpack_vector(pack_step(1, 2, ["a"], [math.nan])).values[0])  # a data stream may hold NaN
