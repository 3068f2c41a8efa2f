"""The fake Messages API reports prompt-cache tokens the way the real API does."""

from tests.fake_messages_api import FakeMessagesAPI

USER = {"role": "user", "content": "Candidate root causes (described in the catalogue):\n- a\n- b\n\nMemory:\n[E1] x"}


def _body(system_chars, *, marked=True, model="claude-sonnet-4-6"):
    block = {"type": "text", "text": "s" * system_chars}
    if marked:
        block["cache_control"] = {"type": "ephemeral"}
    return {"model": model, "tools": [], "system": [{"type": "text", "text": "guide"}, block], "messages": [USER]}


def test_a_marked_prefix_above_the_minimum_is_written_once_then_read():
    fake = FakeMessagesAPI()
    first, second = fake.usage(_body(9000)), fake.usage(_body(9000))
    assert first["cache_creation_input_tokens"] == second["cache_read_input_tokens"] == (2 + 5 + 9000) // 4
    assert first["cache_read_input_tokens"] == second["cache_creation_input_tokens"] == 0
    assert first["input_tokens"] == second["input_tokens"] == len(USER["content"]) // 4  # only what follows


def test_a_short_or_unmarked_prefix_is_not_cached_and_models_keep_apart():
    fake = FakeMessagesAPI()
    short = fake.usage(_body(4000, model="claude-haiku-4-5"))  # ~1,000 tokens < 4,096
    unmarked = [fake.usage(_body(9000, marked=False)) for _ in range(2)]
    for usage in (short, *unmarked):
        assert usage["cache_creation_input_tokens"] == usage["cache_read_input_tokens"] == 0
    assert fake.usage(_body(9000))["cache_creation_input_tokens"] > 0
    assert fake.usage(_body(9000, model="claude-opus-4-8"))["cache_creation_input_tokens"] > 0  # per model


def test_answers_cite_every_shown_id_and_log_each_request():
    fake = FakeMessagesAPI()
    message = fake.answer(_body(10))
    assert message["content"][0]["input"]["relied_on"] == ["E1"] and message["content"][0]["input"]["root_cause"] == "a"
    assert fake.log == [
        {"request": 1, "model": "claude-sonnet-4-6", "attempt_1": False, "shown_ids": 1, **message["usage"]}
    ]
