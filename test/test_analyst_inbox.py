"""`refine serve-inbox`: the real `openai` client talks to it; answers come from files."""

from __future__ import annotations

import threading
import time

from refine_core.analyst.config import AnalystConfig
from refine_core.analyst.factory import make_analyst
from refine_core.analyst.inbox import FINGERPRINT, guess_role, request_markdown, serve
from refine_core.loop import RefineConfig, refine
from refine_core.policy.programs import starter_program
from refine_core.store.db import RunDatabase
from refine_core.summary import build_summary
from refine_core.tasks.registry import get_task


def _answerer(folder, stop: threading.Event, seen: list[str]) -> None:
    """Answers each request file the way a person at a chat window would."""
    answers = {
        "generate": "A reach-and-pull controller.\n```python\n" + starter_program("door_open") + "\n```",
        "diagnose": "Task analysis: ... Hypotheses: the gripper reaches the handle.\n```python\n"
                    "print('rows', len(df))\nprint('max dx', round(float(df['act_dx'].abs().max()), 3))\n```",
        "revise": "DECISION: stop\nThe diagnostics show nothing to fix.",
    }
    while not stop.is_set():
        for request in sorted(folder.glob("*.request.md")):
            answer = request.with_name(request.name.replace(".request.md", ".answer.md"))
            if answer.exists():
                continue
            role = request.name.split("-", 1)[1].split(".")[0]  # the server names the question
            seen.append(role)
            answer.write_text(answers[role])
        time.sleep(0.1)


def test_a_run_through_the_inbox_uses_the_answers_written_to_files(tmp_path):
    inbox = tmp_path / "inbox"
    server = serve(inbox, port=0, timeout_s=60, model="helper-model-x")
    stop, seen = threading.Event(), []
    worker = threading.Thread(target=_answerer, args=(inbox, stop, seen), daemon=True)
    worker.start()
    try:
        port = server.server_address[1]
        config = AnalystConfig(model="inbox", base_url=f"http://127.0.0.1:{port}/v1", api_key="unused-key",
                               timeout_s=30)
        db = RunDatabase(tmp_path / "run.db")
        result = refine(get_task("door_open"), make_analyst("openai", config=config), db,
                        RefineConfig(max_rounds=2, diagnostic_episodes=1, selection_episodes=1, eval_episodes=0,
                                     max_steps=15, verbose=False))
    finally:
        stop.set()
        server.shutdown()
    assert seen == ["generate", "diagnose", "revise"]
    (row,) = db.rounds(result.run_id)
    assert row["program"].strip() == starter_program("door_open").strip()
    assert "rows 15" in db.analyses(result.run_id, 0)[0]["stdout"]
    assert row["decision"] == "stop"
    requests = sorted(p.name for p in inbox.glob("*.request.md"))
    assert requests[0].startswith("0001-") and len(requests) == 3
    # who answered is what the inbox says, whatever model the client asked for; the counts are estimates
    calls = db.llm_calls(result.run_id)
    assert {c["model"] for c in calls} == {"helper-model-x"} and {c["endpoint"] for c in calls} == {FINGERPRINT}
    summary = build_summary(db)
    assert summary["analyst"]["models"] == ["helper-model-x"]
    assert summary["analyst"]["token_counts"].startswith("estimated by refine serve-inbox")


def test_requests_read_as_documents():
    text = request_markdown([{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}])
    assert text.startswith("# SYSTEM\n\nbe brief") and "# USER\n\nhi" in text
    assert guess_role([{"role": "user", "content": "... DECISION: revise ..."}]) == "revise"
