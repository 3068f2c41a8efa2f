"""Paraphrase pools for lesson scenarios (authoring data; nothing here is read by agents).

Every round of a lesson scenario is worded from these pools: sentence frames of different
structure wrap a root cause's runbook signal, a site-specific component (the *marker*) is
mentioned in varied ways, and corrections, fixes and causal hints each have several
phrasings, so that a lesson and its recurrences share few words beyond what matters.
Fields: svc, signal, marker, n, pct, mins, hours, when, who, prev_svc, t_desc, m_desc.
"""

from __future__ import annotations

# Frames that carry one runbook signal (a symptom the runbook attributes to a cause).
SIGNAL_FRAMES = [
    "{svc}: {signal} reported by {n} hosts",
    "On-call noticed {signal} on {svc} {when}",
    "Dashboards for {svc} show {signal}",
    "{n} alerts since {when} mention '{signal}' for {svc}",
    "We keep seeing {signal} in the logs of {svc}",
    "{who} flagged {signal} affecting {svc}",
    "Symptom on {svc}: {signal}, roughly {pct}% of traffic affected",
    "Paged for {svc} because of {signal}",
    "Looks like {signal} again, this time on {svc}",
    "Error tracker groups {n} events on {svc} under {signal}",
]
WHEN = [
    "this morning",
    "an hour ago",
    "overnight",
    "after lunch",
    "at the top of the hour",
    "since midnight",
    "during the evening peak",
    "around 3 am",
]
WHO = [
    "The support lead",
    "A developer on the platform team",
    "The SRE on shift",
    "An automated probe",
    "The database admin",
    "A product manager",
]

# Site-specific components: the telling difference a lesson teaches.
MARKERS = [
    "the envoy sidecar",
    "the legacy auth shim",
    "the feature-flag relay",
    "the audit log forwarder",
    "the geo-routing proxy",
    "the shared cron runner",
    "the metrics scraper agent",
    "the vault token agent",
]
MARKER_FRAMES = [
    "{marker} was redeployed shortly before",
    "Someone mentions that {marker} restarted at about the same time",
    "Coincidentally {marker} rolled to a new build {when}",
    "A restart of {marker} shows up in the event log right before the first alert",
    "The change calendar lists maintenance on {marker} {when}",
    "{marker} was bounced by automation minutes earlier",
]
# The same component explicitly ruled out: the telling difference of a red herring.
MARKER_ABSENT_FRAMES = [
    "{marker} has not been touched in weeks",
    "Nothing changed on {marker}; its last restart was a month ago",
    "{marker} is steady, no restarts for days",
]
# Corrections after a wrong call on a lesson round: name the true cause and reject the runbook's.
LESSON_CORRECTIONS = [
    "Review: it was not {m_desc}; it was {t_desc}, triggered by {marker}",
    "Root cause turned out to be {t_desc}, set off by {marker}, rather than {m_desc}",
    "Postmortem says {t_desc}; {marker} started it. The {m_desc} theory was wrong",
    "Wrong call: {marker} caused {t_desc} here, not {m_desc}",
]
# Corrections that revise a lesson (drift): this time the runbook was right.
DRIFT_CORRECTIONS = [
    "This time it really was {m_desc}; {marker} was fixed last week and is no longer the trigger",
    "Not {t_desc} anymore: {marker} got repaired, and this was plain {m_desc}",
]
FIXES = [
    "Applied the fix on {svc}; the symptoms cleared within minutes",
    "After the remediation {svc} recovered and stayed healthy",
    "The change on {svc} worked; alerts resolved",
    "{svc} back to normal once the fix landed",
]
# Causal hints: the incident traces back to an earlier round's fix (no template names it).
CHAIN_HINTS = [
    "This began soon after yesterday's fix to {prev_svc} went live",
    "Symptoms appeared {hours} hours after the workaround on {prev_svc} was rolled out",
    "The timing lines up with the change made to {prev_svc} earlier this week",
    "Nobody touched {svc} itself; the only recent change was the remediation applied to {prev_svc}",
    "It started the morning after the {prev_svc} mitigation",
    "Since the hotfix shipped for {prev_svc}, {svc} has been misbehaving",
]
