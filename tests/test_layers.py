"""Imports point one way: pipeline.py -> experiments/ -> stage scripts -> the nanorlhf package.

Every import statement of every module (those inside functions too) is read with `ast`;
an import that points up a layer or sideways within the stage scripts or the
experiments fails, naming the file and line.
"""
import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = {f[:-3] for f in os.listdir(ROOT) if f.endswith(".py") and f != "pipeline.py"}
EXPERIMENTS = {f[:-3] for f in os.listdir(os.path.join(ROOT, "experiments")) if f.endswith(".py")} - {"__init__"}


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
