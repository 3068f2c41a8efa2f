"""Wording of outcome signals when a round does not author its own.

Variants are plain phrasings of "it worked" / "it did not"; which one appears is
seeded. None of them names a root cause.
"""

from __future__ import annotations

CHECK_NAME = "incident-verification"  # name of the structured check in event metadata

SUCCESS_TEXTS = (
    "Metrics back to baseline; incident resolved",
    "Error rate returned to normal within minutes of the change",
    "Alert cleared and stayed clear through the next hour; fix confirmed",
    "Dashboards green again after the change; closing the incident",
    "Verification passed: symptoms gone after the fix was applied",
)
FAILURE_TEXTS = (
    "Errors persist after the change",
    "No improvement after applying the fix",
    "Alert still firing 15 minutes after the change",
    "Symptoms unchanged; the fix did not help",
    "Verification failed: the incident is still ongoing after the change",
)


def generic(success: bool, variant: int) -> str:
    """Returns phrasing number `variant` (modulo the count) for the outcome."""
    texts = SUCCESS_TEXTS if success else FAILURE_TEXTS
    return texts[variant % len(texts)]


def check(success: bool) -> dict[str, str]:
    """A CI-style structured status for an outcome event's metadata."""
    return {"name": CHECK_NAME, "status": "success" if success else "failure"}
