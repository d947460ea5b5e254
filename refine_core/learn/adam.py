"""Adam, written out: the same arithmetic as `torch.optim.Adam` on the CPU, without its import.

Why not torch's own: `torch.optim.Optimizer` wraps `add_param_group` (which its constructor
calls), `zero_grad`, `state_dict` and `load_state_dict` so that the first call imports
`torch._dynamo`, the compiler stack: 1.2 s of CPU, paid again by every sandboxed fit, since each
is a new process. Side by side on this machine (2 cores), a sandboxed 200-epoch fit
of a bundled starter program took 4.6 s of CPU with torch's optimiser and 3.5 s with this one
(the door; the car 4.4 and 3.25 s). Nothing here compiles anything.

The update is torch's single-tensor path op for op (the path it takes for CPU tensors), so
the weights are bit-identical to a fit made with `torch.optim.Adam`; recorded runs replay to
the same numbers, and `test_adam.py` holds the two side by side. Only what our fits use is
here: L2 weight decay added to the gradient, no amsgrad, no maximize, no complex parameters.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch


class Adam:
    """Adam over parameter groups, each with its own learning rate.

    `params` is either parameters (one group at `lr`) or (parameters, lr) pairs. As in torch,
    a parameter whose gradient is None on a step is left alone, moments and step count too.
    """

    def __init__(self, params: Iterable[torch.Tensor] | Sequence[tuple[Iterable[torch.Tensor], float]],
                 lr: float, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0) -> None:
        items = list(params)
        if items and isinstance(items[0], tuple):
            self.groups = [(list(ps), float(group_lr)) for ps, group_lr in items]
        else:
            self.groups = [(items, float(lr))]
        if not any(ps for ps, _ in self.groups):
            raise ValueError("Adam got an empty parameter list")
        for _, group_lr in self.groups:
            if not group_lr >= 0.0:
                raise ValueError(f"invalid learning rate {group_lr!r}")
        self.beta1, self.beta2 = (float(b) for b in betas)
        self.eps = float(eps)
        self.weight_decay = float(weight_decay)
        self._state: dict[int, tuple[torch.Tensor, torch.Tensor, list[float]]] = {}

    def zero_grad(self) -> None:
        """Drop the gradients (torch's default, `set_to_none=True`): a parameter the next loss
        does not reach then keeps a None gradient and `step` skips it."""
        for params, _ in self.groups:
            for p in params:
                p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        beta1, beta2 = self.beta1, self.beta2
        for params, lr in self.groups:
            for p in params:
                if p.grad is None:
                    continue
                if id(p) not in self._state:
                    self._state[id(p)] = (torch.zeros_like(p, memory_format=torch.preserve_format),
                                          torch.zeros_like(p, memory_format=torch.preserve_format), [0.0])
                exp_avg, exp_avg_sq, steps = self._state[id(p)]
                steps[0] += 1.0  # torch's float32 step counter is exact far beyond any fit's length
                step = steps[0]
                grad = p.grad
                if self.weight_decay != 0:
                    grad = grad.add(p, alpha=self.weight_decay)
                exp_avg.lerp_(grad, 1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                step_size = lr / (1 - beta1**step)
                denom = (exp_avg_sq.sqrt() / (1 - beta2**step) ** 0.5).add_(self.eps)
                p.addcdiv_(exp_avg, denom, value=-step_size)
