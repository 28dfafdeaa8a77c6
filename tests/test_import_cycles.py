"""No import cycles between the project's modules, lazy (function-level) imports included.

A cycle hides a missing module: two modules that need each other share something that belongs in a third. grimp
(import-linter's graph) sees every import statement, inside functions and ``TYPE_CHECKING`` blocks too.
"""

from __future__ import annotations

import grimp
import networkx as nx

PACKAGES = ("vista", "trajonco", "baselines", "benchmarks", "jobs")


def _import_graph() -> nx.DiGraph:
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    edges = nx.DiGraph()
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            edges.add_edge(module, imported)
    return edges


def _cycles(edges: nx.DiGraph) -> list[list[str]]:
    return [sorted(c) for c in nx.strongly_connected_components(edges) if len(c) > 1]


def test_the_packages_have_no_import_cycle():
    cycles = _cycles(_import_graph())
    assert cycles == [], "import cycles (move what both modules need into a third): " + "; ".join(
        " <-> ".join(c) for c in cycles)


def test_the_check_sees_a_cycle():
    edges = nx.DiGraph([("a.x", "a.y"), ("a.y", "a.x"), ("a.y", "a.z")])
    assert _cycles(edges) == [["a.x", "a.y"]]
