"""The OpenAI analyst against a local OpenAI-compatible server, through the real `openai`
client over real HTTP: retries, corrective retries, token accounting, key secrecy, config."""

import dataclasses
import json
import logging
import socket

import pytest
from fake_openai_server import FakeOpenAIServer, Reply, by_role

from refine_core.analyst import (
    AnalystConfig,
    ConfigError,
    OpenAIAnalyst,
    OpenAIChatBackend,
    load_config,
    prompts,
)
from refine_core.analyst.config import add_config_arguments, config_from_args
from refine_core.analyst.parser import statement_parts
from refine_core.tasks.spec import ActionSpec, InputSpec, MetricSpec, TaskSpec

KEY = "sk-test-0123456789abcdefSECRET"

PROGRAM = """import torch
from torch import nn


class ToyPolicy(nn.Module):
    def __init__(self):
        super().__init__()
        self.k_pos = nn.Parameter(torch.tensor(-1.0))
        self.log_std = nn.Parameter(torch.tensor([-1.0]))

    def forward(self, obs):
        obs = torch.nan_to_num(obs)
        push = self.k_pos * obs[:, 0]
        mean = push.unsqueeze(-1)
        tril = torch.diag_embed(self.log_std.exp().expand_as(mean))
        return mean, tril, {"weight_k_pos": self.k_pos.reshape(1), "latent_push": push}
"""
GOOD = f"A proportional controller on position.\n\n```python\n{PROGRAM}```\n"
TESTS = "print('corr:', df['x'].corr(df['act_push']))\n"


def small_spec() -> TaskSpec:
    return TaskSpec(
        name="toy",
        env_id="toy-v0",
        description="Keep a point mass at x = 0 by pushing it.",
        policy_class="ToyPolicy",
        inputs=(InputSpec("obs", (2,), ("x", "v"), "position and velocity of the mass"),),
        actions=(ActionSpec("push", -1.0, 1.0, "force on the mass"),),
        metric=MetricSpec("return", True, "sum of rewards"),
        episode_steps=100,
    )


def config_for(server: FakeOpenAIServer, **kw) -> AnalystConfig:
    base = dict(base_url=server.base_url, api_key=KEY, timeout_s=2.0, backoff_s=0.01,
                backoff_max_s=0.05, max_attempts=4)
    base.update(kw)
    return AnalystConfig(**base)


def no_sleep(delays):
    return delays.append


def test_rate_limit_then_success_is_retried_with_retry_after():
    delays = []
    with FakeOpenAIServer([Reply.status(429, headers=(("Retry-After", "0.04"),)),
                           Reply.status(429, headers=(("retry-after-ms", "30"),)),
                           Reply.text(GOOD)]) as server:
        analyst = OpenAIAnalyst(config_for(server), sleep=no_sleep(delays))
        answer = analyst.generate(small_spec())
        assert answer.ok, answer.error
        assert "class ToyPolicy" in answer.program
        assert len(server.chat_requests) == 3
        (call,) = answer.calls
        assert (call.role, call.attempt, call.error) == ("generate", 1, None)
        assert (call.tokens_in, call.tokens_out) == server.usage_served[-1]
        assert call.tokens_in > 50 and call.tokens_out > 10
    # The server's delay beats the jittered backoff (<= 0.01, 0.02 s) and stays under the cap.
    assert delays == [pytest.approx(0.04), pytest.approx(0.03)]


def test_server_error_and_timeout_are_retried():
    delays = []
    script = [Reply.status(500), Reply.status(503), Reply.slow(GOOD, 1.5), Reply.text(GOOD)]
    with FakeOpenAIServer(script) as server:
        cfg = config_for(server, timeout_s=0.4, backoff_s=0.01, backoff_max_s=1.0)
        answer = OpenAIAnalyst(cfg, sleep=no_sleep(delays)).generate(small_spec())
        assert answer.ok, answer.error
        assert len(server.chat_requests) == 4
    # Exponential backoff with jitter in [0.5, 1] of 0.01 * 2^(n-1).
    assert len(delays) == 3
    for n, delay in enumerate(delays, 1):
        assert 0.005 * 2 ** (n - 1) <= delay <= 0.01 * 2 ** (n - 1)


def test_attempts_are_bounded_and_failure_is_an_answer_not_an_exception():
    with FakeOpenAIServer([Reply.status(500)] * 10) as server:
        answer = OpenAIAnalyst(config_for(server, max_attempts=3), sleep=lambda s: None).generate(
            small_spec()
        )
        assert len(server.chat_requests) == 3
    assert answer.program is None
    assert "HTTP 500" in answer.error and "3 attempt" in answer.error
    assert answer.calls[-1].error == answer.error


def test_client_errors_are_not_retried():
    with FakeOpenAIServer([Reply.text(GOOD)], api_key="the-right-key") as server:
        answer = OpenAIAnalyst(config_for(server), sleep=lambda s: None).generate(small_spec())
        assert len(server.chat_requests) == 1
        assert server.pending == 1
    assert answer.program is None and "HTTP 401" in answer.error


def test_connection_refused_is_retried_then_reported():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cfg = AnalystConfig(base_url=f"http://127.0.0.1:{port}/v1", api_key=KEY, timeout_s=1.0,
                        backoff_s=0.0, max_attempts=2)
    answer = OpenAIAnalyst(cfg, sleep=lambda s: None).generate(small_spec())
    assert answer.program is None
    assert "connection error" in answer.error and "2 attempt" in answer.error


def test_unusable_answers_are_sent_back_with_the_problem():
    broken_fence = "Here it is:\n```python\nclass ToyPolicy(nn.Module:\n    pass\n"
    script = [Reply.text("I would use a PD controller."), Reply.text(broken_fence),
              Reply.text(GOOD)]
    with FakeOpenAIServer(script) as server:
        analyst = OpenAIAnalyst(config_for(server, max_corrections=2), sleep=lambda s: None)
        answer = analyst.generate(small_spec())
        requests = server.chat_requests
        served = list(server.usage_served)
    assert answer.ok and "k_pos" in answer.program
    assert [c.attempt for c in answer.calls] == [1, 2, 3]
    assert "no Python code block" in answer.calls[0].error
    assert "syntax error" in answer.calls[1].error
    assert answer.calls[2].error is None
    # The second request carries the first answer and the parse error.
    second = requests[1].messages
    assert second[-2] == {"role": "assistant", "content": "I would use a PD controller."}
    assert "no Python code block" in second[-1]["content"]
    assert json.loads(answer.calls[1].prompt) == second
    # Token accounting per call matches what the server reported.
    assert [(c.tokens_in, c.tokens_out) for c in answer.calls] == served


def test_corrections_are_bounded():
    with FakeOpenAIServer([Reply.text("no code")] * 5) as server:
        analyst = OpenAIAnalyst(config_for(server, max_corrections=1), sleep=lambda s: None)
        answer = analyst.generate(small_spec())
        assert len(server.chat_requests) == 2
    assert answer.program is None
    assert answer.error.startswith("unusable answer after 2 attempt(s)")


STATEMENT = """**1. Task analysis:** keep the mass at zero without overshoot.
**2. Model summary:** push = k_pos * x, a proportional law.
**3. Expected nominal behaviour:** act_push has the opposite sign of x.
**4. Anomalies to look for:** saturation, oscillation around zero.
**5. Hypotheses:** H1 the correlation of x and act_push is strongly negative.
"""
DIAGNOSIS = f"{STATEMENT}\n```python\n{TESTS}```\n"


def test_diagnose_then_revise_continue_one_conversation():
    spec = small_spec()
    revised = PROGRAM.replace("-1.0)", "-2.0)")
    script = [
        Reply.text(DIAGNOSIS),
        Reply.text(f"DECISION: more_tests\nH1 holds; is it saturated?\n```python\n{TESTS}```"),
        Reply.text(f"Decision: revise\nAdd damping.\n```py\n{revised}```"),
        Reply.text(GOOD),
    ]
    with FakeOpenAIServer(script) as server:
        analyst = OpenAIAnalyst(config_for(server), sleep=lambda s: None, max_test_requests=3)
        diag = analyst.diagnose(spec, PROGRAM, ["x", "v", "latent_push", "act_push"])
        more = analyst.revise(spec, PROGRAM, "corr: -0.93", conversation=diag.conversation)
        new = analyst.revise(spec, PROGRAM, "saturated: 0.41", conversation=more.conversation)
        fixed = analyst.generate(spec, failed_program=new.program, error="FitError: NaN loss",
                                 context=new.conversation)
        requests = [r.messages for r in server.chat_requests]
        roles = [r.role for r in server.chat_requests]
    assert roles == ["diagnose", "revise", "revise", "regenerate"]

    # The statement written before the code is kept, part by part, without the code.
    assert diag.ok and diag.code.strip() == TESTS.strip()
    parts = statement_parts(diag.reasoning)
    assert list(parts) == ["task_analysis", "model_summary", "expected_behaviour",
                           "anomalies", "hypotheses"]
    assert "strongly negative" in parts["hypotheses"] and "print(" not in diag.reasoning
    assert diag.conversation == requests[0] + [{"role": "assistant", "content": DIAGNOSIS}]
    assert "five headed parts" in requests[0][-1]["content"]

    # Each revision request is the previous exchange plus one user message.
    assert requests[1][:-1] == diag.conversation
    results_message = requests[1][-1]["content"]
    assert "corr: -0.93" in results_message and prompts.REVISION_FORMAT in results_message
    assert "statement you wrote before your code" in results_message
    assert "at most 3 requests for more tests" in results_message
    assert more.kind == "tests" and more.conversation[:-1] == requests[1]
    assert requests[2][:-1] == more.conversation
    assert "results of your additional tests" in requests[2][-1]["content"]
    assert "saturated: 0.41" in requests[2][-1]["content"]
    assert new.kind == "program" and "-2.0" in new.program
    assert new.conversation[-1]["role"] == "assistant"

    # A failed revision is repaired inside the same exchange: the model sees its statement,
    # the results, its program and the error; the program is not quoted a second time.
    assert requests[3][:-1] == new.conversation
    repair = requests[3][-1]["content"]
    assert prompts.REPAIR_INTRO in repair and "FitError: NaN loss" in repair
    assert "class ToyPolicy" not in repair
    assert fixed.ok and fixed.calls[0].role == "regenerate"
    assert fixed.conversation[:-1] == requests[3]
    assert [c.role for a in (diag, more, new) for c in a.calls] == ["diagnose", "revise", "revise"]


def test_zero_shot_repair_continues_the_generation_exchange():
    spec = small_spec()
    with FakeOpenAIServer([Reply.text(GOOD), Reply.text(GOOD)]) as server:
        analyst = OpenAIAnalyst(config_for(server), sleep=lambda s: None)
        first = analyst.generate(spec)
        again = analyst.generate(spec, failed_program=first.program, error="ContractError: x",
                                 context=first.conversation)
        requests = [r.messages for r in server.chat_requests]
    assert [m["role"] for m in first.conversation] == ["system", "user", "assistant"]
    assert requests[1][:-1] == first.conversation
    assert "ContractError: x" in requests[1][-1]["content"]
    assert again.conversation[:-1] == requests[1]


def test_repairs_and_revisions_without_context_start_fresh():
    spec = small_spec()
    script = [Reply.text(GOOD), Reply.text(GOOD), Reply.text("DECISION: stop\nFine.")]
    with FakeOpenAIServer(script) as server:
        analyst = OpenAIAnalyst(config_for(server), sleep=lambda s: None)
        analyst.generate(spec, failed_program="class ToyPolicy: pass", error="ContractError")
        # A context whose last answer does not hold the failed program gets it quoted.
        other = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
                 {"role": "assistant", "content": "no program here"}]
        analyst.generate(spec, failed_program="class ToyPolicy: pass", error="E", context=other)
        stop = analyst.revise(spec, PROGRAM, "[no diagnostics] the answer had no code")
        requests = [r.messages for r in server.chat_requests]
    fresh = requests[0]
    assert [m["role"] for m in fresh] == ["system", "user"]
    assert "class ToyPolicy: pass" in fresh[1]["content"] and "ContractError" in fresh[1]["content"]
    assert spec.describe() in fresh[1]["content"]
    assert requests[1][:3] == other and "class ToyPolicy: pass" in requests[1][-1]["content"]
    revision = requests[2]
    assert [m["role"] for m in revision] == ["system", "user"]
    text = revision[1]["content"]
    assert spec.describe() in text and "k_pos" in text and "[no diagnostics]" in text
    assert "statement you wrote" not in text  # there is no statement to compare with
    assert stop.kind == "stop" and stop.conversation[-1]["content"].startswith("DECISION: stop")


@pytest.mark.parametrize("bad", [
    [{"role": "wizard", "content": "x"}, "not a message", {"role": "user", "content": 5}],
    "a string", None, [], [{"role": "assistant", "content": "no question was asked"}],
])
def test_malformed_conversations_start_a_fresh_exchange(bad):
    spec = small_spec()
    with FakeOpenAIServer([Reply.text("DECISION: stop")]) as server:
        analyst = OpenAIAnalyst(config_for(server), sleep=lambda s: None)
        decision = analyst.revise(spec, PROGRAM, "r", conversation=bad)
        (request,) = server.chat_requests
    assert decision.kind == "stop" and decision.error is None
    assert [m["role"] for m in request.messages] == ["system", "user"]


def test_unusable_revision_keeps_the_whole_exchange_and_is_an_error():
    spec = small_spec()
    with FakeOpenAIServer([Reply.text("hmm"), Reply.text("still thinking")]) as server:
        analyst = OpenAIAnalyst(config_for(server, max_corrections=1), sleep=lambda s: None)
        decision = analyst.revise(spec, PROGRAM, "r")
    assert decision.kind == "stop" and decision.error.startswith("unusable answer after 2")
    roles = [m["role"] for m in decision.conversation]
    assert roles == ["system", "user", "assistant", "user", "assistant"]
    assert decision.conversation[3]["content"].startswith(prompts.CORRECTION_INTRO)
    assert decision.conversation[-1]["content"] == "still thinking"


def test_expert_columns_are_described_only_when_the_table_has_them():
    spec = small_spec()
    without = prompts.diagnostics_messages(spec, PROGRAM, ["x", "v", "mean_push", "act_push"])
    with_expert = prompts.diagnostics_messages(spec, PROGRAM, ["x", "mean_push", "expert_push"])
    assert "expert" not in without[-1]["content"].lower()
    assert "expert_<action>" in with_expert[-1]["content"]
    # Same inputs, same bytes: replay depends on it.
    assert without == prompts.diagnostics_messages(spec, PROGRAM, ["x", "v", "mean_push",
                                                                   "act_push"])


def test_fake_server_can_answer_by_role():
    spec = small_spec()
    responder = by_role({
        "revise": [Reply.text("DECISION: stop")],
        "diagnose": [Reply.text("nothing"), Reply.text(f"```python\n{TESTS}```")],
        "regenerate": [Reply.text(GOOD)],
    })
    with FakeOpenAIServer(responder=responder) as server:
        analyst = OpenAIAnalyst(config_for(server), sleep=lambda s: None)
        assert analyst.revise(spec, PROGRAM, "ok").kind == "stop"
        diag = analyst.diagnose(spec, PROGRAM, ["x"])
        assert diag.ok and len(diag.calls) == 2
        assert analyst.generate(spec, error="boom").ok
        assert "no scripted reply left for generate" in analyst.generate(spec).error
        roles = [(r.role, r.is_correction) for r in server.chat_requests]
    assert roles == [("revise", False), ("diagnose", False), ("diagnose", True),
                     ("regenerate", False), ("generate", False)]


def test_request_settings_are_sent():
    with FakeOpenAIServer([Reply.text(GOOD)]) as server:
        cfg = config_for(server, model="my-model", temperature=0.3, reasoning_effort="low",
                         max_completion_tokens=999)
        answer = OpenAIAnalyst(cfg).generate(small_spec())
        body = server.chat_requests[0].json
    assert body["model"] == "my-model" and body["temperature"] == 0.3
    assert body["reasoning_effort"] == "low" and body["max_completion_tokens"] == 999
    assert answer.calls[0].model == "my-model"


def test_api_key_only_in_the_authorization_header(caplog):
    echo = f"invalid credentials: Bearer {KEY} (key {KEY})"
    script = [Reply.status(500, echo), Reply.status(429, echo),
              Reply.text(f"Your key is {KEY}.\n```python\n{PROGRAM}```"), Reply.status(400, echo)]
    caplog.set_level(logging.DEBUG)
    with FakeOpenAIServer(script) as server:
        cfg = config_for(server)
        analyst = OpenAIAnalyst(cfg, sleep=lambda s: None)
        ok = analyst.generate(small_spec())
        failed = analyst.diagnose(small_spec(), PROGRAM, ["x"])
        requests = server.chat_requests
    assert ok.ok and failed.error and "HTTP 400" in failed.error
    for request in requests:
        assert request.headers["authorization"] == f"Bearer {KEY}"
        assert KEY not in request.raw_body
        others = {k: v for k, v in request.headers.items() if k != "authorization"}
        assert KEY not in json.dumps(others)
    leaks = [json.dumps([dataclasses.asdict(c) for c in ok.calls + failed.calls]),
             ok.reasoning, failed.error, caplog.text, repr(cfg), str(cfg.to_dict()),
             repr(analyst), repr(analyst.backend)]
    for text in leaks:
        assert KEY not in text
        assert KEY[:12] not in text
    assert "[REDACTED]" in failed.error and "[REDACTED]" in ok.reasoning


def test_redaction_patterns():
    from refine_core.analyst.openai_analyst import redact

    assert redact("Authorization: Bearer abc.def-123") == "Authorization: Bearer [REDACTED]"
    assert "sk-live" not in redact("bad key sk-live_0123456789")
    assert redact('{"api_key": "hunter22"}') == '{"api_key": "[REDACTED]"}'
    assert redact("the bearer of news", patterns=False) == "the bearer of news"
    assert redact("my XYZW-secret", ("XYZW-secret",), patterns=False) == "my [REDACTED]"


def test_the_key_does_not_serialise():
    import pickle

    cfg = AnalystConfig(api_key=KEY)
    as_dict = dataclasses.asdict(cfg)
    assert KEY not in repr(as_dict) and KEY not in str(cfg.api_key) and KEY not in f"{cfg}"
    with pytest.raises(TypeError):
        json.dumps(as_dict)
    with pytest.raises(TypeError, match="pickle"):
        pickle.dumps(cfg)
    assert cfg.to_dict()["api_key_set"] is True and "api_key" not in cfg.to_dict()


@pytest.mark.parametrize("body", ["not json", {"choices": []}, {"id": "x"}, [1, 2]])
def test_malformed_response_bodies_become_errors(body):
    with FakeOpenAIServer([Reply(body=body)] * 2) as server:
        analyst = OpenAIAnalyst(config_for(server, max_attempts=2, max_corrections=0),
                                sleep=lambda s: None)
        answer = analyst.generate(small_spec())
    assert answer.program is None and "malformed response" in answer.error


def test_backend_needs_an_endpoint():
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        OpenAIChatBackend(AnalystConfig())


# ------------------------------------------------------------------------ config


def test_config_precedence_flags_over_env_over_file(tmp_path):
    path = tmp_path / "analyst.yaml"
    path.write_text("model: from-file\ntemperature: 0.1\ntimeout_s: 11\nmax_attempts: 7\n")
    env = {"REFINE_MODEL": "from-env", "REFINE_TEMPERATURE": "0.2", "OPENAI_API_KEY": KEY,
           "OPENAI_BASE_URL": "http://localhost:9/v1"}
    cfg = load_config(path, env=env, overrides={"model": "from-flag", "timeout_s": None})
    assert cfg.model == "from-flag"
    assert cfg.temperature == 0.2
    assert (cfg.timeout_s, cfg.max_attempts) == (11.0, 7)
    assert cfg.api_key.reveal() == KEY and cfg.base_url == "http://localhost:9/v1"
    assert load_config(env={}).model == AnalystConfig().model


def test_config_from_cli_flags_and_json_file(tmp_path):
    import argparse

    path = tmp_path / "a.json"
    path.write_text(json.dumps({"analyst": {"model": "m", "api_key_env": "MY_KEY"}}))
    parser = argparse.ArgumentParser()
    add_config_arguments(parser)
    args = parser.parse_args(["--analyst-config", str(path), "--reasoning-effort", "high",
                              "--llm-max-attempts", "2"])
    cfg = config_from_args(args, env={"MY_KEY": KEY, "OPENAI_API_KEY": "other"})
    assert (cfg.model, cfg.reasoning_effort, cfg.max_attempts) == ("m", "high", 2)
    assert cfg.api_key.reveal() == KEY
    assert "--api-key" not in parser.format_help()


@pytest.mark.parametrize(
    "text, match",
    [
        ("api_key: sk-abc\n", "environment"),
        ("modle: x\n", "unknown settings modle"),
        ("timeout_s: soon\n", "timeout_s must be float"),
        ("- a\n- b\n", "mapping"),
        ("model: [\n", "not valid"),
        ("reasoning_effort: extreme\n", "reasoning_effort"),
        ("max_attempts: 0\n", "max_attempts"),
    ],
)
def test_bad_config_files_give_clear_errors(tmp_path, text, match):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=match):
        load_config(path, env={})


def test_bad_env_and_missing_file():
    with pytest.raises(ConfigError, match="REFINE_LLM_TIMEOUT"):
        load_config(env={"REFINE_LLM_TIMEOUT": "forever"})
    with pytest.raises(ConfigError, match="cannot read"):
        load_config("/nonexistent/analyst.yaml", env={})
    with pytest.raises(ConfigError, match="base_url"):
        load_config(env={"OPENAI_BASE_URL": "localhost:8000"})


# ------------------------------------------------------------ the bundled tasks


@pytest.mark.parametrize("task_name", ["car_racing", "door_open"])
def test_bundled_task_prompts_and_answers_load_through_the_contract(task_name):
    """What the parser extracts from a chatty answer is a program the contract accepts."""
    from refine_core.policy.contract import build_policy
    from refine_core.policy.programs import starter_program
    from refine_core.tasks.registry import get_task

    spec = get_task(task_name).spec
    program = starter_program(task_name)
    chatty = (f"Decision: REVISE\n\nThe revised structure:\n\n```py\n{program}\n```\n"
              f"And to check it:\n```python\nprint(df.shape)\n```\nGood luck!")
    with FakeOpenAIServer([Reply.text(chatty)]) as server:
        analyst = OpenAIAnalyst(config_for(server))
        decision = analyst.revise(spec, program, "1")
        prompt = server.chat_requests[0].last_user_message
    assert decision.kind == "program", decision.error
    build_policy(decision.program, spec)
    assert spec.policy_class in prompt
    assert all(f"- {s.name}: shape (B, " in prompt for s in spec.inputs)
    assert all(a.name in prompt for a in spec.actions)
