"""Structured-policy programs: loading, the contract's checks, the action distribution, bundles
and the MLP baseline."""

from refine_core.policy.bundle import BundleFormatError, PolicyBundle
from refine_core.policy.contract import (
    InfoSchema,
    build_policy,
    dummy_batch,
    load_policy_class,
    policy_forward,
    validate_policy,
)
from refine_core.policy.distribution import (
    action_distribution,
    clip_actions,
    log_prob,
    sample_actions,
    to_batch,
)
from refine_core.policy.errors import ContractError, ForbiddenCodeError, InputBatchError
from refine_core.policy.mlp import mlp_program
from refine_core.policy.static_check import check_program_source

__all__ = [
    "BundleFormatError",
    "ContractError",
    "ForbiddenCodeError",
    "InfoSchema",
    "InputBatchError",
    "PolicyBundle",
    "action_distribution",
    "build_policy",
    "check_program_source",
    "clip_actions",
    "dummy_batch",
    "load_policy_class",
    "log_prob",
    "mlp_program",
    "policy_forward",
    "sample_actions",
    "to_batch",
    "validate_policy",
]
