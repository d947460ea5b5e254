"""The rollout logger's per-episode bookkeeping, without a graph: what it records when the
tail of an episode never arrives."""

from refine_ros.logger.episodes import Episode


def test_a_tail_that_never_comes_is_recorded_with_the_stream_that_stopped_short():
    episode = Episode(number=3)
    for step in range(4):
        for stream in ("observation", "action"):
            episode.note_step(stream, step)
        episode.rows += 1
    episode.note_step("observation", 4)  # step 4's observation came, its action never did
    episode.rows += 1
    episode.end_summary["steps"] = 6  # the end event says six steps were taken
    episode.end_at = 100.0

    assert episode.settle(105.0, has_pending_rows=False, join_timeout=0.05) == (False, None), \
        "within the settle window it waits for the tail"
    closed, gap = episode.settle(110.5, has_pending_rows=False, join_timeout=0.05)
    assert closed and gap is not None and gap.missing == 1 and episode.gaps == 1
    assert gap.last_seen == {"observation": 4, "action": 3}
    assert "rows 5 of 6" in gap.message and "action 3, observation 4" in gap.message
    assert gap.data()["last_seen"] == {"observation": 4, "action": 3}
    assert "1 message(s) missing" in episode.error


def test_a_tail_that_arrives_closes_the_episode_without_a_gap():
    episode = Episode(number=0)
    for step in range(3):
        episode.note_step("observation", step)
        episode.note_step("action", step)
        episode.rows += 1
    episode.end_summary["steps"] = 3
    episode.end_at = 1.0
    assert episode.settle(1.1, has_pending_rows=False, join_timeout=0.05) == (True, None)
    assert episode.error is None
