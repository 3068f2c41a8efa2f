"""Secrets as people write them: labelled phrasings, provider formats without a keyword, cards vs ids."""

import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from eval.redaction import generated, labelled, phrasings, request_id_lines
from memory import PatternRedactor

REDACTOR = PatternRedactor()
_CORPORA = labelled() + phrasings() + generated(draws=1)


def _shape(expected: str) -> str:
    """`expected` as a pattern: each ``[KIND#]`` stands for that kind's placeholder with any digest."""
    return re.sub(r"\\\[([A-Z]+)\\#\\\]", r"\\[\1#[0-9a-f]{8}\\]", re.escape(expected))


def test_the_hand_written_corpus_is_redacted():
    items = phrasings()
    assert len(items) == 200
    missed = [item["text"] for item in items if item["secret"] in REDACTOR.redact(item["text"])]
    assert len(missed) <= 4, missed  # 98 %


def test_luhn_valid_request_ids_are_not_cards():
    lines = request_id_lines(1000)
    assert len(lines) == 1000 and all(re.search(r"\d{16}", line) for line in lines)
    changed = [line for line in lines if REDACTOR.redact(line) != line]
    assert len(changed) <= 10, changed[:5]  # 1 %


PINNED = [
    # a label kept, its value replaced
    ("the password is Wint3r!sComing for the staging box", "the password is [SECRET#] for the staging box"),
    ("pwd=Tb8nq4Rs", "pwd=[SECRET#]"),
    (
        "I reset your password to Spring2026! - please change it",
        "I reset your password to [SECRET#] - please change it",
    ),
    (
        "the admin password for grafana is still admin12345, sorry",
        "the admin password for grafana is still [SECRET#], sorry",
    ),
    ("api key: 7f3a9c1e5b2d48f6a0c9e7b3d1f5a8c2", "api key: [SECRET#]"),
    ("API-Key Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5", "API-Key [SECRET#]"),
    ("client secret is 8Q~kZ4p.Xr7YwT2mVn", "client secret is [SECRET#]"),
    ("temp password (expires friday): Hx4-pT9w-Qa2", "temp password (expires friday): [SECRET#]"),
    ("<password>Xm4!Lq9@Zp2</password>", "<password>[SECRET#]</password>"),
    ("they were sending bearer mF_9.B5f-4.1JqM", "they were sending bearer [TOKEN#]"),
    ("Authorization: Basic YWRtaW46UzNjcjN0UGFzcw==", "Authorization: Basic [TOKEN#]"),
    # credentials in connection strings and command lines
    ("postgres://billing:Bi11@ngPw@db:5432/billing", "postgres://billing:[SECRET#]@db:5432/billing"),
    ("redis://:Rd1sP4ss@cache-01:6379/2", "redis://:[SECRET#]@cache-01:6379/2"),
    ("jdbc:oracle:thin:scott/T1ger99@//ora-prod:1521/ORCL", "jdbc:oracle:thin:scott/[SECRET#]@//ora-prod:1521/ORCL"),
    ("jdbc:mysql://db/shop?user=shop&password=Sh0pDbPass", "jdbc:mysql://db/shop?user=shop&password=[SECRET#]"),
    ("curl -u admin:Adm1nPa55 https://ci", "curl -u admin:[SECRET#] https://ci"),
    ("mysql -u root -pR00tPassw0rd -h db", "mysql -u root -p[SECRET#] -h db"),
    # private keys
    ("-----BEGIN PGP PRIVATE KEY BLOCK-----\nlQOYBF9kLm\n-----END PGP PRIVATE KEY BLOCK-----", "[PRIVATEKEY#]"),
    ('"-----BEGIN OPENSSH PRIVATE KEY-----\\nb3BlbnNzaC1rZXktdjE', '"[PRIVATEKEY#]'),
    # provider formats with no word naming them
    ("found ghp_R7tY2uI9oP3aS5dF8gH1jK4lZ6xC0vB2nM9q in a gist", "found [APIKEY#] in a gist"),
    ("xapp-1-A04BCDEF12G-4829374650123-9f8e7d6c5b4a", "[APIKEY#]"),
    ("rk_live_51Jk8Lm2Pq7Zx3Wv6Nb1Rt4Yu8 for reports", "[APIKEY#] for reports"),
    ("GOCSPX-Qz2XwT7pRn8VbY3cJd1Fg5Hh6K in the bundle", "[APIKEY#] in the bundle"),
    ("SK2b7e4a1c8f4c9e2a7f1b8d3e6a0c5f9b was shared", "[APIKEY#] was shared"),
    ("AKIA7T6R5E4W3Q2A1S0D / Xz9+Lm2Pq7Kd8Jw3Vn6Rb1Tt4Yu8Io5As0Df2GhQ", "[APIKEY#] / [SECRET#]"),
    (
        "Client('AC0c5f9b2d7e4a1c8f4c9e2a7f1b8d3e6a', 'e6a0c5f9b2d7e4a1c8f4c9e2a7f1b8d3')",
        "Client('[APIKEY#]', '[SECRET#]')",
    ),
    # cards written like cards
    ("visa=4917484589897107 cvv=123", "visa=[CARD#] cvv=123"),
    ("the user typed 4111 1111 1111 1111 into the coupon field", "the user typed [CARD#] into the coupon field"),
    ("chargeback on amex 371449635398431", "chargeback on amex [CARD#]"),
]

LEFT_ALONE = [
    "the password is incorrect",
    "password reset email sent to 3 users",
    "Basic troubleshooting steps done",
    "Token authentication failed for user svc-billing",
    "the token for the billing service is invalid",
    "API key rotation completed for 12 services",
    "pass rate 97.5% on the nightly run",
    "bypass=enabled",
    "aws region us-east-1, commit 3f9c1a7e5b2d48f6a0c9e7b3d1f5a8c2e4b6d8f0",
    # Luhn-valid 16-digit ids: not written like a card
    "request 4539148803436467 failed",
    "trace_id=4539148803436467",
    "order #4539148803436467 stuck",
    "card-service: request 4539148803436467 timed out",
    "build 4539148803436467 green",
]


@pytest.mark.parametrize("text, expected", PINNED)
def test_pinned_phrasings(text, expected):
    assert re.fullmatch(_shape(expected), REDACTOR.redact(text))


@pytest.mark.parametrize("text", LEFT_ALONE)
def test_ordinary_text_with_secret_words_or_ids_is_left_alone(text):
    assert REDACTOR.redact(text) == text


def test_redaction_is_deterministic_and_idempotent():
    other = PatternRedactor()
    for item in _CORPORA:
        once = REDACTOR.redact(item["text"])
        assert other.redact(item["text"]) == once
        assert REDACTOR.redact(once) == once, item["text"]


def test_the_pre_check_lets_every_corpus_text_through():
    for item in _CORPORA:
        assert REDACTOR.redact(item["text"]) == REDACTOR.redact_all(item["text"]), item["text"]


def test_the_generated_corpus_is_the_same_for_a_seed():
    assert generated(7, draws=1) == generated(7, draws=1) != generated(8, draws=1)


_NEW_FORMS = st.sampled_from(
    [
        "the password is ",
        "pw ",
        "creds for the box: ",
        "api key - ",
        "secret was ",
        "token ",
        "<pwd>",
        "</pwd>",
        "Hunter22!",
        "Zq8vYt3Lm",
        "incorrect",
        "xapp-1-",
        "whsec_",
        "AC",
        "SK",
        "0c5f9b2d7e4a1c8f4c9e2a7f1b8d3e6a",
        "AKIA7T6R5E4W3Q2A1S0D",
        "aws",
        "twilio",
        "k9Jd8Lm2Pq7Zx3Wv6Nb1Rt4Yu8Io5As0Df2Gh7Kl",
        "jdbc:oracle:thin:s/",
        "@//h",
        "-u ",
        "-uroot ",
        "-p",
        "--user ",
        "--password ",
        "curl ",
        "visa ",
        "request ",
        "4539148803436467",
        "4539 1488 0343 6467",
        "ſecret",
        "\u212aey ",
        "PA\u017f\u017f ",
        "\n",
        " ",
        ":",
        "=",
        "'",
        '"',
        "[SECRET#0a1b2c3d]",
        "@",
    ]
)


@settings(max_examples=150, deadline=None, derandomize=True)  # the same 150 cases each run: CI cannot flake
@given(st.lists(st.one_of(_NEW_FORMS, st.text(max_size=6)), max_size=8).map("".join))
@example("the password is {4539 1488 0343 6467")  # a card's placeholder behind a bracket was redacted again
def test_new_forms_keep_the_pre_check_sound_and_stay_idempotent(text):
    once = REDACTOR.redact(text)
    assert once == REDACTOR.redact_all(text)
    assert REDACTOR.redact(once) == once
