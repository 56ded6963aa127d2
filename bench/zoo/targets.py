"""The zoo's cache factories, one per kind, for ``--target bench.zoo.targets:<name>``.

    leak-harness run radix-steady --target bench.zoo.targets:dict_retention --duration 60s

Every factory has the signature of ``refcache.factories.radix_cache`` plus its
kind's options (``rate`` in bytes per hour for the paced leaks, tokens per
hour for ``lock_leak``); the scenario's ``kv_size`` and ``page_size`` pass
through. A run overrides them with ``options={"cache": {"rate": 50e6}}``
(``RunConfig.options``). ``ZOO`` describes each target for the benchmark:
its kind, the site it leaks at, its default rate and unit, whether it is a
leak, and the load options it needs (the idle leak needs idle gaps).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.zoo.base import ZooCache, check_no_options
from bench.zoo.native_leaks import MmapPages, NativeMalloc, TensorViews
from bench.zoo.non_leaks import (
    MEMO_ENTRIES,
    MEMO_VALUE_BYTES,
    SAWTOOTH_BYTES,
    SAWTOOTH_PERIOD_S,
    BoundedMemo,
    FillingCache,
    Sawtooth,
)
from bench.zoo.python_leaks import DictRetention, EvictedCycles, SmallObjects
from bench.zoo.resource_leaks import FileLeak, ThreadLeak
from bench.zoo.state_leaks import IdleLeak, LockLeak

MB = 1e6
# tokens: radix-steady's traffic caches ~60k new tokens/s while nothing is evicted
# (measured in-process), so 4M tokens fill in about 70 s: growing for a 60 s run,
# flat for most of a 10 min one.
FILLING_CAPACITY = 1 << 22


@dataclass(frozen=True)
class ZooTarget:
    name: str
    kind: str
    site: str
    leaks: bool
    default_rate: float  # per hour, in ``unit``; 0 for the non-leaks
    unit: str = "B"  # of the rate and the ledger: "B", "tok", "threads" or "fds"
    load: Mapping[str, Any] = field(default_factory=dict)  # scheduler Load overrides
    # Words that name the culprit in "Where it grows": the attribute that keeps
    # it, the class, the site's file, or for native memory the word itself.
    culprit: tuple[str, ...] = ()

    @property
    def spec(self) -> str:
        return f"{__name__}:{self.name}"


ZOO: tuple[ZooTarget, ...] = (
    ZooTarget("dict_retention", "dict/list retention", "cache_finished_req", True, 200 * MB,
              culprit=("finished_tokens", "python_leaks.py")),
    ZooTarget("tensor_views", "tensors kept alive", "insert", True, 200 * MB,
              culprit=("kept_views", "native_leaks.py")),
    ZooTarget("native_malloc", "native malloc", "extend_request", True, 200 * MB,
              culprit=("native memory",)),
    ZooTarget("evicted_cycles", "cycles of evicted nodes", "evict", True, 500 * MB,
              culprit=("EvictRecord", "python_leaks.py")),
    ZooTarget("lock_leak", "lock leak", "dec_lock_ref", True, 120_000, unit="tok",
              culprit=("nodes stay locked",)),
    ZooTarget("idle_leak", "idle-only leak", "check_hicache_events", True, 200 * MB,
              load={"pattern": "idle-gaps"},
              culprit=("audits", "state_leaks.py")),
    ZooTarget("small_objects", "many small objects", "match_prefix", True, 200 * MB,
              culprit=("match_log", "python_leaks.py")),
    ZooTarget("mmap_pages", "anonymous mmap pages", "evict", True, 200 * MB,
              culprit=("mappings", "native_leaks.py")),
    ZooTarget("thread_leak", "threads never joined", "cache_finished_req", True, 1800,
              unit="threads", culprit=("ThreadLeak._flush",)),
    ZooTarget("file_leak", "files never closed", "evict", True, 1800, unit="fds",
              culprit=("open file descriptors", "file in")),
    ZooTarget("fixed", "fixed cache", "-", False, 0.0),
    ZooTarget("bounded_memo", "bounded memo", "match_prefix", False, 0.0),
    ZooTarget("sawtooth", "sawtooth", "check_hicache_events", False, 0.0),
    ZooTarget("filling_cache", "cache filling to capacity", "-", False, 0.0),
    ZooTarget("slow_leak", "slow leak below budget", "cache_finished_req", False, 10 * MB),
)
BY_NAME = {t.name: t for t in ZOO}


def _paced(cls: type[ZooCache], name: str, quantum: int | None = None) -> Callable[..., ZooCache]:
    """A factory for a paced leak: ``rate`` defaults to the kind's rate in ``ZOO``."""
    target = BY_NAME[name]

    def factory(
        inject: Sequence[str] = (),
        kv_size: int = 8192,
        page_size: int = 1,
        rate: float = target.default_rate,
        **options: Any,
    ) -> ZooCache:
        check_no_options(name, options)
        extra = {} if quantum is None else {"quantum": quantum}
        return cls(kv_size, page_size, inject, rate=rate, **extra)

    factory.__name__ = factory.__qualname__ = name
    factory.__doc__ = f"{target.kind} at ``{target.site}`` ({cls.__name__})."
    return factory


dict_retention = _paced(DictRetention, "dict_retention")
tensor_views = _paced(TensorViews, "tensor_views", quantum=16 << 10)
native_malloc = _paced(NativeMalloc, "native_malloc")
evicted_cycles = _paced(EvictedCycles, "evicted_cycles", quantum=64 << 10)
lock_leak = _paced(LockLeak, "lock_leak", quantum=1)
idle_leak = _paced(IdleLeak, "idle_leak")
small_objects = _paced(SmallObjects, "small_objects")
mmap_pages = _paced(MmapPages, "mmap_pages")
thread_leak = _paced(ThreadLeak, "thread_leak", quantum=1)
file_leak = _paced(FileLeak, "file_leak", quantum=1)
slow_leak = _paced(DictRetention, "slow_leak")


def fixed(inject: Sequence[str] = (), kv_size: int = 8192, page_size: int = 1,
          **options: Any) -> ZooCache:
    """The control: the plain radix cache with a ledger that stays at 0."""
    check_no_options("fixed", options)
    return ZooCache(kv_size, page_size, inject)


def bounded_memo(inject: Sequence[str] = (), kv_size: int = 8192, page_size: int = 1,
                 memo_entries: int = MEMO_ENTRIES, value_bytes: int = MEMO_VALUE_BYTES,
                 **options: Any) -> BoundedMemo:
    """A memo that fills within seconds, then holds ``memo_entries`` values."""
    check_no_options("bounded_memo", options)
    return BoundedMemo(kv_size, page_size, inject, memo_entries=memo_entries,
                       value_bytes=value_bytes)


def sawtooth(inject: Sequence[str] = (), kv_size: int = 8192, page_size: int = 1,
             sawtooth_bytes: int = SAWTOOTH_BYTES, period_s: float = SAWTOOTH_PERIOD_S,
             **options: Any) -> Sawtooth:
    """A ``sawtooth_bytes`` buffer held for half of every ``period_s``."""
    check_no_options("sawtooth", options)
    return Sawtooth(kv_size, page_size, inject, sawtooth_bytes=sawtooth_bytes,
                    period_s=period_s)


def filling_cache(inject: Sequence[str] = (), kv_size: int = 8192, page_size: int = 1,
                  capacity: int = FILLING_CAPACITY, **options: Any) -> FillingCache:
    """The scenario's ``kv_size`` is raised to ``capacity`` tokens, so the tree keeps growing."""
    check_no_options("filling_cache", options)
    return FillingCache(max(kv_size, capacity), page_size, inject)
