"""No import cycle among minibroker's modules, counting ``TYPE_CHECKING`` imports.

A cycle means two modules cannot be read, tested or replaced apart. The graph comes from
grimp (import-linter's engine); the cycles are its strongly connected components.
"""

from __future__ import annotations

import grimp

KNOWN_CYCLES: list[frozenset[str]] = [
    frozenset({"minibroker.broker.broker", "minibroker.broker.metrics_state"}),
    frozenset({"minibroker.broker.metrics", "minibroker.broker.replica_manager"}),
]
"""Cycles that exist today and are being removed. This list only shrinks: delete an
entry once its cycle is gone (the test fails on an entry that no longer matches)."""


def strongly_connected_components(graph: grimp.ImportGraph) -> list[frozenset[str]]:
    """The components of more than one module (Tarjan's algorithm, iterative so deep
    import chains cannot exhaust the recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[frozenset[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work: list[tuple[str, list[str]]] = []
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work.append((root, sorted(graph.find_modules_directly_imported_by(root))))
        while work:
            node, children = work[-1]
            if children:
                child = children.pop()
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, sorted(graph.find_modules_directly_imported_by(child))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: set[str] = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(frozenset(component))
    return components


def describe(cycle: frozenset[str], graph: grimp.ImportGraph) -> str:
    """The cycle's modules and the imports that close it, one per line."""
    lines = [", ".join(sorted(cycle))]
    for importer in sorted(cycle):
        for imported in sorted(graph.find_modules_directly_imported_by(importer) & cycle):
            lines.append(f"    {importer} imports {imported}")
    return "\n".join(lines)


def test_no_import_cycle_among_minibroker_modules_beyond_the_known_ones() -> None:
    graph = grimp.build_graph("minibroker", cache_dir=None)
    cycles = strongly_connected_components(graph)
    new = [c for c in cycles if c not in KNOWN_CYCLES]
    assert not new, "import cycles:\n" + "\n".join(describe(c, graph) for c in new)


def test_every_known_cycle_still_exists_so_the_allow_list_only_shrinks() -> None:
    cycles = strongly_connected_components(grimp.build_graph("minibroker", cache_dir=None))
    gone = [sorted(c) for c in KNOWN_CYCLES if c not in cycles]
    assert not gone, f"these cycles are gone, remove them from KNOWN_CYCLES: {gone}"


def test_the_cycle_finder_reports_a_cycle_and_names_its_imports() -> None:
    graph = grimp.ImportGraph()
    for module in ("a", "b", "c", "d"):
        graph.add_module(module)
    graph.add_import(importer="a", imported="b")
    graph.add_import(importer="b", imported="c")
    graph.add_import(importer="c", imported="a")
    graph.add_import(importer="c", imported="d")

    cycles = strongly_connected_components(graph)

    assert cycles == [frozenset({"a", "b", "c"})]
    assert "c imports a" in describe(cycles[0], graph)
