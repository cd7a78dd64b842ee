"""What the loop asks and hears when a candidate is to be kept or reverted, and the policy that
follows the harness's recommendation (`--auto`). The front ends bring their own deciders: the TUI's
(tui/decider.py), stdin's (harness/headless.py); harness.model.dispatch wraps one for per-bucket keeps.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from harness.evaluate.records import Verdict


@dataclass
class DecisionRequest:
    iteration: int
    commit: str
    description: str
    verdict: Verdict
    action: str  # recommended: keep | revert
    reason: str
    can_keep: bool


@dataclass
class DecisionReply:
    action: str  # keep | revert
    by: str = "human"  # human | auto
    reason: str = ""  # a veto reason, fed back to the agent
    confirmed_override: bool = False  # the person confirmed keeping against the recommendation
    buckets: list[str] = field(default_factory=list)  # revert overall, but keep for these buckets


class Decider(Protocol):
    def decide(self, request: DecisionRequest) -> DecisionReply: ...


def veto_reason_of(by: str, reason: str, bucket_kept: bool) -> str:
    """What an agent hears as the person's veto: their own words on a revert. The reason of an automatic
    decision, or of a keep for some buckets ("kept for buckets short, mid only"), is no veto: the
    offline tuner once read its bucket winners as vetoed and stopped searching around them."""
    return reason if by == "human" and not bucket_kept else ""


class AutoDecider:
    """Follows the harness's recommendation (`--auto`)."""

    def decide(self, request: DecisionRequest) -> DecisionReply:
        # A recommendation may name buckets to keep the candidate for (a geomean win that slows a
        # protected shape: harness.evaluate.keep_policy); following it keeps it for those only.
        buckets = request.verdict.keep_buckets
        return DecisionReply(request.action, by="auto", buckets=buckets if request.can_keep else [],
                             reason=f"kept for buckets {', '.join(buckets)} only, as recommended" if buckets else "")
