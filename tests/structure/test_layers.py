"""The package's layers, as docs/design/architecture.md draws them: a module imports only from its own
layer or the ones below, and no modules import each other in a cycle. Every import counts, also one
inside a function (deferred imports hide a dependency, they do not remove it); only imports under
``if TYPE_CHECKING:`` (type annotations) do not."""

from __future__ import annotations

import ast
from pathlib import Path

import ragsched

PACKAGE = Path(ragsched.__file__).parent

#: bottom first; a module belongs to the layer of the longest prefix it starts with
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("algebra", ("ragsched.algebra", "ragsched.ragged")),
    ("program", ("ragsched.program",)),
    ("schedule", ("ragsched.schedule",)),
    ("lowering", ("ragsched.codegen",)),
    ("backends", ("ragsched.codegen.target", "ragsched.codegen.backend", "ragsched.codegen.backends",
                  "ragsched.codegen.cores",
                  "ragsched.codegen.llvm", "ragsched.codegen.cuda", "ragsched.codegen.gpu")),
    ("runtime", ("ragsched.runtime",)),
    ("front end", ("ragsched.lang", "ragsched.functions", "ragsched.reference", "ragsched.pipeline_file")),
    ("tools", ("ragsched.autosched", "ragsched.cli", "ragsched.__main__", "ragsched")),
]


def layer_of(module: str) -> int:
    found = [(len(p), k) for k, (_, prefixes) in enumerate(LAYERS) for p in prefixes
             if module == p or module.startswith(p + ".")]
    if not found:
        raise AssertionError(f"module {module} is in no layer: add it to LAYERS and to architecture.md")
    return max(found)[1]


def modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _type_checking_only(tree: ast.AST) -> set[int]:
    """Line numbers of imports under ``if TYPE_CHECKING:``."""
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for inner in node.body:
                for n in ast.walk(inner):
                    if isinstance(n, (ast.Import, ast.ImportFrom)):
                        lines.add(n.lineno)
    return lines


def imports(module: str, path: Path, known: dict[str, Path]) -> dict[str, int]:
    """The package's modules that ``module`` imports, with the line of the first such import."""
    tree = ast.parse(path.read_text())
    skip = _type_checking_only(tree)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: dict[str, int] = {}
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)) or node.lineno in skip:
            continue
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            # "from pkg import mod" imports the module pkg.mod; "from mod import name" imports mod
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        for t in targets:
            if t in known and t != module:
                out.setdefault(t, node.lineno)
    return out


def graph() -> dict[str, dict[str, int]]:
    known = modules()
    return {m: imports(m, p, known) for m, p in known.items()}


def test_no_module_imports_from_a_layer_above_its_own():
    ups = []
    for m, deps in graph().items():
        for d, line in deps.items():
            if layer_of(d) > layer_of(m) and m != "ragsched":  # the package's __init__ re-exports everything
                ups.append(f"{m} (layer {LAYERS[layer_of(m)][0]}) imports {d} (layer {LAYERS[layer_of(d)][0]}) "
                           f"at line {line}")
    assert not ups, "imports that go up a layer:\n" + "\n".join(sorted(ups))


def test_no_import_cycles():
    g = {m: set(deps) for m, deps in graph().items()}
    g["ragsched"] = set()  # importing a submodule runs the package's __init__, which imports the rest
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(g[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    assert not cycles, "modules that import each other: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_every_module_is_in_a_layer_and_the_checker_sees_imports():
    g = graph()
    for m in g:
        layer_of(m)
    # the checker itself: relative, absolute and deferred imports are all seen
    assert "ragsched.algebra.expr" in g["ragsched.algebra.simplify"]
    assert "ragsched.runtime.kernel" in g["ragsched.lang"]  # imported inside Pipeline.compile
    assert "ragsched.schedule" in g["ragsched.autosched.space"]  # "from .. import schedule as S"
