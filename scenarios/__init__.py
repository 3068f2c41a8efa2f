"""Scenario files (schema 1): records, strict loader, validator and shipped scenarios.

    import scenarios
    s = scenarios.load("pool-vs-deploy")      # a shipped name or a file path
    scenarios.shipped()                       # names of shipped scenarios

Invalid input raises :class:`ScenarioError`; its ``problems`` are lines
``FILE: PATH: message``. ``python -m scenarios.validate FILE_OR_NAME...`` checks files.
"""

from scenarios.loader import load, load_all, loads, shipped
from scenarios.schema import Interlude, RootCause, Round, Scenario, ScenarioError

__all__ = [
    "Interlude",
    "RootCause",
    "Round",
    "Scenario",
    "ScenarioError",
    "load",
    "load_all",
    "loads",
    "shipped",
]
