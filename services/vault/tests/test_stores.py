"""Every concept's store is built the same way: from the vault's `Database`, never from a bare pool."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import memvault_vault
from memvault_vault.database import Database

pytestmark = pytest.mark.unit


def concept_stores() -> dict[str, type]:
    stores: dict[str, type] = {}
    for module_info in pkgutil.walk_packages(memvault_vault.__path__, "memvault_vault."):
        if not module_info.name.endswith(".store"):
            continue
        module = importlib.import_module(module_info.name)
        for name, value in vars(module).items():
            if inspect.isclass(value) and value.__module__ == module.__name__ and name.endswith("Store"):
                stores[f"{module.__name__}.{name}"] = value
    return stores


def test_every_concept_store_takes_the_database() -> None:
    stores = concept_stores()
    assert "memvault_vault.backup.store.BackupStore" in stores and len(stores) >= 10, sorted(stores)
    wrong = {}
    for name, store in stores.items():
        parameters = list(inspect.signature(store.__init__, eval_str=True).parameters.values())[1:]
        if [p.annotation for p in parameters] != [Database]:
            wrong[name] = [f"{p.name}: {p.annotation}" for p in parameters]
    assert not wrong, f"stores must take only `database: Database`: {wrong}"
