"""The shape of the code, checked: imports between modules go one way (no cycle, counting the
imports inside functions too, except those under `if TYPE_CHECKING`), no file over 500 lines,
analysis/ never imports harness/, and no registry-backed choice is compared by name outside its
registry."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("harness", "analysis")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _sources() -> dict[str, Path]:
    return {_module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or \
        (isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """Modules of our packages that `name` imports (anywhere in the file)."""
    is_pkg = path.name == "__init__.py"
    base = name.split(".") if is_pkg else name.split(".")[:-1]
    out: set[str] = set()

    def resolve(mod: str) -> str | None:
        while mod and mod not in known:
            mod = mod.rpartition(".")[0]
        return mod or None

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for other in child.orelse:
                    visit(other)
                continue
            if isinstance(child, ast.Import):
                for a in child.names:
                    if a.name.split(".")[0] in PACKAGES and (m := resolve(a.name)):
                        out.add(m)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    pkg = base[:len(base) - child.level + 1]
                    mod = ".".join(pkg + ([child.module] if child.module else []))
                else:
                    mod = child.module or ""
                if mod.split(".")[0] not in PACKAGES:
                    continue
                for a in child.names:  # `from . import algos` names a module
                    m = resolve(f"{mod}.{a.name}") if f"{mod}.{a.name}" in known else resolve(mod)
                    if m:
                        out.add(m)
            visit(child)

    visit(ast.parse(path.read_text()))
    out.discard(name)
    return out


def _graph() -> dict[str, set[str]]:
    src = _sources()
    known = set(src)
    return {name: _imports(name, path, known) for name, path in src.items()}


def _is_parent_package(a: str, b: str) -> bool:
    return b.startswith(a + ".")


def test_imports_form_no_cycle():
    """A package's __init__ importing its own submodules is the package, not an arrow back."""
    g = {m: {d for d in deps if not _is_parent_package(d, m) and not _is_parent_package(m, d)}
         for m, deps in _graph().items()}
    state: dict[str, int] = {}
    cycle: list[str] = []

    def dfs(m: str, stack: list[str]) -> bool:
        state[m] = 1
        for d in sorted(g.get(m, ())):
            if state.get(d) == 1:
                cycle.extend(stack[stack.index(d):] + [m, d] if d in stack else [m, d])
                return True
            if state.get(d) is None and dfs(d, stack + [m]):
                return True
        state[m] = 2
        return False

    for m in sorted(g):
        if state.get(m) is None and dfs(m, []):
            break
    assert not cycle, " -> ".join(cycle)


def test_the_graph_sees_the_known_arrows():
    """The checker itself finds real imports (a broken parser would pass the cycle test)."""
    g = _graph()
    assert "harness.loop.parts" in g["harness.loop.train"]
    assert "harness.registry" in g["harness.algos.kl"]
    assert "harness.loop.train" in g["harness.sweep.job"]    # inside RunJob.__call__
    assert "harness.algos" in g["harness.config.rules"]


def test_analysis_never_imports_harness():
    g = _graph()
    bad = {m: sorted(d for d in deps if d.startswith("harness")) for m, deps in g.items()
           if m.startswith("analysis")}
    assert not any(bad.values()), bad


def test_no_file_over_500_lines():
    long = {str(p.relative_to(ROOT)): n for p in _sources().values()
            if (n := len(p.read_text().splitlines())) > 500}
    assert not long, long


def test_the_loop_never_compares_a_choice_by_name():
    """No `x == "<registered name>"` (or !=, in) in the loop, its stages and the engines: the
    loop asks an entry's properties instead."""
    from harness import algos
    from harness.engines import ENGINES
    from harness.tasks import TASKS
    names = {n for reg in [*algos.REGISTRIES.values(), ENGINES, TASKS] for n in reg.names()}
    hits = []
    for name, path in _sources().items():
        if not name.startswith(("harness.loop", "harness.engines", "harness.models", "harness.batch")):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare):
                for c in [node.left, *node.comparators]:
                    if isinstance(c, ast.Constant) and c.value in names:
                        hits.append(f"{path.relative_to(ROOT)}:{node.lineno} {c.value!r}")
    assert not hits, hits
