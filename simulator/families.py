"""Data tables for the scenario generator: root-cause families and their wording.

This module is scenario *authoring* data (the generator writes scenario files from it);
nothing here is read by agents or memory. Templates use ``str.format`` fields filled by
``generate.values``: svc, dep, ext, host, other, region, ver, oldver, cfgkey, keyset,
pct, pct2, ms, ms_lo, n, small, mins, hours, gb, alert.

Each family has:
    description, signals: its root-cause entry in the scenario;
    surface: symptoms that *look* like the family but do not prove it;
    tells: symptoms that distinguish it from the others;
    fix: what worked (on_success text);
    correction: what the post-incident review says after a wrong call.
"""

from __future__ import annotations

FAMILIES: dict[str, dict] = {
    "connection_pool_exhaustion": {
        "description": "A client-side connection pool is exhausted; requests queue waiting for a connection",
        "signals": ["timeout acquiring connection", "pool exhausted", "threads blocked waiting for a connection"],
        "surface": [
            "Request threads on {svc} pile up; {n} requests queued at the peak",
            "p99 latency of {svc} climbed from {ms_lo} ms to {ms} ms as traffic rose",
            "{svc} returns 503 for {pct}% of requests during the lunchtime peak",
        ],
        "tells": [
            "{svc} logs 'Timeout waiting for idle object' from the {dep} client {n} times in 5 minutes",
            "HikariPool-1 on {svc}: 'Connection is not available, request timed out after 30000ms'",
            (
                "Active connections from {svc} to {dep} pinned at the configured maximum of {small} while {dep} CPU is "
                "at {pct2}%"
            ),
        ],
        "fix": "Raised the {dep} pool on {svc} from {small} to {n_pool} connections; queueing stopped within minutes",
        "correction": (
            "Post-incident review: {svc} ran out of pooled connections to {dep}; more pool, not a rollback, fixed it"
        ),
    },
    "deployment_config_error": {
        "description": "A release shipped a wrong configuration value, migration or dependency version",
        "signals": ["right after a deploy", "new version", "config change", "migration"],
        "surface": [
            "5xx rate on {svc} jumped from 0.1% to {pct}% within a few minutes",
            "Some requests to {svc} fail with 500 while identical retries succeed",
            "Error budget burn alert '{alert}' fired for {svc}",
        ],
        "tells": [
            "Errors began {mins} minutes after release {ver} of {svc} finished rolling out; traffic was flat",
            "Pods of {svc} still on {oldver} serve requests without errors; pods on {ver} fail",
            "The config diff in {ver} changes {cfgkey} for {svc}",
        ],
        "fix": "Rolled {svc} back to {oldver} and fixed {cfgkey}; errors stopped immediately",
        "correction": (
            "Post-incident review: release {ver} of {svc} shipped a bad value for {cfgkey}; rolling back fixed it"
        ),
    },
    "memory_leak_gc_pressure": {
        "description": (
            "Memory retained by the process grows until garbage collection dominates or the process is killed"
        ),
        "signals": ["heap grows without bound", "long GC pauses", "OOMKilled restarts"],
        "surface": [
            "Latency of {svc} degrades slowly over {hours} hours, then recovers after a restart",
            "Intermittent timeouts on {svc}, worse on the oldest pods",
            "CPU on {svc} at {pct2}% although request volume is normal",
        ],
        "tells": [
            "Heap of {svc} grows about {n} MB per hour and does not come back down after full GC",
            "GC pauses of {svc} take {pct}% of wall-clock time; old generation 97% full after collection",
            "{svc} pods restarted with reason OOMKilled every {hours} hours",
        ],
        "fix": "Fixed the unbounded listener registry in {svc}; heap flat over the next day",
        "correction": "Post-incident review: {svc} leaked memory until GC pauses stalled requests",
    },
    "cache_stampede": {
        "description": "Many requests miss the cache at once and all recompute or refetch the same value",
        "signals": ["cache hit ratio collapse", "many identical queries", "keys expiring together"],
        "surface": [
            "CPU on {dep} spiked to {pct2}% for about {mins} minutes",
            "p95 latency of {svc} doubled at the top of the hour",
            "Connection count to {dep} briefly tripled",
        ],
        "tells": [
            "Cache hit ratio on {svc} fell from 96% to {pct}% right when the {keyset} keys expired",
            "{n} identical queries for the same {keyset} key reached {dep} within one second",
            "Misses on {svc} spike every time the {keyset} entries expire together (same TTL)",
        ],
        "fix": "Added request coalescing and jittered TTLs for {keyset} on {svc}; no spike at the next expiry",
        "correction": (
            "Post-incident review: the {keyset} cache entries expired together and every request recomputed them"
        ),
    },
    "dns_resolution_failure": {
        "description": "Name resolution fails or returns stale records, so clients cannot reach a dependency",
        "signals": ["name resolution errors", "SERVFAIL", "works by IP, fails by hostname"],
        "surface": [
            "{svc} cannot reach {dep}; connection errors at {pct}% of calls",
            "Outbound calls from {svc} hang for {ms} ms before failing",
            "Health checks from {svc} to {dep} flap",
        ],
        "tells": [
            "'Temporary failure in name resolution' for {dep}.internal in {svc} logs",
            "The cluster DNS pods answer SERVFAIL for {pct}% of queries",
            "Calling {dep} by IP address from a {svc} pod works; by hostname it fails",
        ],
        "fix": "Scaled the cluster DNS and fixed the resolver config on {svc}; lookups normal again",
        "correction": "Post-incident review: {svc} could not resolve {dep}; it was DNS, {dep} itself was healthy",
    },
    "tls_certificate_expiry": {
        "description": "A TLS certificate in the call path expired or does not match, so handshakes fail",
        "signals": ["certificate expired", "handshake failure", "x509 errors"],
        "surface": [
            "All calls from {svc} to {ext} started failing at exactly 00:00 UTC",
            "{svc} reports connection resets from {ext}",
            "Error rate of {svc} went from 0 to {pct}% in one minute",
        ],
        "tells": [
            "'x509: certificate has expired or is not yet valid' in {svc} client logs",
            "The certificate served by {ext} shows notAfter yesterday",
            "Clients that skip verification reach {ext}; verifying clients fail the handshake",
        ],
        "fix": "Renewed the certificate for {ext} and added an expiry alert; handshakes succeed",
        "correction": "Post-incident review: the certificate on {ext} had expired; nothing else was wrong",
    },
    "clock_skew": {
        "description": "A host's clock drifted, breaking time-dependent checks (tokens, signatures, leases)",
        "signals": ["clock offset", "token not yet valid", "only one host affected"],
        "surface": [
            "{pct}% of requests to {svc} rejected with 401",
            "Intermittent authentication failures on {svc}, not reproducible locally",
            "Lease renewals on {svc} occasionally rejected",
        ],
        "tells": [
            "NTP offset on {host} is {n} ms and growing; the time sync daemon is not running",
            "JWT validation on {host} fails with 'token used before issued'",
            "Only requests served by {host} fail; the other {small} hosts are fine",
        ],
        "fix": "Restarted time sync on {host} and alerted on clock offset; auth failures stopped",
        "correction": "Post-incident review: the clock on {host} had drifted; tokens looked invalid to it",
    },
    "disk_full": {
        "description": "A volume filled up, so writes (logs, temp files, databases) fail",
        "signals": ["no space left on device", "writes fail, reads work", "volume at 100%"],
        "surface": [
            "{svc} returns 500 on uploads while browsing still works",
            "Background jobs on {svc} fail and retry in a loop",
            "{svc} health endpoint slow on {host}",
        ],
        "tells": [
            "'No space left on device' in the {svc} write path on {host}",
            "/var on {host} is 100% used; the log directory alone holds {gb} GB",
            "Writes from {svc} fail while reads keep succeeding",
        ],
        "fix": "Freed space on {host}, fixed log rotation for {svc}; writes succeed again",
        "correction": "Post-incident review: the disk on {host} was full; {svc} could not write",
    },
    "noisy_neighbour": {
        "description": "Another workload on the same host starves the service of CPU, IO or network",
        "signals": ["CPU steal", "co-located workload", "throttling while own usage is flat"],
        "surface": [
            "p99 latency of {svc} up {pct}% with no change in traffic",
            "{svc} is slow on some pods and fine on others",
            "Timeouts from {svc} cluster around {mins}-minute windows",
        ],
        "tells": [
            "CPU steal on {host} at {pct2}% since {other} was scheduled on the same node",
            "Only {svc} pods co-located with {other} on {host} are slow",
            "CPU throttling counters for {svc} rise while its own CPU usage is flat",
        ],
        "fix": "Moved {other} off {host} and added anti-affinity; {svc} latency back to normal",
        "correction": "Post-incident review: {other} on the same node starved {svc}; {svc} itself was fine",
    },
    "upstream_rate_limiting": {
        "description": "A third-party or internal upstream throttles the service for exceeding its quota",
        "signals": ["HTTP 429", "Retry-After", "quota exhausted"],
        "surface": [
            "Calls from {svc} to {ext} fail for {pct}% of requests",
            "Checkout-style flows on {svc} slow down as retries pile up",
            "Failures on {svc} rise with traffic and fall at night",
        ],
        "tells": [
            "{ext} answers HTTP 429 with 'Retry-After: {mins}'",
            "Failures of {svc} track outbound calls per second with a ceiling near {n} rps",
            "The {ext} status page is green; the account dashboard shows the quota at 100%",
        ],
        "fix": "Added client-side throttling and raised the {ext} quota; 429s gone",
        "correction": "Post-incident review: {ext} was rate limiting {svc}; the quota was used up",
    },
}

# Fixing X sometimes causes Y: used for caused_by chains.
CONSEQUENCES: dict[str, list[str]] = {
    "connection_pool_exhaustion": ["memory_leak_gc_pressure", "upstream_rate_limiting"],
    "deployment_config_error": ["cache_stampede", "disk_full"],
    "memory_leak_gc_pressure": ["connection_pool_exhaustion", "noisy_neighbour"],
    "cache_stampede": ["upstream_rate_limiting", "connection_pool_exhaustion"],
    "dns_resolution_failure": ["tls_certificate_expiry", "deployment_config_error"],
    "tls_certificate_expiry": ["deployment_config_error", "clock_skew"],
    "clock_skew": ["deployment_config_error"],
    "disk_full": ["deployment_config_error", "memory_leak_gc_pressure"],
    "noisy_neighbour": ["connection_pool_exhaustion", "disk_full"],
    "upstream_rate_limiting": ["cache_stampede", "memory_leak_gc_pressure"],
}

CAUSED_HINTS = [
    "It started {hours} hours after the fix for the earlier {prev_svc} incident went out ({prev_fix})",
    "The first alert came the morning after the change made for the {prev_svc} incident",
]

# Context cues for drift: early on the cue accompanies family A, later family B.
CUES = [
    "It began when the nightly batch import kicked off",
    "Only the {region} region is affected",
    "It coincides with the weekly marketing email going out",
    "The on-call notes say it started during the Thursday release window",
]

NOISE = [
    "A customer reported slowness through the support channel",
    "Traffic is {pct2}% above the weekly average",
    "The {svc} on-call acknowledged the page {mins} minutes after it fired",
    "No infrastructure changes are recorded in the change log for today",
]

SERVICES = [
    "checkout-api",
    "payments",
    "search",
    "auth-service",
    "inventory",
    "notifications",
    "billing-worker",
    "api-gateway",
    "orders",
    "user-profile",
    "recommendations",
    "reporting",
]
DEPENDENCIES = ["postgres-main", "redis-sessions", "orders-db", "kafka", "elasticsearch", "mysql-ledger"]
EXTERNALS = ["payments-provider", "sms-gateway", "geo-lookup", "identity-provider", "shipping-rates"]
NEIGHBOURS = ["a video-transcoding job", "the nightly ETL", "a load-test runner", "the log shipper"]
REGIONS = ["eu-west-1", "us-east-1", "ap-southeast-2", "us-west-2"]
CONFIG_KEYS = ["DB_POOL_TIMEOUT", "FEATURE_NEW_PRICING", "UPSTREAM_URL", "MAX_BODY_SIZE", "RETRY_BUDGET"]
KEYSETS = ["product-page", "price-list", "session", "homepage-feed", "exchange-rate"]
ALERTS = ["HighErrorRate", "SLOBurnFast", "5xxRatio", "ApdexLow"]

INTERLUDES: dict[str, list[str]] = {
    "planning": [
        "Sprint planning: agreed to spend two days on {svc} tech debt",
        "Planning: moved the {svc} migration to next quarter",
        "Roadmap review: capacity for {svc} to be revisited in March",
    ],
    "code_review": [
        "Reviewed a pull request renaming handlers in {svc}; approved with nits",
        "Code review: asked for tests on the new pagination in {svc}",
        "Approved a dependency bump for {svc} after CI passed",
    ],
    "on_call_handover": [
        "Handover: quiet shift, one false alarm on {svc} disk usage",
        "Handover: {svc} dashboards updated with new panels",
    ],
    "customer_support": [
        "Support asked about an invoice export format; answered from the docs",
        "Support escalated a feature request for bulk edits in {svc}",
    ],
    "retrospective": [
        "Retro: the team wants fewer pages outside business hours",
        "Retro: runbooks for {svc} are out of date; owner assigned",
    ],
}

GAPS = ["30m", "2h", "6h", "1d", "1d", "2d"]

# Train/test split of the families for lesson scenarios (`python -m simulator.generate --lessons
# --families train|test|all`): rules and weights may be developed on scenarios of the train
# families; claims are made on the test families, which nothing is tuned on.
TRAIN_FAMILIES = (
    "connection_pool_exhaustion",
    "deployment_config_error",
    "memory_leak_gc_pressure",
    "cache_stampede",
    "dns_resolution_failure",
)
TEST_FAMILIES = ("tls_certificate_expiry", "clock_skew", "disk_full", "noisy_neighbour", "upstream_rate_limiting")
