"""Importers: public incident datasets turned into ordinary schema-1 scenario files.

    python -m scenarios.importers petshop DATASET/petshop/high_traffic --out petshop-high.yaml
    python -m scenarios.importers itbench DATASET/itbench-sre --out itbench.yaml

Each importer reads a dataset folder in place and returns the scenario as a plain mapping
(`build`), which `write_scenario` dumps deterministically: the same folder gives
byte-identical output. Bad input raises :class:`DatasetError`, whose lines name the file
and what was expected; nothing is written then.
"""

from scenarios.importers.common import DatasetError, render_scenario, write_scenario

__all__ = ["DatasetError", "render_scenario", "write_scenario"]
