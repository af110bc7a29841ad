"""A world: collections of records held in memory, served to the gate as resolvers.

The CLI's ``--world`` file, the simulator and tests use it; a host binds its own
resolvers (a database query, an API call) with the same signature: ``(field, value)`` →
matching records.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from callgate_rules.errors import InputError
from callgate_rules.pipeline.validate import Record, Resolver


class CollectionResolver:
    """Answers ``field == value`` over one collection, with an index built per field once."""

    # in memory: answers at once, so the gate calls it in its own thread (pipeline.lookups)
    callgate_keeps_deadline = True

    def __init__(self, records: Sequence[Record]) -> None:
        self.records = list(records)
        self._indexes: dict[str, dict[Any, list[Record]]] = {}

    def __call__(self, field: str, value: Any) -> Sequence[Record]:
        index = self._indexes.get(field)
        if index is None:
            index = defaultdict(list)
            for record in self.records:
                if field in record and _hashable(record[field]):
                    index[record[field]].append(record)
            self._indexes[field] = index
        try:
            found = index.get(value, ())
        except TypeError:  # a list or an object: no record holds it as its key
            return []
        # bool is an int in Python; a lookup of 1 must not find True.
        return [r for r in found if type(r[field]) is type(value)]


class WorldResolvers(Mapping[str, Resolver]):
    """Every collection of a world; an unknown collection simply holds no records."""

    def __init__(self, world: Mapping[str, Sequence[Record]]) -> None:
        self._collections = {name: CollectionResolver(records) for name, records in world.items()}

    def __getitem__(self, name: str) -> Resolver:
        return self.get(name)

    def __contains__(self, name: object) -> bool:
        return True

    def __iter__(self) -> Iterator[str]:
        return iter(self._collections)

    def __len__(self) -> int:
        return len(self._collections)

    def get(self, name: str, default: Any = None) -> Resolver:
        """The collection's resolver, ``default`` never: every collection exists here."""
        return self._collections.get(name) or CollectionResolver([])


def check_world(world: Any, source: str) -> Mapping[str, Sequence[Record]]:
    """A world must map collection names to lists of records with an ``id`` each."""
    if not isinstance(world, Mapping):
        raise InputError(f"{source}: a world must map collection names to lists of records")
    for name, records in world.items():
        if not isinstance(records, list):
            raise InputError(f"{source}: world.{name} must be a list of records")
        for index, record in enumerate(records):
            if not isinstance(record, Mapping) or "id" not in record:
                raise InputError(f"{source}: world.{name}[{index}] must be a mapping with an id")
    return world


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True
