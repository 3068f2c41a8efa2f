"""Paraphrase pools for lesson scenarios (authoring data; nothing here is read by agents).

Every round of a lesson scenario is worded from these pools, so that a lesson and its
recurrences read like the same incident told by different people:

- `COMPONENTS`: the site-specific components a lesson turns on. Each has a short system
  name (what an operator types: ``authshim``, ``geo-proxy``), five descriptions of the same
  thing in different words, and its own ways of saying it was active or changed
  (``changes``) or left alone (``normal``), beside the generic `CHANGE_FRAMES` and
  `NORMAL_FRAMES`;
- `SIGNAL_FRAMES` wrap one runbook signal of a root cause word for word;
  `SIGNAL_PARAPHRASES` say the same symptom without its runbook phrase;
- corrections, drift corrections, fixes and causal hints each have several phrasings.

Fields: svc, signal, c (a reference to a component: its name, a description, or both),
actor, n, pct, pct2, mins, hours, days, month, weekday, when, who, prev_svc, t_desc, m_desc, and
the fill-ins of `simulator.families` templates (dep, ext, host, other, ver, cfgkey, keyset...).
Component wording avoids the runbook vocabulary of every family (signals and descriptions),
so that naming a component never points the runbook at a cause.
"""

from __future__ import annotations

# Frames that carry one runbook signal (a symptom the runbook attributes to a cause) word for word.
SIGNAL_FRAMES = [
    "{svc}: {signal}, according to {n} probe results",
    "On-call noticed {signal} on {svc} {when}",
    "Dashboards for {svc} show {signal}",
    "{n} alerts mentioning '{signal}' fired for {svc}",
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
    "The DBA on duty",
    "A product manager",
]
# Who changes a component (the subject of a change frame).
ACTORS = ["The cluster admins", "Someone on the infra team", "A release pipeline", "The on-call engineer"]
MONTHS = ["January", "February", "March", "April", "May", "June", "September", "October", "November"]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]

# The same symptoms as a family's runbook signals, in other words: each uses a word of the
# family's runbook entry (its description or signals) but never a whole signal phrase, and
# shares at most two words in a row with any of its signals (keyed by family, then by the
# signal they paraphrase).
SIGNAL_PARAPHRASES: dict[str, dict[str, list[str]]] = {
    "connection_pool_exhaustion": {
        "timeout acquiring connection": [
            "Requests on {svc} give up after {ms} ms trying to get a connection",
            "{svc} cannot check out a database connection to {dep} before its deadline passes",
        ],
        "pool exhausted": [
            "Every slot in the {dep} client pool of {svc} is taken",
            "{svc} has no free pooled connections left towards {dep}",
        ],
        "threads blocked waiting for a connection": [
            "Thread dumps of {svc} show request threads parked until a connection frees up",
            "Most worker threads in {svc} sit stuck until the pool hands out a slot",
        ],
    },
    "deployment_config_error": {
        "right after a deploy": [
            "The trouble on {svc} started minutes after the deploy finished",
            "{svc} broke as soon as the latest release landed",
        ],
        "new version": [
            "Only instances of {svc} running version {ver} misbehave",
            "The freshly shipped release {ver} of {svc} is the one failing",
        ],
        "config change": [
            "A configuration tweak to {cfgkey} went out with the last {svc} rollout",
            "Someone edited the {cfgkey} config value for {svc} just beforehand",
        ],
        "migration": [
            "A schema upgrade shipped with the release ran against the {svc} database",
            "The {svc} data model was altered by a script during the release",
        ],
    },
    "memory_leak_gc_pressure": {
        "heap grows without bound": [
            "Memory of {svc} climbs steadily and never comes back down",
            "The {svc} process keeps getting bigger hour after hour",
        ],
        "long GC pauses": [
            "{svc} freezes for seconds at a time while garbage collection runs",
            "The collector on {svc} stops the world for far too long",
        ],
        "OOMKilled restarts": [
            "The kernel keeps killing the {svc} process once its RAM is used up",
            "{svc} pods die with an out-of-memory reason every few hours",
        ],
    },
    "cache_stampede": {
        "cache hit ratio collapse": [
            "Almost every {keyset} lookup on {svc} misses the cache now",
            "The share of requests {svc} answers from cache dropped to almost nothing",
        ],
        "many identical queries": [
            "{dep} receives a flood of identical lookups from {svc}",
            "Hundreds of duplicate lookups for one value reach {dep} at once",
        ],
        "keys expiring together": [
            "A whole batch of {keyset} entries fell out of the cache at the same instant",
            "All the {keyset} keys share one TTL and lapsed simultaneously",
        ],
    },
    "dns_resolution_failure": {
        "name resolution errors": [
            "{svc} cannot turn the {dep} hostname into an address",
            "Lookups of {dep}.internal from {svc} return stale or no records",
        ],
        "SERVFAIL": [
            "The cluster name servers answer {svc} with a server failure code",
            "Resolver replies to {svc} carry an error status instead of records",
        ],
        "works by IP, fails by hostname": [
            "Hitting {dep} on its raw address from {svc} works; using its DNS entry does not",
            "A curl to the numeric address of {dep} succeeds while the hostname lookup breaks",
        ],
    },
    "tls_certificate_expiry": {
        "certificate expired": [
            "The certificate presented by {ext} is past its validity date",
            "{ext} still serves a cert that expired yesterday",
        ],
        "handshake failure": [
            "{svc} cannot complete the TLS negotiation with {ext}",
            "Secure sessions from {svc} to {ext} abort during the handshake",
        ],
        "x509 errors": [
            "{svc} rejects the TLS chain offered by {ext} as untrusted",
            "Client output of {svc} complains the peer certificate cannot be verified",
        ],
    },
    "clock_skew": {
        "clock offset": [
            "The system clock on {host} is off by {n} ms",
            "{host} has drifted a few seconds ahead of everyone else",
        ],
        "token not yet valid": [
            "Auth on {svc} refuses fresh tokens because their issue time lies ahead of its own",
            "Freshly minted credentials look future-dated to {svc}; signature checks reject them",
        ],
        "only one host affected": [
            "Every failing request to {svc} was served by the same host, {host}",
            "The other replicas of {svc} are fine; just the host {host} errors",
        ],
    },
    "disk_full": {
        "no space left on device": [
            "The data volume under {svc} has run out of room",
            "{svc} gets ENOSPC whenever it writes temp files",
        ],
        "writes fail, reads work": [
            "{svc} still serves reads but every save errors out",
            "Writes from {svc} error out while lookups succeed",
        ],
        "volume at 100%": [
            "The {svc} data mount on {host} filled up completely",
            "The {svc} volume shows zero free bytes",
        ],
    },
    "noisy_neighbour": {
        "CPU steal": [
            "The hypervisor is taking CPU cycles away from the VM of {svc}",
            "The host under {svc} reports lots of stolen processor time",
        ],
        "co-located workload": [
            "{other} landed on the same host as {svc}",
            "{svc} shares its node with another workload, {other}",
        ],
        "throttling while own usage is flat": [
            "{svc} gets throttled by the scheduler even though its load has not changed",
            "The kernel limits the CPU of {svc} although its usage is steady",
        ],
    },
    "upstream_rate_limiting": {
        "HTTP 429": [
            "{ext} throttles {svc}, answering 429 Too Many Requests",
            "Calls from {svc} are throttled by the upstream {ext}",
        ],
        "Retry-After": [
            "Responses of {ext} tell {svc} to retry in {mins} seconds",
            "Replies from the upstream carry a back-off header",
        ],
        "quota exhausted": [
            "{svc} has used up its quota at {ext}",
            "The {ext} account for {svc} is over its quota for the day",
        ],
    },
}

# Site-specific components: what tells a lesson's cause apart from its mimic. A lesson names
# one by a description and its system name; its recurrences by the name or another description.
COMPONENTS: list[dict] = [
    {
        "name": "authshim",
        "descriptions": [
            "the legacy auth shim",
            "the old login adapter in front of the SSO backend",
            "the compatibility layer for single sign-on sessions",
            "the sign-in bridge kept around for the old mobile app",
            "the thin wrapper that translates legacy login calls",
        ],
        "changes": [
            "{c} reloaded its session settings {when}",
            "{c} was switched over to another sign-on backend minutes before",
        ],
        "normal": ["Login traffic through {c} looks like any other day"],
    },
    {
        "name": "geo-proxy",
        "descriptions": [
            "the geo-routing proxy",
            "the box that steers users to the nearest region",
            "the location-aware front proxy",
            "the edge router that picks a datacenter per country",
            "the traffic steering layer at the edge",
        ],
        "changes": [
            "{c} reshuffled its region weights {when}",
            "{c} picked up new routing rules minutes earlier",
        ],
        "normal": ["Routing rules in {c} are unchanged since {month}"],
    },
    {
        "name": "cron-runner-2",
        "descriptions": [
            "the shared cron runner",
            "the scheduler box that runs every team's periodic jobs",
            "the batch launcher the teams share",
            "the machine that fires the timed maintenance scripts",
            "the common scheduled-task executor",
        ],
        "changes": [
            "{c} kicked off its nightly batch just before",
            "The hourly jobs on {c} fired moments before the symptoms",
        ],
        "normal": ["{c} ran nothing anywhere near the incident window"],
    },
    {
        "name": "flagrelay",
        "descriptions": [
            "the feature-flag relay",
            "the component that pushes toggle updates to the apps",
            "the switchboard for feature toggles",
            "the rollout-switch distributor",
            "the experiment settings fan-out",
        ],
        "changes": [
            "{c} pushed a round of toggle updates minutes earlier",
            "A burst of flag flips went out through {c} {when}",
        ],
        "normal": ["No flag flips have gone through {c} since {weekday}"],
    },
    {
        "name": "auditfwd",
        "descriptions": [
            "the audit trail forwarder",
            "the compliance event exporter",
            "the agent that copies access entries to the archive",
            "the security-event pipeline",
            "the daemon streaming audit events off the machines",
        ],
        "changes": [
            "{c} replayed its backlog of audit events {when}",
            "The security team upgraded {c} shortly before",
        ],
        "normal": ["{c} has a backlog of zero and a quiet week behind it"],
    },
    {
        "name": "meshproxy",
        "descriptions": [
            "the envoy sidecar",
            "the mesh proxy next to each pod",
            "the mesh data-plane container",
            "the per-pod traffic interceptor",
            "the sidecar that wraps pod-to-pod traffic",
        ],
        "changes": [
            "{c} got re-injected into every pod {when}",
            "{c} was rolled across the fleet minutes earlier",
        ],
        "normal": ["Mesh dashboards show {c} idle and unchanged"],
    },
    {
        "name": "statsagent",
        "descriptions": [
            "the metrics scraper agent",
            "the agent that polls every endpoint for stats",
            "the monitoring daemon on each node",
            "the telemetry poller",
            "the exporter feeding the dashboards",
        ],
        "changes": [
            "{c} began polling at twice its usual rate {when}",
            "{c} was bounced to pick up new scrape targets",
        ],
        "normal": ["{c} scrapes at its usual interval, nothing new"],
    },
    {
        "name": "vaultagent",
        "descriptions": [
            "the secrets agent",
            "the sidecar that fetches credentials from vault",
            "the credential refresher",
            "the daemon that renews app passwords",
            "the vault helper on each box",
        ],
        "changes": [
            "{c} rotated the secrets it hands out {when}",
            "{c} renewed the credentials of every app minutes before",
        ],
        "normal": ["{c} last rotated anything {days} days ago"],
    },
]

# A component was active or changed shortly before the incident (each a different sentence structure).
CHANGE_FRAMES = [
    "{c} was taken down and brought back up {when}",
    "Automation bounced {c} {mins} minutes before the first page",
    "A fresh build of {c} went out shortly before the alerts began",
    "{actor} redeployed {c} earlier in the day",
    "{c} flapped a few times, its health probe going red and green",
    "According to the maintenance calendar, {c} had a maintenance slot {when}",
    "Moments before this started, {c} came back from a reboot",
    "The event stream shows {c} being recycled as the trouble began",
    "{c} was moved to a different image a little earlier",
    "Just ahead of the symptoms, {c} was reinstalled from scratch",
    "There was a brief outage of {c} about {mins} minutes earlier",
]
# A component checked and found normal or untouched: in plain rounds and red herrings.
NORMAL_FRAMES = [
    "Checked {c}: healthy, last reboot {days} days ago",
    "{c} has been running the same build since {month}",
    "Backlog of {c} at 0, nothing unusual there",
    "Nobody has touched {c} in weeks",
    "{c} ruled out: no reboots, no rollouts, graphs unremarkable",
    "{who} looked at {c}; untouched since last month",
    "Nothing on the maintenance calendar for {c} this week",
    "{c} is steady, up for {days} days without a blip",
    "As for {c}: same image, no bounces, all quiet",
    "Nobody has done anything to {c}; its last maintenance was on {weekday}",
]
# Corrections after a wrong call on a lesson round: name the true cause and reject the runbook's.
# t_desc and m_desc are the causes' descriptions (clauses), c the component.
LESSON_CORRECTIONS = [
    "Review: the runbook's reading ({m_desc}) was wrong. What happened: {t_desc}, set off by the activity on {c}",
    "Root cause: {t_desc}. It was triggered when {c} was touched; the runbook's guess ({m_desc}) did not apply",
    "Postmortem: whenever {c} is bounced or redeployed here, this follows: {t_desc}. Not {m_desc}",
    "Wrong call. The change to {c} set this off ({t_desc}); it was not {m_desc}",
    "At this site a restart of {c} brings this on: {t_desc}. The runbook's cause ({m_desc}) was not it",
    "The real trigger was {c}. Mechanism: {t_desc}; the runbook pointed elsewhere ({m_desc})",
]
# Corrections that revise a lesson (drift): this time the runbook was right.
DRIFT_CORRECTIONS = [
    "This time the runbook was right: {m_desc}. Since its fix last week, {c} no longer sets this off",
    "Not the old site quirk anymore ({t_desc}): {c} got repaired, and the runbook's cause held: {m_desc}",
    "Since {c} was patched, its activity no longer leads to {t_desc}; this one was {m_desc}",
    "Revised: after the repair of {c}, these symptoms mean what the runbook says again ({m_desc}), not {t_desc}",
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
