"""The pure context-assembly core: no Django imports anywhere in this package.

The Django layer fetches bounded candidates, builds :class:`AssemblyInputs` and a
:class:`PackingPolicy`, and calls :func:`assemble` with the policy model's
:class:`~chatplatform.core.tokens.base.TokenCounter`.
"""

from .budget import (
    BudgetPlan,
    PolicyError,
    PolicyIssue,
    check_policy,
    history_fetch_ceiling,
    plan_budget,
    policy_issues,
    validate_policy,
)
from .draft import AssemblyError
from .packing import assemble
from .template import describe_variables, render_template, template_warnings, time_values
from .types import (
    AssembledPrompt,
    AssemblyInputs,
    Excluded,
    FactItem,
    Included,
    MessageItem,
    PackingPolicy,
    RetrievedItem,
    SectionUsage,
    StablePrefix,
    SummaryItem,
    SystemPart,
    Truncation,
)

__all__ = (
    "AssembledPrompt",
    "AssemblyError",
    "AssemblyInputs",
    "BudgetPlan",
    "Excluded",
    "FactItem",
    "Included",
    "MessageItem",
    "PackingPolicy",
    "PolicyError",
    "PolicyIssue",
    "RetrievedItem",
    "SectionUsage",
    "StablePrefix",
    "SummaryItem",
    "SystemPart",
    "Truncation",
    "assemble",
    "check_policy",
    "describe_variables",
    "history_fetch_ceiling",
    "plan_budget",
    "policy_issues",
    "render_template",
    "template_warnings",
    "time_values",
    "validate_policy",
)
