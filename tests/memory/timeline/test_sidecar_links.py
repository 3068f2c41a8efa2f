"""A store's sidecars (``-anchor``, ``-vectors``) are never written through a symbolic link."""

from __future__ import annotations

import os

import numpy as np
import pytest

from memory.agent_memory import EpisodicMemory
from memory.errors import StoreError
from memory.persistence.vectors import VectorFile
from memory.timeline import SQLiteStore
from memory.timeline.anchor import GENESIS, SLOT, SLOTS, Anchor, Writer
from memory.timeline.anchor import read as read_anchor
from tests.builders import play_incidents

pytestmark = pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symbolic links on this platform")
VICTIM = b"the victim's own bytes\n" * 64


def planted(tmp_path, suffix: str, *, dangling: bool = False):
    """A store path whose `suffix` sidecar is a link to a victim file (or to a missing one)."""
    victim = tmp_path / "victim.txt"
    if not dangling:
        victim.write_bytes(VICTIM)
    store = tmp_path / "m.sqlite"
    os.symlink(victim, f"{store}{suffix}")
    return store, victim


def unharmed(victim, dangling: bool) -> bool:
    return not victim.exists() if dangling else victim.read_bytes() == VICTIM


@pytest.mark.parametrize("suffix", ["-anchor", "-vectors"])
@pytest.mark.parametrize("dangling", [False, True], ids=["link", "dangling"])
def test_a_store_whose_sidecar_is_a_link_refuses_to_open(tmp_path, suffix, dangling):
    store, victim = planted(tmp_path, suffix, dangling=dangling)
    message = f"{store}{suffix} is a symbolic link; refusing to write through it"
    with pytest.raises(StoreError, match=message):
        SQLiteStore(store)
    with pytest.raises(StoreError, match=message):
        EpisodicMemory(store)
    assert unharmed(victim, dangling)


@pytest.mark.parametrize("dangling", [False, True], ids=["link", "dangling"])
def test_an_anchor_linked_after_the_store_opened_is_refused_on_its_first_write(tmp_path, dangling):
    store, victim = planted(tmp_path, "-anchor", dangling=dangling)
    writer = Writer(str(store))  # what an open store holds: the link appears after the open's check
    with pytest.raises(StoreError, match="-anchor is a symbolic link; refusing to write through it"):
        writer.write(Anchor(1, GENESIS, {}), pending=True)
    writer.close()
    assert unharmed(victim, dangling)
    assert read_anchor(str(store)).anchor is None  # nor is a link read as the store's anchor


@pytest.mark.parametrize("dangling", [False, True], ids=["link", "dangling"])
def test_a_vectors_sidecar_linked_after_the_store_opened_is_refused_on_its_first_append(tmp_path, dangling):
    _, victim = planted(tmp_path, "-vectors", dangling=dangling)
    file = VectorFile(str(tmp_path / "m.sqlite-vectors"), 8)
    with pytest.raises(StoreError, match="-vectors is a symbolic link; refusing to write through it"):
        file.append(np.ones((3, 8), dtype=np.float32))
    assert np.isnan(file.read(np.array([0]), np.array([8]))).all()  # nor read through it
    file.close()
    assert unharmed(victim, dangling)


def test_a_memory_with_real_sidecars_still_writes_them(tmp_path):
    store = tmp_path / "m.sqlite"
    with EpisodicMemory(store) as memory:
        play_incidents(memory)
    assert os.path.getsize(f"{store}-anchor") == SLOTS * SLOT and not os.path.islink(f"{store}-anchor")
    with EpisodicMemory(store) as memory:
        assert memory.store.stats().entries > 0
