"""Test doubles shared by the sampler tests: tensors duck-typed like torch's."""

from __future__ import annotations


class FakeStorage:
    def __init__(self, ptr: int, nbytes: int) -> None:
        self._ptr, self._nbytes = ptr, nbytes

    def data_ptr(self) -> int:
        return self._ptr

    def nbytes(self) -> int:
        return self._nbytes


class FakeTensor:
    """Duck-typed like a torch tensor: only ``untyped_storage`` matters."""

    def __init__(self, storage: FakeStorage) -> None:
        self._storage = storage
        self.owner: object = None

    def untyped_storage(self) -> FakeStorage:
        return self._storage
