"""The lexicon: every word the layers read, kept as data, each group with where its words came from.

The vocabulary of the layers (negation, normal state, looks, outcome cues, change words and kinds,
stopgaps, references to a past change, stop words) lives in the YAML files of this package, one
per subject (`tokens`, `negation`, `outcomes`, `changes`, `causes`). A group is an ordered list
of words, phrases or regex fragments over lower-case text (inflections such as ``errors?``, a
pattern where a word is not enough such as ``\\d+ days ago``), with its ``provenance``: general
English and why, or the file and the measurement it was added for.

The layers never write a word list of their own: they hold the grammar (how the words combine)
and compile it from a `Lexicon` they are handed, like the encoder (``lexicon[name]`` is a
group's alternation, ``"a|an|the"``; `Lexicon.words` and `Lexicon.word_set` give the words).
`DEFAULT_LEXICON` is the shipped one, loaded once; `load_lexicon` reads another directory or
file of the same shape, and `Lexicon.with_words` extends one group (a site's own failure word).
`Lexicon.fingerprint` names a lexicon by its words (a store records the one its derived records
were read with: `memory.persistence.lexicons`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import MappingProxyType

import yaml

__all__ = ["DEFAULT_LEXICON", "Group", "Lexicon", "LexiconError", "load_lexicon"]

LEXICON_DIR = Path(__file__).resolve().parent


class LexiconError(ValueError):
    """A lexicon file that is malformed: a group without words or provenance, a word that is not text."""


@dataclass(frozen=True)
class Group:
    """One named group of words, in matching order, with where they came from."""

    name: str
    words: tuple[str, ...]  # words, phrases or regex fragments (matched in this order)
    provenance: str  # "general English: why", or the file and measurement the words were added for
    source: str = ""  # the file the group was read from

    @property
    def alternation(self) -> str:
        """The words as one regex alternation, in order (``"a|an|the"``)."""
        return "|".join(self.words)


@dataclass(frozen=True, eq=False)  # compared and hashed by identity: layers cache what they compile per lexicon
class Lexicon:
    """Named groups of words (`Group`), read-only."""

    groups: Mapping[str, Group] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "groups", MappingProxyType(dict(self.groups)))

    def group(self, name: str) -> Group:
        try:
            return self.groups[name]
        except KeyError:
            raise KeyError(f"the lexicon has no group {name!r}") from None

    def __getitem__(self, name: str) -> str:
        """The group's words as one regex alternation (for a layer's pattern)."""
        return self.group(name).alternation

    def __contains__(self, name: object) -> bool:
        return name in self.groups

    def words(self, name: str) -> tuple[str, ...]:
        return self.group(name).words

    def word_set(self, name: str) -> frozenset[str]:
        return frozenset(self.group(name).words)

    def canonical(self) -> bytes:
        """The groups' words as canonical JSON (group names sorted, words in matching order; no provenance:
        it does not change what is read)."""
        words = {name: list(group.words) for name, group in self.groups.items()}
        return json.dumps(words, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")

    @cached_property
    def fingerprint(self) -> str:
        """SHA-256 (hex) of `canonical`: two lexicons with the same words read every text alike."""
        return hashlib.sha256(self.canonical()).hexdigest()

    def with_words(self, name: str, words: Iterable[str], provenance: str) -> Lexicon:
        """A copy with `words` added at the end of group `name` (created when absent); `provenance`
        says where the added words came from and is appended to the group's."""
        old = self.groups.get(name)
        added = tuple(words)
        group = Group(
            name,
            (old.words if old else ()) + added,
            f"{old.provenance}; added: {provenance}" if old else provenance,
            old.source if old else "",
        )
        _check(group)
        return Lexicon({**self.groups, name: group})


def _check(group: Group) -> None:
    if not group.words or not all(isinstance(w, str) and w for w in group.words):
        raise LexiconError(f"group {group.name!r} ({group.source}): words must be a non-empty list of text")
    if not isinstance(group.provenance, str) or not group.provenance.strip():
        raise LexiconError(f"group {group.name!r} ({group.source}): no provenance")
    for word in group.words:
        try:
            re.compile(word)
        except re.error as exc:
            raise LexiconError(f"group {group.name!r} ({group.source}): {word!r} is no regex fragment: {exc}") from None


def _read(path: Path) -> list[Group]:
    data = yaml.load(path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    if not isinstance(data, dict):
        raise LexiconError(f"{path}: a mapping of group names expected")
    groups = []
    for name, body in data.items():
        if not isinstance(body, dict) or set(body) != {"provenance", "words"}:
            raise LexiconError(f"{path}: group {name!r} must have exactly 'provenance' and 'words'")
        group = Group(str(name), tuple(body["words"] or ()), body["provenance"], path.name)
        _check(group)
        groups.append(group)
    return groups


def load_lexicon(path: str | Path | None = None) -> Lexicon:
    """A lexicon read from a directory of ``*.yaml`` files or one file (default: the shipped lexicon)."""
    where = LEXICON_DIR if path is None else Path(path)
    files = sorted(where.glob("*.yaml")) if where.is_dir() else [where]
    if not files:
        raise LexiconError(f"no lexicon files (*.yaml) in {where}")
    groups: dict[str, Group] = {}
    for file in files:
        for group in _read(file):
            if group.name in groups:
                raise LexiconError(f"group {group.name!r} is in both {groups[group.name].source} and {file.name}")
            groups[group.name] = group
    return Lexicon(groups)


DEFAULT_LEXICON = load_lexicon()
