import pytest

from refcache.keys import RadixKey, child_key, match_length
from refcache.lru import LRUList


def test_child_key_by_page() -> None:
    key = RadixKey.of([5, 6, 7, 8, 9])
    assert child_key(key, 1) == 5
    assert child_key(key, 2) == (5, 6)
    assert child_key(RadixKey.of([5], "lora-a"), 1) == ("lora-a", 5)


def test_match_length_rounds_to_pages_and_respects_namespace() -> None:
    a, b = RadixKey.of([1, 2, 3, 4, 5]), RadixKey.of([1, 2, 3, 9])
    assert match_length(a, b, 1) == 3
    assert match_length(a, b, 2) == 2
    assert match_length(a, RadixKey.of([1, 2, 3], "x"), 1) == 0


class N:
    def __init__(self, i: int, parent: "N | None" = None) -> None:
        self.id, self.parent, self.children = i, parent, {}
        self.prev = self.next = None
        self.lock_ref = 0


def _ids(lst: LRUList) -> list[int]:
    return [n.id for n in lst.iter_lru()]


def test_insert_remove_and_reset() -> None:
    lst = LRUList()
    a, b, c = N(1), N(2), N(3)
    for n in (a, b, c):
        lst.insert_mru(n)
    assert _ids(lst) == [1, 2, 3]
    lst.reset_node_mru(a)
    assert _ids(lst) == [2, 3, 1]
    lst.remove_node(c)
    assert _ids(lst) == [2, 1] and not lst.in_list(c)
    assert c.prev is None and c.next is None
    with pytest.raises(AssertionError):
        lst.remove_node(c)


def test_stale_pointers_when_not_cleared() -> None:
    lst = LRUList(clear_pointers=False)
    a, b = N(1), N(2)
    lst.insert_mru(a)
    lst.insert_mru(b)
    lst.remove_node(a)
    assert a.prev is b  # the incident-1 shape: the removed node still points at a live one


def test_reset_node_and_parents_puts_child_before_parent() -> None:
    lst = LRUList()
    root = N(0)
    p = N(1, root)
    c = N(2, p)
    other = N(3, root)
    for n in (p, c, other):
        lst.insert_mru(n)
    lst.reset_node_and_parents_mru(c, root)
    assert _ids(lst) == [3, 1, 2]  # LRU first: other, then parent, child most recent
    assert p.prev is c


def test_walks_skip_locked_and_inner_nodes() -> None:
    lst = LRUList()
    root = N(0)
    p = N(1, root)
    c = N(2, p)
    p.children = {2: c}
    for n in (p, c):
        lst.insert_mru(n)
    assert lst.lru_no_lock() is p
    assert lst.leaf_lru_no_lock() is c
    c.lock_ref = 1
    assert lst.leaf_lru_no_lock() is None
