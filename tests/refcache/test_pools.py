import pytest
import torch

from refcache.pools import HostPool, PoolError, SlotAllocator, StatePool


def test_alloc_and_free_round_trip() -> None:
    pool = SlotAllocator(8)
    a = pool.alloc(5)
    assert a is not None and a.dtype == torch.int64 and len(set(a.tolist())) == 5
    assert pool.available_size() == 3 and pool.alloc(4) is None
    pool.free(a)
    assert pool.available_size() == 8


def test_double_free_is_refused() -> None:
    pool = SlotAllocator(4)
    a = pool.alloc(2)
    assert a is not None
    pool.free(a)
    with pytest.raises(PoolError, match="double free"):
        pool.free(a)
    assert pool.available_size() == 4


def test_duplicate_ids_in_one_free_are_refused() -> None:
    pool = SlotAllocator(4)
    a = pool.alloc(2)
    assert a is not None
    with pytest.raises(PoolError, match="double free"):
        pool.free(torch.cat((a, a[:1])))


def test_foreign_ids_are_refused() -> None:
    pool = SlotAllocator(4, name="swa")
    with pytest.raises(PoolError, match="swa: foreign"):
        pool.free(torch.tensor([7]))


def test_state_pool_copy_on_write() -> None:
    pool = StatePool(4, conv_shape=(2, 3), ssm_shape=(5,))
    src, dst = pool.alloc(1), pool.alloc(1)
    assert src is not None and dst is not None
    pool.write(src, 2.0)
    pool.copy_from(src, dst)
    pool.write(dst, 1.0)
    assert float(pool.conv[src].sum()) == 2.0 * 6 and float(pool.conv[dst].sum()) == 3.0 * 6
    assert pool.state_bytes() == (6 + 5) * 4


def test_host_pool_has_a_buffer() -> None:
    pool = HostPool(16, row_elems=4)
    assert tuple(pool.buffer.shape) == (16, 4) and pool.available_size() == 16
