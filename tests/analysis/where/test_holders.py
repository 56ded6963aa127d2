"""Owner paths, tensor views and explained cycles (harness.analysis.where.holders)."""

from __future__ import annotations

from harness.analysis.verdict import Judgement
from harness.analysis.where import where_it_grows
from harness.budgets import parse_budget
from tests.analysis.synth import MB
from tests.analysis.where.runs import heap_run


def test_owner_paths_and_tensor_views_come_from_the_owners_line() -> None:
    run = heap_run(200 * MB, [])
    run.owners = [{"paths": [
        {"type": "Tensor", "grew": 224, "sampled": 8, "agree": 4, "path": "Cache.tree -> Tensor",
         "others": [{"path": "Cache.kept -> list[40] -> Tensor", "agree": 3},
                    {"path": "Scheduler.running -> Tensor", "agree": 1}]},
        {"type": "dict", "grew": 125, "path": None, "why": "holders disagree"},
    ], "tensors": {"oversized": {"storages": 52, "storage_bytes": 1_110_000, "view_bytes": 480,
                                 "example": {"view_bytes": 8, "storage_bytes": 183_600,
                                             "path": "Cache.kept -> list[45] -> Tensor"}}}}]
    found = where_it_grows(run, [parse_budget("heap: 10 MB/h")],
                           [Judgement("leak", "confirmed-growth", "heap")], {"heap": 200 * MB})
    texts = [f.text for f in found]
    assert ("52 tensor storages (1.11 MB) are kept alive by 480 B of views; e.g. a 8 B view of "
            "a 184 KB storage, held by Cache.kept -> list[45] -> Tensor") in texts
    assert "Tensor (+224, 4 of 8 sampled) is held by Cache.tree -> Tensor" in texts
    assert "Tensor (+224, 3 of 8 sampled) is held by Cache.kept -> list[40] -> Tensor" in texts
    assert not any("Scheduler.running" in t or "dict (+125" in t for t in texts)


def test_owner_paths_through_the_driver_or_naming_no_holder_are_left_out() -> None:
    run = heap_run(200 * MB, [])
    run.owners = [{"paths": [
        {"type": "tuple", "grew": 190, "sampled": 8, "agree": 6,
         "path": "frame harness.worker.main.Worker.run (main.py:67).workload -> "
                 "CacheWorkload.scheduler -> Scheduler.idle_check -> IdleCheck.ledger -> tuple"},
        {"type": "UntypedStorage", "grew": 129, "sampled": 8, "agree": 8,
         "path": "UntypedStorage"},
        {"type": "list", "grew": 40, "sampled": 8, "agree": 8,
         "path": "frame harness.worker.main.Worker.run (main.py:67).workload -> "
                 "CacheWorkload.cache -> Cache.kept -> list"},
    ]}]
    found = where_it_grows(run, [parse_budget("heap: 10 MB/h")],
                           [Judgement("leak", "confirmed-growth", "heap")], {"heap": 200 * MB})
    owners = [f.text for f in found if f.kind == "owner"]
    assert owners == ["list (+40, 8 of 8 sampled) is held by workload -> CacheWorkload.cache -> "
                      "Cache.kept -> list"]


def test_an_owner_path_whose_holders_each_keep_one_is_not_where_a_type_grew() -> None:
    run = heap_run(200 * MB, [])
    run.owners = [{"paths": [
        {"type": "tuple", "grew": 164, "sampled": 8, "agree": 5, "tracked": True, "holds": 0,
         "path": "Cache.lru -> dict[4] -> TreeNode.key -> RadixKey.token_ids -> tuple"},
        {"type": "list", "grew": 372, "sampled": 8, "agree": 6, "tracked": True, "holds": 357,
         "path": "Cache.finished -> dict[7] -> list"},
    ]}]
    found = where_it_grows(run, [parse_budget("heap: 10 MB/h")],
                           [Judgement("leak", "confirmed-growth", "heap")], {"heap": 200 * MB})
    assert [f.owner for f in found if f.kind == "owner"] == ["Cache.finished -> dict[7] -> list"]
