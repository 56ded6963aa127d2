"""Find scenarios by name (``mamba-lru``) or by import spec (``pkg.module:ATTR``).

A name maps to the module ``scenarios.<name with _>`` and its attribute
``SCENARIO``. Listing walks the ``scenarios`` package with pkgutil, so adding a
scenario is adding a module; nothing here imports ``refcache``.
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
import re
from dataclasses import dataclass

from harness.api import Scenario
from harness.errors import UsageError

PACKAGE = "scenarios"
ATTRIBUTE = "SCENARIO"
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*$")


@dataclass(frozen=True)
class Listing:
    """One entry of ``list_scenarios``: the scenario, or why it failed to import."""

    name: str
    scenario: Scenario | None
    error: str | None = None


def module_for(name: str) -> str:
    return f"{PACKAGE}.{name.replace('-', '_')}"


def scenario_names() -> list[str]:
    """Names of the modules in the scenarios package, without importing them."""
    try:
        package = importlib.import_module(PACKAGE)
    except ModuleNotFoundError:
        return []  # the scenarios package is optional: fixture specs still work
    found = pkgutil.iter_modules(getattr(package, "__path__", []))
    # Subpackages (``scenarios/workloads``) hold what scenarios are built from.
    names = (m.name for m in found if not (m.ispkg or m.name.startswith("_")))
    return sorted(name.replace("_", "-") for name in names)


def closest(word: str, candidates: list[str]) -> str:
    """`` (did you mean a or b?)``, or an empty string when nothing is close."""
    near = difflib.get_close_matches(word, candidates, n=3, cutoff=0.5)
    if not near:
        return ""
    return f" (did you mean {' or '.join(repr(n) for n in near)}?)"


def load_scenario(spec: str) -> Scenario:
    """The Scenario for a registered name or a ``module:attr`` spec."""
    if ":" in spec:
        module_name, _, attr = spec.partition(":")
        return _attribute(_import(module_name, spec), attr, spec)
    if not _NAME.match(spec):
        raise UsageError(f"{spec!r} is not a scenario name or a 'module:ATTR' spec.")
    return _attribute(_import(module_for(spec), spec), ATTRIBUTE, spec)


def _import(module_name: str, spec: str) -> object:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        # Only a missing scenario module is the user's typo; a missing
        # dependency inside an existing scenario is reported as what it is.
        if exc.name and module_name.startswith(exc.name):
            known = [listing.name for listing in list_scenarios()]
            listed = f"; known scenarios: {', '.join(known)}" if known else ""
            raise UsageError(f"unknown scenario {spec!r}{closest(spec, known)}{listed}.") from None
        raise UsageError(f"scenario {spec!r} needs a module that is missing: {exc.name}.") from None
    except Exception as exc:
        why = f"{type(exc).__name__}: {exc}"
        raise UsageError(f"scenario {spec!r} failed to import: {why}") from exc


def _attribute(module: object, attr: str, spec: str) -> Scenario:
    found = getattr(module, attr, None)
    if not isinstance(found, Scenario):
        raise UsageError(f"{spec!r} has no Scenario named {attr}.")
    return found


def list_scenarios() -> list[Listing]:
    """Every scenario of the package; one that fails to import says why.

    Modules without a ``SCENARIO`` (shared workload helpers) are skipped.
    """
    listings = []
    for name in scenario_names():
        try:
            module = _import(module_for(name), name)
        except UsageError as exc:
            listings.append(Listing(name, None, exc.message))
            continue
        if hasattr(module, ATTRIBUTE):
            try:
                listings.append(Listing(name, _attribute(module, ATTRIBUTE, name)))
            except UsageError as exc:
                listings.append(Listing(name, None, exc.message))
    return listings


def check_injections(scenario: Scenario, inject: tuple[str, ...]) -> None:
    """Refuse a regression the scenario does not know, naming the closest ones."""
    known = list(scenario.regressions)
    for name in inject:
        if name not in known:
            choices = ", ".join(known) if known else "none"
            raise UsageError(
                f"scenario {scenario.name!r} has no regression {name!r}"
                f"{closest(name, known)}; its regressions: {choices}."
            )
