"""The sampler names the config knows are the ones the worker's registry builds."""

from __future__ import annotations

from harness.worker import sampler_names, samplers


def test_the_names_are_the_registered_sampler_types_in_order() -> None:
    assert tuple(name for name, _ in samplers.REGISTRY) == sampler_names.SAMPLER_NAMES
    assert sampler_names.SAMPLER_NAMES == samplers.SAMPLER_NAMES


def test_the_attribution_names_are_the_registrys() -> None:
    assert sampler_names.ATTRIBUTION_SAMPLERS == samplers.ATTRIBUTION_SAMPLERS
    assert set(sampler_names.ATTRIBUTION_SAMPLERS) <= set(sampler_names.SAMPLER_NAMES)
