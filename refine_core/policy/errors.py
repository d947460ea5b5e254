"""Typed failures of the structured-policy contract.

Each rule of the contract (METHOD.md) has its own exception type so that callers can react per
rule (the loop sends the message back to the analyst; the CLI prints it in one line) and tests
can assert exactly which rule a program broke. Every message names the rule, and where it
applies the key, the expected shape and the shape found, so the program author can fix it.
"""

from __future__ import annotations


class ContractError(Exception):
    """A program does not follow the structured-policy contract.

    `rule` is a short stable id (e.g. ``"action_shape"``) that survives message rewording and is
    what the database and the analyst prompts record.
    """

    rule: str = "contract"

    def __init__(self, message: str) -> None:
        super().__init__(f"[{self.rule}] {message}")
        self.detail = message


class ProgramSyntaxError(ContractError):
    """The source does not compile; `lineno` points at the offending line (1-based)."""

    rule = "syntax"

    def __init__(self, message: str, lineno: int | None = None) -> None:
        where = f"line {lineno}: " if lineno is not None else ""
        super().__init__(f"{where}{message}")
        self.lineno = lineno


class ProgramImportError(ContractError):
    """Running the module body raised (e.g. an import that fails or a top-level error)."""

    rule = "module_exec"


class MissingClassError(ContractError):
    """The expected policy class is absent and no single nn.Module subclass can stand in."""

    rule = "missing_class"

    def __init__(self, message: str, found: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.found = found


class ConstructionError(ContractError):
    """The class cannot be constructed without arguments, or its constructor raised."""

    rule = "construction"


class NoParametersError(ContractError):
    """The module has no trainable nn.Parameter, so imitation learning has nothing to fit."""

    rule = "no_parameters"


class ForwardError(ContractError):
    """`forward` raised on a valid dummy batch; the message carries the traceback tail."""

    rule = "forward"


class OutputStructureError(ContractError):
    """`forward` did not return a triple (action_mean, scale_tril, info dict)."""

    rule = "output_structure"


class ActionShapeError(ContractError):
    """`action_mean` is not a float tensor of shape (B, A)."""

    rule = "action_shape"


class ScaleTrilShapeError(ContractError):
    """`scale_tril` is not a float tensor of shape (B, A, A)."""

    rule = "scale_tril_shape"


class ScaleTrilNotLowerTriangularError(ContractError):
    """`scale_tril` has non-zero entries above the diagonal."""

    rule = "scale_tril_lower"


class ScaleTrilDiagonalError(ContractError):
    """`scale_tril` has a zero or negative diagonal entry (not a valid Cholesky factor)."""

    rule = "scale_tril_diagonal"


class NonFiniteOutputError(ContractError):
    """An output (action_mean, scale_tril or an info value) holds NaN or infinity."""

    rule = "non_finite"


class InfoKeyError(ContractError):
    """An info key is not `weight_<name>`/`latent_<name>` with name in [a-z0-9_]+, or its value
    is not a tensor."""

    rule = "info_key"


class InfoShapeError(ContractError):
    """An info value has the wrong shape: (1,) for `weight_*`, (B,) for `latent_*`."""

    rule = "info_shape"


class ForbiddenCodeError(ContractError):
    """The static check refused the program before it was ever executed."""

    rule = "forbidden_code"

    def __init__(self, reason: str, lineno: int | None = None) -> None:
        where = f"line {lineno}: " if lineno is not None else ""
        super().__init__(f"{where}{reason}")
        self.lineno = lineno
        self.reason = reason


class WeightsMismatchError(ContractError):
    """Stored weights do not match the parameters/buffers the program declares."""

    rule = "weights_mismatch"


class InputBatchError(ValueError):
    """Caller-side data (a demonstration, an observation) does not match the task's input schema.

    Not a `ContractError`: the program is not at fault, the data handed to it is.
    """
