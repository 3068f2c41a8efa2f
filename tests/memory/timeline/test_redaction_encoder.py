"""Redaction before storage, and the stable offline encoder."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory import HashingEncoder, PatternRedactor, SQLiteStore, Timeline
from memory.errors import EncoderUnavailable
from memory.timeline import SentenceTransformerEncoder
from memory.timeline.redaction import may_hold_secret
from tests.builders import T0

SECRETS = {
    "email": ("Ping jane.doe@example.com about it", "jane.doe@example.com", "[EMAIL#"),
    "phone": ("On-call phone +1 415-555-0132 did not answer", "555-0132", "[PHONE#"),
    "phone_parens": ("Call (415) 555-0199 now", "555-0199", "[PHONE#"),
    "card": ("Customer card 4111 1111 1111 1111 was charged twice", "4111 1111 1111 1111", "[CARD#"),
    "bearer": ("curl -H 'Authorization: Bearer abcDEF123456ghiJKL789'", "abcDEF123456ghiJKL789", "[TOKEN#"),
    "api_key_prefixed": (
        "leaked sk-ant-api03-AAAAbbbbCCCCdddd1234 in logs",
        "sk-ant-api03-AAAAbbbbCCCCdddd1234",
        "[APIKEY#",
    ),
    "aws_key": ("key AKIAIOSFODNN7EXAMPLE rotated", "AKIAIOSFODNN7EXAMPLE", "[APIKEY#"),
    "assignment": ("config api_key=s3cr3tvalue42 loaded", "s3cr3tvalue42", "[SECRET#"),
}


@pytest.mark.parametrize("case", sorted(SECRETS))
def test_each_pii_kind_never_reaches_disk(tmp_path, case):
    text, raw_value, placeholder = SECRETS[case]
    timeline = Timeline(SQLiteStore(tmp_path / "m.db"), HashingEncoder(dim=64))
    entry = timeline.append(text, kind="observation", role="user", timestamp=T0, situation="s", metadata={"note": text})
    assert raw_value not in entry.text and placeholder in entry.text
    timeline.store.close()
    on_disk = b"".join((tmp_path / name).read_bytes() for name in ("m.db", "m.db-wal") if (tmp_path / name).exists())
    assert raw_value.encode() not in on_disk
    assert placeholder.encode() in on_disk


def test_placeholders_are_stable_and_ordinary_text_survives():
    redactor = PatternRedactor()
    a = redactor.redact("mail ops@corp.io")
    b = redactor.redact("again ops@corp.io")
    assert a.split()[-1] == b.split()[-1]
    ordinary = (
        "Redis logs 'pool exhausted' 3,400 times in 5 minutes; p99 1200 ms; v2.3.1 at "
        "2026-02-03 10:00; 10.0.0.12:6379; build 1234567890123; 500 errors 12%"
    )
    assert redactor.redact(ordinary) == ordinary


def test_invalid_card_number_is_left_alone():
    assert PatternRedactor().redact("order 4111 1111 1111 1112") == "order 4111 1111 1111 1112"


def test_encoder_output_is_unit_float32_and_stable():
    encoder = HashingEncoder(dim=256)
    texts = ["connection pool exhausted", "deploy shipped a bad config", "sprint planning"]
    first = encoder.encode(texts)
    assert first.dtype == np.float32 and first.shape == (3, 256)
    assert np.allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-6)
    # Stability: vectors never depend on what else was encoded before or alongside.
    HashingEncoder(dim=256).encode([f"noise {i}" for i in range(500)])
    assert np.array_equal(HashingEncoder(dim=256).encode(texts[1:2])[0], first[1])
    assert np.array_equal(encoder.encode(texts[::-1])[::-1], first)


def test_encoder_similarity_reflects_shared_words():
    encoder = HashingEncoder()
    pool, pool2, deploy = encoder.encode(
        [
            "redis connection pool exhausted on checkout",
            "pool exhausted waiting for a redis connection",
            "release 4.2 shipped a wrong feature flag value",
        ]
    )
    assert pool @ pool2 > pool @ deploy + 0.2


@settings(max_examples=50, deadline=None)
@given(st.lists(st.text(max_size=80), min_size=1, max_size=300))
def test_encoder_batches_equal_single_calls(texts):
    encoder = HashingEncoder(dim=64)
    batch = encoder.encode(texts)
    for index in (0, len(texts) - 1):
        assert np.array_equal(batch[index], encoder.encode([texts[index]])[0])


def test_missing_sentence_transformer_model_is_a_clear_error(tmp_path):
    with pytest.raises(EncoderUnavailable):
        SentenceTransformerEncoder(tmp_path / "no-such-model")


_FRAGMENTS = st.sampled_from(
    [
        "jane.doe@example.com",
        "a@b.co",
        "@",
        "Bearer abcDEF123456ghiJKL789",
        "basic  QWxhZGRpbjpvcGVuIHNlc2FtZQ==",
        "TOKEN xyz",
        "api_key=s3cr3tvalue42",
        "Password: 'hunter2hunter2'",
        "secret = x",
        "access-key:abcdefgh",
        "sk-ant-api03-AAAAbbbbCCCCdddd1234",
        "AKIAIOSFODNN7EXAMPLE",
        "ghp_" + "a" * 36,
        "xoxb-1234567890-abc",
        "AIza" + "B" * 35,
        "eyJhbGciOi.eyJzdWIiOiIx.SflKxwRJSMeKKF",
        "4111 1111 1111 1111",
        "4111-1111-1111-1112",
        "4111111111111111",
        "+1 415-555-0132",
        "(415) 555-0199",
        "+4420794609580",
        "020 7946 0958",
        "555-0132",
        "10.0.0.12:6379",
        "ip-10-100-232-142",
        "v2.3.1",
        "3,400",
        "1234567890123",
        "12 345 678",
        "p99 1200 ms",
        "\u212aey",
        "\u017fecret",
        "TO\u212aEN abcdefghijklmnop",
        "İ",
        "ı",
        "ß",
        "cache key",
        "monkey",
        "tokens",
        " ",
        "-",
        ".",
        ":",
        "=",
        "'",
        '"',
        "\n",
        "(",
        ")",
        "+",
        "0",
        "7",
        "٣",
        "pool exhausted",
        "\u2014",
        "caf\u00e9",
        "to\u017fen",
        "pa\u017f\u017fword=abcdefgh",
        "api_\u212aey: abcdefgh",
        "\u0130",
        "+49 (0)30 1234 5678",
        "(030) 12345678",
        "01 23 45 67 89",
        "98765 43210",
        "030/1234567",
        "DE89 3704 0044 0532 0130 00",
        "NL91ABNA0417164300",
        "078-05-1120",
        "call me at ",
        "phone: ",
        "\u017fm\u017f ",
        "mysql://u:pw123456@h",
        "redis://:x@h",
        "-----BEGIN PRIVATE KEY-----",
        "-----END PRIVATE KEY-----",
        "sk_live_abcdefghijkl",
        "github_pat_" + "b" * 24,
        "https://hooks.slack.com/services/T1/B2/x",
        "pwd=abcdefgh",
        "credentials: abcdefgh",
        '"api_key": "abcdefgh"',
        "5555 5555 5555 4444",
        "3782 822463 10005",
        "\u0663" * 9,
        "250 500 1000 2000",
        "josé@exämple.de",
    ]
)
_TEXTS = st.lists(
    st.one_of(_FRAGMENTS, st.text(max_size=12), st.from_regex(r"[0-9 .()+-]{1,20}", fullmatch=True)), max_size=8
).map("".join)


@settings(max_examples=200, deadline=None)
@given(_TEXTS)
def test_redaction_pre_check_never_skips_a_text_the_patterns_change(text):
    redactor = PatternRedactor(salt="s")
    full = redactor.redact_all(text)
    assert redactor.redact(text) == full
    if not may_hold_secret(text):
        assert full == text


def test_the_pre_check_knows_every_character_that_matches_an_ascii_letter_ignoring_case():
    # what the Unicode fast path of `may_hold_secret` relies on, checked against this Python's tables
    import re

    from memory.timeline.redaction import ASCII_FOLDS

    every = "".join(map(chr, range(0x80, 0x110000)))
    folds = {chr(code) for code in ASCII_FOLDS}
    assert set(re.compile("[a-z]", re.IGNORECASE).findall(every)) == folds
    assert [c for c in every if c not in folds and (len(c.lower()) != 1 or c.lower().isascii())] == []
    for char in folds:
        assert re.fullmatch(char.translate(ASCII_FOLDS), char, re.IGNORECASE)


def _reference_vectors(texts, dim, char_weight):
    """The hashing encoder's definition, one text at a time and without caches."""
    from sklearn.utils import murmurhash3_32

    from memory.timeline.encoder import TOKEN

    bucket = lambda feature: murmurhash3_32(feature, positive=True) % dim  # noqa: E731
    out = []
    for text in texts:
        tokens = TOKEN.findall(text.lower())
        index, weight = [], []
        for token in tokens:
            padded = f" {token} "
            grams = [padded[i : i + n] for n in (3, 4, 5) for i in range(len(padded) - n + 1)]
            index += [bucket("w:" + token)] + [bucket("c:" + gram) for gram in grams]
            weight += [1.0] + [char_weight] * len(grams)
        index += [bucket("b:" + a + " " + b) for a, b in zip(tokens, tokens[1:])]
        weight += [1.0] * (len(tokens) - 1 if tokens else 0)
        counts = np.log1p(np.bincount(np.asarray(index, dtype=np.int64), np.asarray(weight), minlength=dim))
        norm = np.linalg.norm(counts[None, :], axis=1, keepdims=True)
        norm[norm == 0.0] = 1.0
        out.append((counts[None, :] / norm).astype(np.float32)[0])
    return np.asarray(out, dtype=np.float32).reshape(len(texts), dim)


_WORDS = st.sampled_from(["pool", "exhausted", "redis", "pool", "api-1", "x", "v2.3.1", "deploy", "é", "_", "42"])
_ENCODER_TEXTS = st.lists(
    st.one_of(st.lists(_WORDS, max_size=12).map(" ".join), st.text(max_size=60)), min_size=1, max_size=40
)


@settings(max_examples=30, deadline=None)
@given(_ENCODER_TEXTS, _ENCODER_TEXTS, st.sampled_from([0.5, 0.3]))
def test_batch_encoding_equals_the_definition_one_text_at_a_time(warm, texts, char_weight):
    encoder = HashingEncoder(dim=128, char_weight=char_weight)
    encoder.encode(warm)  # tokens seen before come from the cache
    batch = encoder.encode(texts)
    expected = _reference_vectors(texts, 128, char_weight)
    assert batch.dtype == np.float32 and np.array_equal(batch.view(np.uint32), expected.view(np.uint32))
    singles = np.stack([HashingEncoder(dim=128, char_weight=char_weight).encode([t])[0] for t in texts])
    assert np.array_equal(singles.view(np.uint32), expected.view(np.uint32))


@settings(max_examples=30, deadline=None)
@given(_ENCODER_TEXTS, st.sampled_from([0.5, 0.3]), st.integers(0, 300))
def test_sparse_encoding_is_the_encoding_and_names_every_element_it_may_have_set(texts, char_weight, more):
    texts = texts + [f"shard-{i} pool" for i in range(more)]  # up to two chunks of 256 more
    encoder = HashingEncoder(dim=128, char_weight=char_weight)
    vectors, positions = encoder.encode_sparse(texts)
    expected = HashingEncoder(dim=128, char_weight=char_weight).encode(texts)
    assert vectors.dtype == np.float32 and np.array_equal(vectors.view(np.uint32), expected.view(np.uint32))
    assert positions.dtype == np.int64 and np.all(np.diff(positions) > 0)
    rest = np.ones(vectors.size, dtype=bool)
    rest[positions] = False
    assert not vectors.reshape(-1).view(np.uint32)[rest].any()  # not a bit set elsewhere (-0.0 counts)
    assert encoder.encode_sparse([]).vectors.shape == (0, 128)


def test_encoder_caches_start_over_without_changing_vectors():
    texts = [f"token{i} pool{i % 7} exhausted shard-{i}" for i in range(300)]
    small = HashingEncoder(dim=256)
    small.cache_limit = 50
    assert np.array_equal(small.encode(texts[:100]), HashingEncoder(dim=256).encode(texts[:100]))
    assert np.array_equal(small.encode(texts), HashingEncoder(dim=256).encode(texts))
    assert small.cached_tokens < 400


def test_encoder_shared_by_threads_gives_the_same_vectors():
    from concurrent.futures import ThreadPoolExecutor

    texts = [f"pool{i} exhausted on shard-{i % 13} after deploy v{i % 5}" for i in range(400)]
    expected = HashingEncoder(dim=128).encode(texts)
    shared = HashingEncoder(dim=128)
    shared.cache_limit = 300  # caches start over while other threads encode
    with ThreadPoolExecutor(4) as pool:
        rows = list(
            pool.map(
                lambda i: shared.encode([texts[i]])[0] if i % 2 else shared.encode(texts[i : i + 3])[0],
                range(len(texts) - 2),
            )
        )
    assert all(np.array_equal(row, expected[i]) for i, row in enumerate(rows))


def test_encoder_pickles_without_its_caches():
    import pickle

    encoder = HashingEncoder(dim=64)
    vector = encoder.encode(["pool exhausted"])
    copy = pickle.loads(pickle.dumps(encoder))
    assert copy.name == encoder.name and np.array_equal(copy.encode(["pool exhausted"]), vector)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_the_encoder_hash_is_scikit_learns_murmurhash3(feature):
    """Vectors stay what they were when the encoder hashed through scikit-learn."""
    from sklearn.utils import murmurhash3_32

    encoder = HashingEncoder(dim=1024)
    assert encoder.bucket(feature) == murmurhash3_32(feature, positive=True) % 1024


_META_LEAVES = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**64), 2**64), st.floats(), _FRAGMENTS, st.text(max_size=10)
)
_METADATA = st.dictionaries(
    st.one_of(st.text(max_size=6), _FRAGMENTS),
    st.recursive(
        _META_LEAVES,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
        max_leaves=8,
    ),
    max_size=4,
)


@settings(max_examples=150, deadline=None)
@given(_METADATA)
def test_metadata_checked_through_its_json_equals_the_per_string_path(metadata):
    from memory.errors import InvalidEntry
    from memory.timeline.entries import canonical_metadata
    from memory.timeline.redaction_values import redact_value
    from memory.timeline.validation import check_metadata

    redactor = PatternRedactor(salt="s")
    try:
        check_metadata(metadata)
        expected = canonical_metadata(redact_value(dict(metadata), redactor.redact))
    except (InvalidEntry, ValueError) as exc:
        expected = type(exc)
    timeline = Timeline(SQLiteStore(), HashingEncoder(dim=16), redactor=redactor)
    try:
        draft = timeline.draft("x", kind="note", role="user", timestamp=T0, situation="s", metadata=metadata)
        got = canonical_metadata(draft.metadata)
    except (InvalidEntry, ValueError) as exc:
        got = type(exc)
    assert got == expected


def test_metadata_left_alone_by_one_redactor_is_redacted_by_its_replacement(tmp_path):
    timeline = Timeline(SQLiteStore(tmp_path / "m.sqlite"), HashingEncoder(), PatternRedactor())
    metadata = {"host": {"ip": "10.0.0.7", "up": True}}  # not flat: judged (and remembered) by its canonical JSON
    item = {
        "text": "node up",
        "kind": "note",
        "role": "user",
        "timestamp": T0,
        "situation": "ops",
        "metadata": metadata,
    }
    kept = timeline.append_many([item, item])
    assert [entry.metadata for entry in kept] == [metadata, metadata]
    timeline.redactor = PatternRedactor(ip=True)
    fields = {key: value for key, value in item.items() if key != "text"}
    for redacted in (timeline.append_many([item])[0], timeline.append("node up", **fields)):
        assert redacted.metadata["host"]["ip"].startswith("[IP#"), redacted.metadata
