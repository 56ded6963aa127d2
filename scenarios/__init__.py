"""Scenario scripts: one module per workload, each exposing ``SCENARIO``.

A module ``scenarios/foo_bar.py`` is the scenario ``foo-bar``. Helper modules
live in the ``workloads`` subpackage.
"""
