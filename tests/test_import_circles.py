"""No module of the package imports, even for types only, a module that imports it back (the
client's Job and its streams, the engine and its consumer once did): a circle is read by a
Protocol on the side that needs the other (client/job.py's Settles, engine/consumer.py's
ConsumerEngine). Imports between a package and its own modules count as written."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "pyqueue"


def _graph() -> dict[str, set[str]]:
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        if "v1" in path.relative_to(PACKAGE).parts:
            continue  # generated
        name = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
        modules[name] = path
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("pyqueue"):
                submodules = {f"{node.module}.{a.name}" for a in node.names} & modules.keys()
                deps |= submodules if len(submodules) == len(node.names) else {node.module, *submodules}
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names} & modules.keys()
        graph[name] = (deps & modules.keys()) - {name}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_no_module_imports_one_that_imports_it_back() -> None:
    graph = _graph()
    assert "pyqueue.engine.engine" in graph and graph["pyqueue.client.client"], "the graph was read"
    assert _circles(graph) == []


def test_the_search_finds_a_circle() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


# What each layer may import besides itself (shared/DESIGN.md, "Layers"): the cluster is a layer
# beside the engine, under the server; the store knows no queue policy and no transport.
MAY_IMPORT = {
    "pyqueue.cluster": {"pyqueue.store", "pyqueue.v1", "pyqueue.histogram"},
    "pyqueue.store": {"pyqueue._native"},
}


def test_no_layer_imports_one_above_it() -> None:
    graph = _graph()
    for layer, allowed in MAY_IMPORT.items():
        for module, deps in graph.items():
            if module == layer or module.startswith(layer + "."):
                above = {d for d in deps if not d.startswith(layer) and not d.startswith(tuple(allowed))}
                assert not above, f"{module} imports {sorted(above)}"
