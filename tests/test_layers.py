"""Imports point one way: pipeline.py -> experiments/ -> stage scripts -> the nanorlhf package, and inside the
package, wing by wing: the course, the labeling page, the evaluations, interop and the world above the
algorithms at nanorlhf/'s top, and those above nanorlhf/infra/, which imports nothing of the rest.

Every import statement of every module (those inside functions too) is read with `ast`; an import that
points up a layer or a wing, sideways within the stage scripts or the experiments, or that closes a cycle
of package modules, fails, naming the file and line.
"""
import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = {f[:-3] for f in os.listdir(ROOT) if f.endswith(".py") and f != "pipeline.py"}
EXPERIMENTS = {f[:-3] for f in os.listdir(os.path.join(ROOT, "experiments")) if f.endswith(".py")} - {"__init__"}

# the package's wings and what each may import besides itself (the standard library and third-party aside);
# "core" is the modules directly in nanorlhf/: the algorithms a learner reads first
WINGS = {
    "infra": set(),                                                   # config, cli, files, devices, logs
    "core": {"infra"},                                                # model, sampling, SFT, RM, PPO, DPO, ...
    "world": {"core", "infra"},                                       # the generated world, labelers, judge
    "interop": {"core", "infra"},                                     # Hugging Face export, TRL and HH pairs
    "evals": {"world", "core", "infra"},                              # the paper's evaluations, report.md
    "labelapp": {"interop", "world", "core", "infra"},                # the labeling page
    "assignments": {"infra"},                                         # the course and its grader
}


def layer_of(module: str) -> str | None:
    """The layer a dotted module name belongs to (None: the standard library or a third-party package)."""
    top = module.split(".")[0]
    if top == "nanorlhf":
        return "package"
    if top == "experiments":
        return "experiment"
    if top == "pipeline":
        return "pipeline"
    return "script" if top in SCRIPTS else None


# what each layer may import, besides the standard library and third-party packages
ALLOWED = {"package": {"package"}, "script": {"package"}, "experiment": {"package", "script"},
           "pipeline": {"package", "script", "experiment"}}


def imported_modules(path: str):
    """(line, dotted module name) of every absolute import in a file; `from experiments import x` gives
    experiments.x."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield from ((node.lineno, f"{node.module}.{a.name}") for a in node.names)


def modules():
    """(path, own layer) of every Python file outside tests/."""
    for d, dirs, files in os.walk(ROOT):
        dirs[:] = [x for x in dirs if not x.startswith(".") and x not in ("tests", "out", "data", "docs", "__pycache__")]
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(d, f)
                name = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                yield path, layer_of(name)


def test_imports_point_down():
    """No package module imports a script or experiment, no stage script imports another script or an
    experiment, no experiment imports another experiment or the pipeline."""
    bad = []
    for path, layer in modules():
        assert layer is not None, f"{path}: not in a known layer (package, script, experiment, pipeline)"
        for line, mod in imported_modules(path):
            target = layer_of(mod)
            if target is None:
                continue
            if target not in ALLOWED[layer] or (target == layer and layer != "package"):
                bad.append(f"{os.path.relpath(path, ROOT)}:{line} ({layer}) imports {mod} ({target})")
    assert not bad, "imports that point up or sideways:\n" + "\n".join(bad)


def test_layer_check_catches_an_upward_import(tmp_path):
    """The checker itself: a package-style import of a stage script is seen and classed as a script."""
    p = tmp_path / "m.py"
    p.write_text("def f():\n    from train_ppo import Config\n    import experiments.ablate\n")
    found = [(line, layer_of(m)) for line, m in imported_modules(str(p))]
    assert found == [(2, "script"), (3, "experiment")]
    assert "train_ppo" in SCRIPTS and "ablate" in EXPERIMENTS and "pipeline" not in SCRIPTS


# -----------------------------------------------------------------------------
# inside the package: wings and cycles


def package_graph(root: str) -> dict[str, list[tuple[int, str]]]:
    """Every module of root/nanorlhf -> [(line, package module it imports)], relative imports resolved and
    `from pkg import mod` read as an import of pkg.mod when that is a module."""
    def name_of(path):
        n = os.path.relpath(path, root)[:-3].replace(os.sep, ".")
        return n[:-len(".__init__")] if n.endswith(".__init__") else n

    def is_module(m):
        p = os.path.join(root, *m.split("."))
        return os.path.isfile(p + ".py") or os.path.isfile(os.path.join(p, "__init__.py"))

    graph = {}
    for d, dirs, files in os.walk(os.path.join(root, "nanorlhf")):
        dirs[:] = [x for x in dirs if x != "__pycache__"]
        for f in (f for f in files if f.endswith(".py")):
            path = os.path.join(d, f)
            me = name_of(path)
            pkg = me if f == "__init__.py" else me.rpartition(".")[0]
            out = []
            for node in ast.walk(ast.parse(open(path, encoding="utf-8").read(), path)):
                if isinstance(node, ast.Import):
                    out += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "nanorlhf"]
                elif isinstance(node, ast.ImportFrom):
                    base = pkg.split(".")[:len(pkg.split(".")) - node.level + 1] if node.level else []
                    mod = ".".join(base + ([node.module] if node.module else []))
                    if mod.split(".")[0] == "nanorlhf":
                        out += [(node.lineno, f"{mod}.{a.name}" if is_module(f"{mod}.{a.name}") else mod)
                                for a in node.names]
            graph[me] = out
    return graph


def wing_of(module: str, root: str) -> str:
    """nanorlhf.<wing>.x -> wing; a module directly in nanorlhf/ (and the package itself) -> core."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and os.path.isdir(os.path.join(root, *parts))) else "core"


def wing_violations(root: str, wings=WINGS) -> list[str]:
    """Imports from one wing into a wing it may not import (or an unknown wing), as 'file:line a -> b'."""
    bad = []
    for mod, imports in package_graph(root).items():
        own = wing_of(mod, root)
        for line, target in imports:
            other = wing_of(target, root)
            if own not in wings or (other != own and other not in wings[own]):
                bad.append(f"{mod}:{line} ({own}) imports {target} ({other})")
    return bad


def cycles(root: str) -> list[list[str]]:
    """Import cycles among the package's modules, each as the list of modules around it."""
    graph = {m: sorted({t for _, t in imports}) for m, imports in package_graph(root).items()}
    state, stack, found = {}, [], []

    def visit(u):
        state[u] = "open"
        stack.append(u)
        for v in graph.get(u, []):
            if state.get(v) == "open":
                found.append(stack[stack.index(v):] + [v])
            elif v in graph and v not in state:
                visit(v)
        stack.pop()
        state[u] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m)
    return found


def test_package_wings_import_down():
    """Inside nanorlhf/, each wing imports only the wings below it: nanorlhf/infra/ nothing of the rest, the
    algorithms at the top only infra, and so on up to the course and the labeling page."""
    bad = wing_violations(ROOT)
    assert not bad, "imports against the package's wings (tests/test_layers.py WINGS):\n" + "\n".join(bad)


def test_package_has_no_import_cycle():
    """No package module imports itself through others (a cycle makes the layering meaningless)."""
    found = cycles(ROOT)
    assert not found, "import cycles:\n" + "\n".join(" -> ".join(c) for c in found)


def test_package_top_holds_the_algorithms_only():
    """At most about 20 modules sit directly in nanorlhf/; everything else lives in a wing."""
    top = [f for f in os.listdir(os.path.join(ROOT, "nanorlhf")) if f.endswith(".py")]
    assert len(top) <= 20, sorted(top)


def test_wing_and_cycle_checks_catch_what_they_guard(tmp_path):
    """The checkers themselves, on a small package: an infra module importing an algorithm, a relative
    import out of a wing, and a two-module cycle are each found."""
    pkg = tmp_path / "nanorlhf"
    for d in ("", "infra", "world"):
        (pkg / d).mkdir(exist_ok=True)
        (pkg / d / "__init__.py").write_text("")
    (pkg / "infra" / "cli.py").write_text("def f():\n    from nanorlhf.ppo import gae\n")
    (pkg / "infra" / "config.py").write_text("")
    (pkg / "ppo.py").write_text("from nanorlhf.infra import config\nfrom nanorlhf import masks\n")
    (pkg / "masks.py").write_text("import nanorlhf.ppo\n")
    (pkg / "world" / "judge.py").write_text("from .. import ppo\nfrom ..infra.cli import f\n")
    bad = wing_violations(str(tmp_path))
    assert bad == ["nanorlhf.infra.cli:2 (infra) imports nanorlhf.ppo (core)"]
    assert sorted(sorted(c[:-1]) for c in cycles(str(tmp_path))) == [["nanorlhf.masks", "nanorlhf.ppo"]]
    strict = {**WINGS, "world": {"infra"}}
    assert "nanorlhf.world.judge:1 (world) imports nanorlhf.ppo (core)" in wing_violations(str(tmp_path), strict)
