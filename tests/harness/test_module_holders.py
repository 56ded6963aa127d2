"""The named container that holds what an allocation site made (module_holders)."""

from __future__ import annotations

import gc
import sys
import tracemalloc
import types
from collections.abc import Iterator

import pytest

from harness.worker.heapgraph.module_holders import holders_by_site, named_containers
from harness.worker.samplers.allocations import site_of

MODULE = "leaky_module_for_holders"


@pytest.fixture
def leaky() -> Iterator[types.ModuleType]:
    """A module with a dict, and a class whose attribute is a list, both of 200 entries."""
    module = types.ModuleType(MODULE)
    module.__dict__.update(
        __file__="/elsewhere/leaky_module_for_holders.py",
        SEEN={i: bytes(64) for i in range(200)},
        Cache=type("Cache", (), {"entries": [bytes(64) for _ in range(200)]}),
        small={1: b"x"},
    )
    sys.modules[MODULE] = module
    yield module
    del sys.modules[MODULE]


def remember(into: dict[int, bytes]) -> None:
    into[len(into)] = bytes(4096)  # the allocating line the holder is found for


def test_the_dict_a_module_names_holds_what_the_site_made_since_the_window_began(
    leaky: types.ModuleType,
) -> None:
    candidates = named_containers()  # listed untraced, as a window begins
    named = {(name, module) for name, module, _, _ in candidates}
    assert {("SEEN", "/elsewhere/leaky_module_for_holders.py"),
            ("Cache.entries", "/elsewhere/leaky_module_for_holders.py")} <= named
    assert not any(name == "small" for name, module, _, _ in candidates if "leaky" in module)
    tracemalloc.start(8)
    try:
        remember(leaky.__dict__["SEEN"])
        found = holders_by_site(candidates, site_of)
    finally:
        tracemalloc.stop()
    site = next(s for s in found if s.endswith(f":{remember.__code__.co_firstlineno + 1}"))
    assert found[site] == {"name": "SEEN", "module": "/elsewhere/leaky_module_for_holders.py",
                           "type": "dict", "entries": 201}


def test_nothing_is_named_untraced_or_for_what_was_made_before_the_window(
    leaky: types.ModuleType,
) -> None:
    candidates = named_containers()
    assert holders_by_site(candidates, site_of) == {}  # not tracing: no traceback to read
    tracemalloc.start(8)
    try:
        found = holders_by_site(candidates, site_of)
    finally:
        tracemalloc.stop()
    assert not any(h["name"] in ("SEEN", "Cache.entries") for h in found.values())


class Service:
    def __init__(self) -> None:
        self.sessions = [bytes(8) for _ in range(150)]


def test_an_attribute_of_a_module_level_object_is_named_once_found_and_no_dict_is_made(
    leaky: types.ModuleType,
) -> None:
    leaky.__dict__["service"] = Service()
    candidates = named_containers()
    assert ("service", "/elsewhere/leaky_module_for_holders.py") in {
        (name, module) for name, module, _, owner in candidates if owner is not None}
    gc.collect()
    blocks = sys.getallocatedblocks()
    named_containers()  # reading what objects hold makes none of them a __dict__
    gc.collect()
    assert sys.getallocatedblocks() - blocks < 200  # it was 8,000 dicts made for good
    tracemalloc.start(8)
    try:
        leaky.__dict__["service"].sessions.append(bytes(4096))
        found = holders_by_site(candidates, site_of)
    finally:
        tracemalloc.stop()
    assert {h["name"] for h in found.values()} == {"service.sessions"}
