"""Mutation sites (``bench/mutant_sites.py``): which calls are found, and the recompiled
function with one of them replaced by ``pass``, on a small module written here; then one
mutant of SGLang 0.5.23's ``release_kv_cache`` built (not run) in a subprocess."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from bench import mutant_sites
from bench.mutant_sites import Site, Unfaithful
from bench.record import ROOT

SOURCE = textwrap.dedent('''\
    import functools

    def traced(func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            return func(*args, **kwargs)
        return wrapper

    class Pool:
        def __init__(self):
            self.free_slots = []
            self.__secret = []

        def free(self, slot):
            self.free_slots.append(slot)
            self.__secret.append(slot)

    class Base:
        def release(self, pool, slot):
            self.log.append("base")

    class Cache(Base):
        def __init__(self):
            self.log = []

        @traced
        def release(self, pool, slot):
            self.log.append("before")
            if slot >= 0:
                pool.free(slot)
            super().release(pool, slot)
            self.log.append("after")

        def keep(self, pool, slot):
            pool.free_slots.index(slot)

        def later(self, pool):
            def inner(slot):
                pool.free(slot)
            return inner

    def release_all(pool, slots):
        for slot in slots:
            pool.free(slot)
        x = pool.free_slots.pop()
        return x
    ''')


def load(tmp_path: Path) -> tuple[types.ModuleType, str]:
    path = tmp_path / "tiny.py"
    path.write_text(SOURCE)
    return load_source(path, SOURCE)


def site(qualname: str, source: str = SOURCE) -> Site:
    return next(s for s in mutant_sites.sites_in_source("tiny", source)
                if s.qualname == qualname)


def test_sites_are_give_back_call_statements_in_functions() -> None:
    sites = mutant_sites.sites_in_source("tiny", SOURCE)
    assert [(s.qualname, s.call) for s in sites] == [
        ("Cache.release", "pool.free(slot)"),
        ("Cache.release", "super().release(pool, slot)"),
        ("Cache.later.<locals>.inner", "pool.free(slot)"),
        ("release_all", "pool.free(slot)"),
    ]  # not the assignment's pop, not index(), not the appends
    line = SOURCE.splitlines().index(" " * 12 + "pool.free(slot)") + 1
    assert sites[0].key == f"tiny:Cache.release:{line}"
    assert [bool(s.nested) for s in sites] == [False, False, True, False]
    assert Site.parse_key(sites[3].key) == ("tiny", "release_all", sites[3].line)


def test_the_mutant_drops_one_call_and_keeps_the_rest(tmp_path: Path) -> None:
    module, filename = load(tmp_path)
    first = site("Cache.release")
    cache, pool = module.Cache(), module.Pool()
    original = mutant_sites.swap(module, SOURCE, filename, first.qualname, first.line)
    cache.release(pool, 3)  # through the decorator's wrapper, super() still resolves
    assert pool.free_slots == [] and cache.log == ["before", "base", "after"]
    assert module.Cache.release.__wrapped__.__code__.co_filename == filename
    module.Cache.release.__wrapped__.__code__ = original
    cache.release(pool, 4)
    assert pool.free_slots == [4]


def test_a_module_function_mutant_is_seen_by_every_holder(tmp_path: Path) -> None:
    module, filename = load(tmp_path)
    held = module.release_all  # as another module's "from tiny import release_all"
    loop = site("release_all")
    mutant_sites.swap(module, SOURCE, filename, loop.qualname, loop.line)
    pool = module.Pool()
    pool.free_slots = [9]
    assert held(pool, [1, 2]) == 9 and pool.free_slots == []


def test_what_cannot_be_recompiled_is_refused(tmp_path: Path) -> None:
    module, filename = load(tmp_path)
    nested = site("Cache.later.<locals>.inner")
    with pytest.raises(Unfaithful):
        mutant_sites.swap(module, SOURCE, filename, nested.qualname, nested.line)
    with pytest.raises(Unfaithful):  # no give-back call on that line
        mutant_sites.swap(module, SOURCE, filename, "release_all", 1)


def test_private_names_are_mangled_as_in_the_class(tmp_path: Path) -> None:
    line = " " * 8 + "self.__secret.append(slot)\n"
    assert line in SOURCE
    source = SOURCE.replace(line, line + " " * 8 + "self.__secret.clear()\n")
    path = tmp_path / "tiny.py"
    path.write_text(source)
    module, filename = load_source(path, source)
    dropped = site("Pool.free", source)
    # Unmangled, the kept append would look up self.__secret and fail.
    mutant_sites.swap(module, source, filename, dropped.qualname, dropped.line)
    pool = module.Pool()
    pool.free(5)
    assert pool._Pool__secret == [5]


def load_source(path: Path, source: str) -> tuple[types.ModuleType, str]:
    spec = importlib.util.spec_from_file_location("tiny", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, str(path)


BUILD_ONE = '''
import json
from pathlib import Path
from bench import mutant_sites, mutant_target
from scenarios.sglang import glue
module = glue.import_modules(["sglang.srt.mem_cache.common"])[0]
found = [s for s in mutant_sites.sites_in_source(module.__name__, Path(module.__file__).read_text())
         if s.qualname == "release_kv_cache" and "req_to_token_pool.free" in s.call]
func = module.release_kv_cache
source = Path(module.__file__).read_text()
code = mutant_sites.mutant_code(source, module.__file__, "release_kv_cache", found[0].line,
                                func.__code__, vars(module))
lines = lambda c: {row[2] for row in c.co_lines()}
print(json.dumps({"sites": len(found), "line": found[0].line,
                  "dropped": found[0].line in lines(func.__code__) - lines(code),
                  "kept": sorted(lines(func.__code__) - {found[0].line}) ==
                          sorted(lines(code) - {found[0].line}),
                  "why": mutant_target.try_mutant(found[0].key)}))
'''


def test_a_mutant_of_sglang_0_5_23_release_kv_cache_builds() -> None:
    if not (ROOT / ".sglang" / "0.5.23" / "site" / "sglang").is_dir():
        pytest.skip("SGLang 0.5.23 is not installed (make sglang-releases)")
    env = {**os.environ, "LEAK_HARNESS_SGLANG": "0.5.23", "PYTHONWARNINGS": "ignore",
           "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", BUILD_ONE], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120, check=True)
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["sites"] == 1 and got["why"] == ""
    assert got["kept"]  # every other line of the function is still there
