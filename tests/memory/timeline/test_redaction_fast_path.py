"""`PatternRedactor.redact` (pre-checks, then only the patterns a text can meet) equals `redact_all`
(every pattern, unconditionally) on random text made of secret-like fragments."""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from memory.timeline import PatternRedactor
from memory.timeline.entries import canonical_metadata
from memory.timeline.redaction import may_hold_secret
from memory.timeline.redaction_values import leaves_unchanged, redact_value

# One sample of each form a pattern recognises, written as a caller would.
_SECRETS = [
    "sk-ant-abcdefghijklmnop1234",
    "sk_live_abcdefghij12",
    "rk_test_abcdefghij12",
    "whsec_abcdefghijklmnop12",
    "AKIAIOSFODNN7EXAMPLE",
    "ASIAIOSFODNN7EXAMPLE",
    "ghp_" + "a1" * 18,
    "gho_" + "b2" * 18,
    "github_pat_" + "c" * 24,
    "glpat-abcdefghij0123456789",
    "npm_" + "d" * 36,
    "pypi-AgEabcdefghijklmnop",
    "hf_" + "e" * 32,
    "dop_v1_" + "0f" * 32,
    "shpat_" + "a" * 32,
    "hvs.abcdefghijklmnopqrstu",
    "SG.abcdefghijklmnop.qrstuvwxyzabcdef",
    "xoxb-1234567890-abcdef",
    "xapp-1-A0123456789",
    "AIza" + "Q" * 35,
    "ya29.abcdefghijklmnopqrstuv",
    "GOCSPX-abcdefghijklmnopqrst",
    "AC0123456789abcdef0123456789abcdef",
    "SK0123456789abcdef0123456789abcdef",
    "key-" + "0a" * 16,
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.abcdefghijk",
    "https://hooks.slack.com/services/T000/B000/XXXX",
    "https://discordapp.com/api/webhooks/123/abc",
    "aws wJalrXUtnFEMI/K7MDENG/bPxRfiCYz9z9z9z9z9",
    "twilio 0123456789abcdef0123456789abcdef",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf9Cnzj4p4WGeKLs1Pt8Qu\n"
    "-----END RSA PRIVATE KEY-----",
    "postgres://app:s3cr3tPass@db:5432/x",
    "jdbc:oracle:thin:scott/tiger99@db:1521:orcl",
    "curl -u deploy:pa55word1 https://ci",
    "mysql -u root -pS3cretpw1",
    "--password hunter2xyz",
    "Bearer abcDEF123456ghi",
    "Basic dXNlcjpwYXNzd29yZA==",
    "Token Xy12345678ab",
    "<password>hunter22x</password>",
    "<db:apiKey>abcd1234</db:apiKey>",
    'password="Hunter2xyz"',
    "api_key: abc123XYZ9",
    "JWT_SECRET=my-sup3r-s3cret-k3y",
    "client secret is 8Q~kZ4p.Xr7YwT2mVn",
    "pwd=abcdefgh1",
    "pw: Xy12345678",
    "the password for the admin account is Tr0ub4dor&3",
    "creds -> 'correct horse battery'",
    "alice.ng@example.org",
    "ünïcödé@exämple.de",
    "+44 20 7946 0958",
    "(415) 555-0132",
    "415-555-0199",
    "01 23 45 67 89",
    "030/1234567",
    "98765 43210",
    "phone: 4155550199",
    "call me at 0412 345 678",
    "4111 1111 1111 1111",
    "visa 4012888888881881",
    "3782 822463 10005",
    "GB82 WEST 1234 5698 7654 32",
    "DE89370400440532013000",
    "123-45-6789",
]
# Look-alikes, case and Unicode variants, and the characters that glue fragments together.
_NEAR = [
    "token expiration",
    "Basic troubleshooting",
    "request id 4111111111111111",
    "order #4111111111111111",
    "1000 2000 3000 4000",
    "ip-10-166-27-235",
    "KEY",
    "Key",
    "pa\u017f\u017fword=abcdefgh",
    "api_\u212aey: abcdefgh",
    "\u0130\u0131",
    "tw\u0130l\u0130o",
    "A\u017fIA",
    "AWS",
    "Twilio",
    "ACK",
    "DISK",
    "msg.",
    "-user",
    "re-use",
    "</",
    "=",
    ":",
    "@",
    "\u0663" * 9,
    "\u2014",
    "pool exhausted",
    "10.1.2.3",
    "2001:db8::1",
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "[SECRET#0a1b2c3d]",
    "[CARD#12345678]",
]
_GLUE = st.sampled_from([" ", "", "\n", "; ", "=", ": ", '"', "'", "/", "-", "_", ".", ",", "(", ")", "<", ">"])
_FRAGMENT = st.one_of(
    st.sampled_from(_SECRETS),
    st.sampled_from(_SECRETS).map(str.upper),
    st.sampled_from(_SECRETS).map(str.lower),
    st.sampled_from(_NEAR),
    st.text(max_size=10),
    st.from_regex(r"[0-9 .()+/-]{1,20}", fullmatch=True),
)
_TEXT = st.lists(st.tuples(_FRAGMENT, _GLUE), max_size=6).map(lambda parts: "".join(a + b for a, b in parts))
_REDACTORS = [PatternRedactor(), PatternRedactor("salt", ip=True)]


@settings(max_examples=150, deadline=None)
@given(_TEXT)
def test_redact_equals_every_pattern_run_in_turn(text):
    for redactor in _REDACTORS:
        assert redactor.redact(text) == redactor.redact_all(text)
    if not may_hold_secret(text):
        assert _REDACTORS[0].redact_all(text) == text


def test_each_form_is_flagged_and_replaced_and_flagged_inside_json():
    redactor = _REDACTORS[0]
    for secret in _SECRETS:
        for text in (secret, f"x {secret} y"):
            assert may_hold_secret(text), text
            assert redactor.redact(text) == redactor.redact_all(text) != text, text
        assert may_hold_secret(json.dumps({"a": secret}, ensure_ascii=False)), secret  # what metadata is checked by


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.sampled_from(["a", "cmd", "note", "api_key"]), _TEXT, max_size=3))
def test_metadata_the_pre_check_passes_comes_back_unchanged(metadata):
    redactor = _REDACTORS[0]
    if leaves_unchanged(redactor, canonical_metadata(metadata)):
        assert redact_value(metadata, redactor.redact) == metadata


def test_a_command_line_credential_in_metadata_is_redacted():
    # its "-u" follows the JSON's quote, which the former pre-check read as no option at all
    redactor = PatternRedactor()
    metadata = {"cmd": "-u root:xyz12345"}
    assert not leaves_unchanged(redactor, canonical_metadata(metadata))
    assert redact_value(metadata, redactor.redact) == {"cmd": "-u root:[SECRET#bb17eef9]"}
