"""Record against a live (local) endpoint, then replay with the endpoint gone: identical
answers, no network, and a clear error for a request the transcript lacks."""

import json
import socket
import urllib.request

import pytest
from fake_openai_server import FakeOpenAIServer, Reply
from test_analyst_openai import GOOD, KEY, PROGRAM, TESTS, config_for, small_spec

from refine_core.analyst import (
    AnalystConfig,
    ConfigError,
    OpenAIAnalyst,
    RecordingAnalyst,
    ReplayAnalyst,
    TranscriptError,
    TranscriptMiss,
    default_analyst_name,
    make_analyst,
)
from refine_core.analyst.transcript import request_hash

SCHEMA = ["x", "v", "weight_k_pos", "latent_push", "mean_push", "act_push"]


def session(analyst):
    """A short refinement conversation; returns everything the loop would keep."""
    spec = small_spec()
    gen = analyst.generate(spec)
    diag = analyst.diagnose(spec, gen.program, SCHEMA)
    more = analyst.revise(spec, gen.program, "corr: -0.9", conversation=diag.conversation)
    new = analyst.revise(spec, gen.program, "sat: 0.4", conversation=more.conversation)
    fixed = analyst.generate(spec, failed_program=new.program, error="FitError: NaN",
                             context=new.conversation)
    answers = [gen, diag, more, new, fixed]
    keep = []
    for a in answers:
        d = {k: v for k, v in vars(a).items() if k != "calls"}
        d["calls"] = [{k: v for k, v in vars(c).items() if k != "latency_s"} for c in a.calls]
        keep.append(d)
    return keep


def script():
    return [
        Reply.status(429),
        Reply.text("Let me think about it."),  # unusable: corrected
        Reply.text(GOOD),
        Reply.text(f"```python\n{TESTS}```"),
        Reply.text(f"DECISION: more_tests\n```python\n{TESTS}```"),
        Reply.text(f"DECISION: revise\n```python\n{PROGRAM}```"),
        Reply.text(GOOD),
    ]


def test_record_then_replay_is_identical_without_a_server(tmp_path, monkeypatch):
    path = tmp_path / "transcript.jsonl"
    with FakeOpenAIServer(script()) as server:
        live = OpenAIAnalyst(config_for(server), sleep=lambda s: None)
        recorded = session(RecordingAnalyst(live, path))
        base_url = server.base_url
    assert recorded[0]["program"] and recorded[3]["kind"] == "program"
    assert recorded[4]["conversation"][: len(recorded[3]["conversation"])] == recorded[3][
        "conversation"]

    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(lines) == 6  # the 429 retry is inside one call; the correction is its own line
    assert {"hash", "role", "request", "response"} <= set(lines[0])
    assert [ln["role"] for ln in lines] == ["generate", "generate", "diagnose", "revise", "revise",
                                            "regenerate"]
    # A continued request is recorded whole, so its hash covers the exchange before it.
    assert lines[4]["request"]["messages"][: len(recorded[2]["conversation"])] == recorded[2][
        "conversation"]
    assert KEY not in path.read_text()

    # The server is gone, and any attempt to open a connection fails the test.
    with pytest.raises(OSError):
        urllib.request.urlopen(base_url + "/models", timeout=1)

    def no_network(*args, **kwargs):
        raise AssertionError("replay opened a network connection")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    replayed = session(ReplayAnalyst(path))
    assert replayed == recorded


def test_replay_miss_names_the_role_and_hash(tmp_path):
    path = tmp_path / "transcript.jsonl"
    with FakeOpenAIServer([Reply.text(GOOD)]) as server:
        RecordingAnalyst(OpenAIAnalyst(config_for(server)), path).generate(small_spec())
    replay = ReplayAnalyst(path)
    assert replay.generate(small_spec()).ok
    with pytest.raises(TranscriptMiss) as info:
        replay.diagnose(small_spec(), PROGRAM, ["x", "different"])
    err = info.value
    assert err.role == "diagnose" and len(err.key) == 64
    assert "'diagnose'" in str(err) and err.key[:16] in str(err) and str(path) in str(err)


def test_hash_depends_on_role_and_messages_only():
    messages = [{"role": "user", "content": "hi"}]
    assert request_hash(messages, "diagnose") == request_hash(
        [{"content": "hi", "role": "user"}], "diagnose"
    )
    assert request_hash(messages, "diagnose") != request_hash(messages, "revise")
    assert request_hash(messages, "revise") != request_hash(
        [{"role": "user", "content": "hi "}], "revise"
    )


def test_recorded_failures_replay_as_failures(tmp_path):
    path = tmp_path / "t.jsonl"
    with FakeOpenAIServer([Reply.status(500)] * 2) as server:
        rec = RecordingAnalyst(OpenAIAnalyst(config_for(server, max_attempts=2),
                                             sleep=lambda s: None), path)
        live = rec.generate(small_spec())
    again = ReplayAnalyst(path).generate(small_spec())
    assert live.error and again.error == live.error and again.program is None


def test_repeated_identical_requests_replay_in_order(tmp_path):
    path = tmp_path / "t.jsonl"
    other = GOOD.replace("-1.0)", "-2.0)")
    with FakeOpenAIServer([Reply.text(GOOD), Reply.text(other)]) as server:
        rec = RecordingAnalyst(OpenAIAnalyst(config_for(server)), path)
        first, second = rec.generate(small_spec()).program, rec.generate(small_spec()).program
    replay = ReplayAnalyst(path)
    assert [replay.generate(small_spec()).program for _ in range(3)] == [first, second, second]


@pytest.mark.parametrize(
    "content, match",
    [("{not json}\n{}\n", "line 1 is malformed"), ('{"role": "x"}\n', "line 1"),
     ('{"hash": 5}\n', "hash is not a string")],
)
def test_malformed_transcripts_are_clear_errors(tmp_path, content, match):
    path = tmp_path / "t.jsonl"
    path.write_text(content)
    with pytest.raises(TranscriptError, match=match):
        ReplayAnalyst(path)


def test_missing_transcript_and_half_written_last_line(tmp_path):
    with pytest.raises(TranscriptError, match="cannot read"):
        ReplayAnalyst(tmp_path / "absent.jsonl")
    path = tmp_path / "t.jsonl"
    with FakeOpenAIServer([Reply.text(GOOD)]) as server:
        RecordingAnalyst(OpenAIAnalyst(config_for(server)), path).generate(small_spec())
    with path.open("a") as fh:
        fh.write('{"hash": "abc", "resp')  # a recording killed mid-write
    assert ReplayAnalyst(path).generate(small_spec()).ok


# ------------------------------------------------------------------------ factory


def test_factory_builds_each_llm_analyst(tmp_path):
    path = tmp_path / "t.jsonl"
    with FakeOpenAIServer([Reply.text(GOOD)]) as server:
        cfg = config_for(server)
        live = make_analyst("openai", config=cfg)
        rec = make_analyst("record", config=cfg, transcript=path)
        assert (live.name, live.is_llm, rec.name) == ("openai", True, "record")
        assert rec.generate(small_spec()).ok
    replay = make_analyst("replay", config=AnalystConfig(), transcript=path)
    assert replay.name == "replay" and replay.generate(small_spec()).ok


def test_the_more_tests_cap_is_part_of_the_request(tmp_path):
    path = tmp_path / "t.jsonl"
    with FakeOpenAIServer([Reply.text("DECISION: stop")]) as server:
        rec = make_analyst("record", config=config_for(server), transcript=path,
                           max_test_requests=2)
        assert rec.max_test_requests == 2
        assert rec.revise(small_spec(), PROGRAM, "r").kind == "stop"
    same = make_analyst("replay", config=AnalystConfig(), transcript=path, max_test_requests=2)
    assert same.revise(small_spec(), PROGRAM, "r").kind == "stop"
    other = make_analyst("replay", config=AnalystConfig(), transcript=path)
    with pytest.raises(TranscriptMiss):
        other.revise(small_spec(), PROGRAM, "r")


def test_factory_errors():
    with pytest.raises(ValueError, match="unknown analyst"):
        make_analyst("gpt", config=AnalystConfig())
    with pytest.raises(ValueError, match="transcript"):
        make_analyst("replay", config=AnalystConfig())
    with pytest.raises(ConfigError, match="no LLM endpoint"):
        make_analyst("openai", config=AnalystConfig())


def test_default_analyst_name():
    assert default_analyst_name(AnalystConfig()) == "offline"
    assert default_analyst_name(AnalystConfig(base_url="http://127.0.0.1:1/v1")) == "openai"
    assert default_analyst_name(AnalystConfig(api_key=KEY)) == "openai"


def test_factory_offline_when_available():
    offline = pytest.importorskip("refine_core.analyst.offline",
                                  reason="the offline analyst (another engineer's) is not present")
    if not hasattr(offline, "OfflineAnalyst"):
        pytest.skip("refine_core.analyst.offline does not define OfflineAnalyst yet")
    analyst = make_analyst("offline", config=AnalystConfig())
    assert analyst.is_llm is False and analyst.name == "offline"
    assert make_analyst("offline", config=AnalystConfig()).is_llm is False
