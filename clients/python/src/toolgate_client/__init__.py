"""Python client for toolgate, the policy-decision service for AI agents.

>>> from toolgate_client import Client, ToolgateDeny, ToolgateUnavailableError
>>> client = Client("http://127.0.0.1:8000", token="...")
>>> client.enforce(plan_id="p-1", tool={"name": "fs.read"})   # Decision, or raises
"""

from ._version import __version__
from .async_client import AsyncClient
from .client import DEFAULT_BASE_URL, Client
from .errors import (
    CODES,
    PARENTS,
    PlanReadOnlyError,
    ReadOnlyViolationError,
    SkillExecutionError,
    ToolAccessDeniedError,
    ToolActivationError,
    ToolCheckpointRequiredError,
    ToolConfirmationRequiredError,
    ToolCostLimitExceededError,
    ToolDeactivationError,
    ToolExecutionError,
    ToolgateDeny,
    ToolgateError,
    ToolgateRequestError,
    ToolgateUnavailableError,
    ToolHumanApprovalRequiredError,
    ToolNotActivatedError,
    ToolRetryLimitExceededError,
    ToolRuntimeError,
    ToolSafetyViolationError,
    ToolSandboxEscapeError,
    ToolSandboxRequiredError,
    UnsafeRequestRejectedError,
    error_class_for,
    hierarchy_of,
)
from .models import Decision, Deny

__all__ = [
    "__version__",
    "Client",
    "AsyncClient",
    "DEFAULT_BASE_URL",
    "Decision",
    "Deny",
    "CODES",
    "PARENTS",
    "error_class_for",
    "hierarchy_of",
    "ToolgateDeny",
    "ToolRuntimeError",
    "ToolAccessDeniedError",
    "ToolCheckpointRequiredError",
    "ToolSafetyViolationError",
    "ToolSandboxRequiredError",
    "ToolHumanApprovalRequiredError",
    "ToolCostLimitExceededError",
    "ToolRetryLimitExceededError",
    "ToolConfirmationRequiredError",
    "ToolSandboxEscapeError",
    "ToolNotActivatedError",
    "ToolActivationError",
    "ToolExecutionError",
    "ToolDeactivationError",
    "SkillExecutionError",
    "ReadOnlyViolationError",
    "PlanReadOnlyError",
    "UnsafeRequestRejectedError",
    "ToolgateError",
    "ToolgateUnavailableError",
    "ToolgateRequestError",
]
