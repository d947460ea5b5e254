"""Our Adam must move weights exactly as torch's does, and a fit must not load torch's compiler.

Exactness matters beyond taste: recorded LLM runs replay their fits and compare the numbers,
and a program's coefficients are read by people; a last-bit difference would make an old run
disagree with itself.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from refine_core.learn.adam import Adam


def _model(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 3))


def _train(model, optimiser, steps: int, seed: int, skip_last_layer_every: int = 0) -> None:
    gen = torch.Generator().manual_seed(seed)
    for step in range(steps):
        x = torch.randn(16, 5, generator=gen)
        y = torch.randn(16, 3, generator=gen)
        optimiser.zero_grad()
        if skip_last_layer_every and step % skip_last_layer_every == 0:
            loss = model[0](x).pow(2).mean()  # the last layer gets no gradient on this step
        else:
            loss = (model(x) - y).pow(2).mean()
        loss.backward()
        optimiser.step()


@pytest.mark.parametrize("weight_decay", [0.0, 1e-3])
@pytest.mark.parametrize("skip", [0, 3])
def test_every_weight_is_bit_identical_to_torch_adam(weight_decay, skip):
    ours, theirs = _model(0), _model(0)
    _train(ours, Adam(ours.parameters(), lr=0.05, weight_decay=weight_decay), 200, 1, skip)
    _train(theirs, torch.optim.Adam(theirs.parameters(), lr=0.05, weight_decay=weight_decay), 200, 1, skip)
    for (name, a), (_, b) in zip(ours.named_parameters(), theirs.named_parameters(), strict=True):
        assert torch.equal(a, b), f"{name} differs by {float((a - b).abs().max())}"
    assert not torch.equal(ours[0].weight, _model(0)[0].weight)  # the training did move them


def test_groups_keep_their_own_learning_rates_like_torch():
    ours, theirs = _model(2), _model(2)
    _train(ours, Adam([(list(ours[0].parameters()), 0.01), (list(ours[2].parameters()), 0.2)], lr=0.5), 50, 3)
    _train(theirs, torch.optim.Adam([{"params": list(theirs[0].parameters()), "lr": 0.01},
                                     {"params": list(theirs[2].parameters()), "lr": 0.2}], lr=0.5), 50, 3)
    for a, b in zip(ours.parameters(), theirs.parameters(), strict=True):
        assert torch.equal(a, b)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="empty"):
        Adam([], lr=0.1)
    with pytest.raises(ValueError, match="learning rate"):
        Adam([torch.nn.Parameter(torch.zeros(2))], lr=float("nan"))


def test_a_fit_never_imports_the_compiler_stack():
    """torch.optim's first call imports torch._dynamo (1.2 s of CPU); every sandboxed fit is a
    new process, so this would come back on every program if an optimiser from torch.optim
    crept back into the fit."""
    script = (
        "import sys\n"
        "from refine_core.learn.il import ILConfig, fit_il\n"
        "from refine_core.policy.contract import build_policy\n"
        "from refine_core.policy.programs import starter_program\n"
        "from refine_core.rollout.demo import record_demonstration\n"
        "from refine_core.tasks.registry import get_task\n"
        "task = get_task('car_racing')\n"
        "demo = record_demonstration(task, max_steps=60)\n"
        "policy = build_policy(starter_program('car_racing'), task.spec)\n"
        "fit = fit_il(policy, demo.inputs, demo.actions, ILConfig(max_epochs=3, progress=False), spec=task.spec)\n"
        "assert fit.epochs == 3, fit.epochs\n"
        "print(sorted(m for m in sys.modules if m.startswith('torch._dynamo')))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout[-500:]
