"""The package's import graph has layers and no circle (issue 18).

Every ``import`` in ``src/paddedcell`` counts, including the ones indented in a
function (deferred for start-up time, they still make one module need another).
A module may import its own package's modules and any lower layer's, never a
higher one's; and no chain of imports may come back to where it started.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "src" / "paddedcell"

#: Lowest first. A module belongs to the layer of its top-level package (or module).
LAYERS = (
    # shared leaves: the package's own names, exit codes, settings (config_base: the ones a
    # pass_mgr get reads), texts, audit, reaping, pass_mgr's grammar, the accept-with-backoff
    # helper (daemon socket and channels)
    {"paddedcell", "exits", "config", "config_base", "agent_text", "audit", "orphans",
     "pass_mgr_grammar", "accept"},
    # pure cores and the session's identity rules: no I/O framework, no daemon
    {"agent_session", "session", "redactor", "vault", "execspec", "egress"},
    {"supervisor"},  # runs commands (trio)
    {"restart"},  # the restart coordinator and job (uses the sandbox)
    {"daemon"},  # the HTTP edge over all of the above
    {"mcp", "remote"},  # clients of the daemon
    {"cli"},  # the command lines: the top
    {"demo"},
)


def _modules() -> dict[str, Path]:
    found = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imports(modules: dict[str, Path]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        targets = graph.setdefault(name, set())
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[:len(package.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                if target.split(".")[0] != "paddedcell":
                    continue
                for alias in node.names:  # `from . import procs` imports a module
                    sub = f"{target}.{alias.name}"
                    targets.add(sub if sub in modules else target)
            elif isinstance(node, ast.Import):
                targets.update(a.name for a in node.names if a.name.split(".")[0] == "paddedcell")
    return graph


def _layer(module: str) -> int:
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else "paddedcell"
    for index, layer in enumerate(LAYERS):
        if top in layer:
            return index
    raise AssertionError(f"{module} is in no layer: add {top!r} to LAYERS in {__file__}")


def test_every_module_is_in_a_layer():
    for module in _modules():
        _layer(module)


def test_no_module_imports_from_a_higher_layer():
    graph = _imports(_modules())
    upward = sorted(f"{a} -> {b}" for a, targets in graph.items() for b in targets
                    if _layer(b) > _layer(a))
    assert upward == [], "imports that point up a layer:\n" + "\n".join(upward)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


#: Circles known and owned, each with its way out; any other circle fails. Empty is the goal.
KNOWN_CIRCLES: list[list[str]] = []


def test_no_import_circle():
    graph = _imports(_modules())
    # A package's __init__ re-exporting its modules is not a circle with them, so the
    # package itself is left out of its own modules' edges.
    graph = {a: {b for b in targets if not a.startswith(b + ".")} for a, targets in graph.items()}
    assert [c for c in _cycles(graph) if c not in KNOWN_CIRCLES] == []


def test_the_checker_sees_a_circle_and_an_upward_import():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _layer("paddedcell.supervisor.channel") > _layer("paddedcell.session.client")
    assert _layer("paddedcell.cli.pcexec") > _layer("paddedcell.supervisor.channel")


def test_a_daemon_that_has_not_touched_a_vault_holds_no_cryptography(tmp_path):
    """cryptography's Rust module is ~5.5 MiB of the daemon's idle RSS (the 40 MB row of
    benchmarks/supervisor.py): the vault imports it at the first box it seals or opens,
    not when the daemon's routes and its start-up guard check import the vault."""
    import os
    import subprocess
    import sys

    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    code = ("import importlib, sys\nfrom paddedcell import config\nfrom paddedcell.daemon import app\n"
            "for name in app.ROUTE_MODULES:\n    importlib.import_module(name)\n"
            "app._say_guard(config.load())\n"
            "print('paddedcell.vault' in sys.modules, 'cryptography' in sys.modules)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PADDEDCELL_")}
    env["PADDEDCELL_HOME"] = str(home)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["True", "False"]
