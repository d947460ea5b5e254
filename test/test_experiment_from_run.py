"""`refine experiment --from-run`: the rows of a committed language-model run."""

import json

import pytest

from refine_core.cli import main


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_the_comparison_takes_its_structured_rows_from_a_committed_llm_run(tmp_path):
    """--from-run: the run's zero-shot and best programs get rows labelled with the run and its
    model, the offline catalogue keeps its own rows, and --best-checkpoint adds twins of the RL
    rows whose selection resets are counted."""
    from fake_openai_server import FakeOpenAIServer, Reply, by_role

    from refine_core.analyst.config import AnalystConfig
    from refine_core.analyst.factory import make_analyst
    from refine_core.analyst.offline.catalogue import render
    from refine_core.loop import RefineConfig, refine
    from refine_core.policy.programs import starter_program
    from refine_core.store.db import RunDatabase
    from refine_core.summary import write_summary
    from refine_core.tasks.registry import get_task

    def fenced(code):
        return f"```python\n{code}\n```"

    replies = by_role({
        "generate": [Reply.text(fenced(starter_program("car_racing")))],
        "diagnose": [Reply.text(fenced("print('rows', len(df))"))] * 2,
        "revise": [Reply.text("DECISION: revise\nSlow down in bends.\n" + fenced(render("car_racing", ["car_corner_speed"]))),
                   Reply.text("DECISION: stop\nDone.")],
    })
    run = tmp_path / "results" / "llm" / "car_racing" / "run1"
    with FakeOpenAIServer(responder=replies, model="fake-model-7") as server:
        config = AnalystConfig(model="fake-model-7", base_url=server.base_url, api_key="k", timeout_s=10)
        analyst = make_analyst("openai", config=config, transcript=run / "transcript.jsonl")
        db = RunDatabase(tmp_path / "llm.db")
        refine(get_task("car_racing"), analyst, db, RefineConfig(max_rounds=3, selection_episodes=1, eval_episodes=1,
                                                                 max_steps=40, verbose=False))
        write_summary(db, run)
    recorded = json.loads((run / "summary.json").read_text())
    assert recorded["rounds"][1]["decision"] == "stop"

    out = tmp_path / "results"
    assert main(["experiment", "--task", "car_racing", "--smoke", "--out", str(out), "--date", "t", "--workers", "2",
                 "--from-run", str(run), "--best-checkpoint"]) == 0
    folder = out / "car_racing" / "t"
    table = (folder / "table.md").read_text()
    cells = [[c.strip() for c in line.strip().strip("|").split("|")] for line in table.splitlines()
             if line.startswith("| ") and not line.startswith("| condition")]
    rows = {c[0]: c for c in cells}
    llm = "zero-shot structure [LLM run car_racing/run1] + IL"
    assert rows[llm][1] == "LLM fake-model-7" and rows[llm][2] == "1" and rows[llm][3] == "0"
    refined = rows["refined structure [LLM run car_racing/run1] + IL"]
    assert refined[2] == str(recorded["totals"]["calls"]) and refined[3] == str(recorded["totals"]["resets"]["diagnostic"])
    assert refined[4] == str(recorded["totals"]["resets"]["selection"]) and refined[-2] == "882.0 ± 29.3"
    assert "refined structure [offline catalogue] + IL" in rows, "the offline catalogue keeps rows of its own"
    final = rows["refined structure [LLM run car_racing/run1] + RL, 2 more resets [RL: published settings]"]
    best = rows["refined structure [LLM run car_racing/run1] + RL, 2 more resets [RL: published settings], "
                "best checkpoint"]
    ours = rows["refined structure [LLM run car_racing/run1] + RL, 2 more resets [RL: ours]"]
    assert final[-3].startswith("final") and best[-3].startswith("best on the selection seeds")
    assert ours[-3].startswith("accepted: ") and ours[-2] == "-", "our rows stand beside no published figure"
    assert int(best[4].replace(",", "")) > int(final[4].replace(",", "")), "the best rule's selection resets are counted"
    assert int(ours[4].replace(",", "")) > int(final[4].replace(",", "")), "so are the acceptance rule's"
    assert best[-2] == "-", "published figures stand beside the published rule only"
    assert "fake-model-7 (the published runs used GPT-5-mini)" in table and "task description" in table
    assert "best checkpoint by the mean action on 2 selection seeds" in table
    assert (folder / "program_llm_refined.py").read_text() == recorded["programs"][
        recorded["rounds"][recorded["best_round"]]["program_sha256"]]
