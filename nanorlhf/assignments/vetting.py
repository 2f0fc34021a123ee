"""What a region's body may use before it is graded: read with `ast`, never run.

A body is refused, with one plain line naming what it reached for, when it
- imports anything but math, numpy, torch's public modules, a few plain standard modules and the library's
  own algorithm modules (so no `tests`, no `importlib`, `os` or `sys`, no grader);
- reaches a private entry point (a name or attribute starting with `_`, `torch.ops`), the fused attention
  kernel (`scaled_dot_product_attention` and its kin), also through getattr with a computed name, or the
  machinery around the tests (`torch.testing`, `sys`, `os`, ... reached as attributes of another module);
- sets or deletes an attribute of anything but `self` (so no patching a module the tests use);
- runs text as code or opens files (`eval`, `exec`, `compile`, `__import__`, `open`, ...) or rebinds module
  names (`global`);
- uses a name that neither the body, its function in the course's file, that file's module level nor Python's
  builtins define: the grader splices only the region into the course's own file, so a helper or import written
  outside the markers (the fused kernel bound at import time, say) is not there.

It is a screen for the plain ways round the grader, not a sandbox: the child process is one too (grading.py).
"""
from __future__ import annotations

import ast
import builtins

IMPORTABLE = ("math", "numpy", "torch", "collections", "itertools", "functools", "operator", "typing",
              "dataclasses", "heapq", "nanorlhf")
FUSED = ("scaled_dot_product_attention", "multi_head_attention_forward", "MultiheadAttention",
         "flash_attention", "efficient_attention")
REFUSED = ("eval", "exec", "compile", "__import__", "open", "globals", "vars", "breakpoint", "input",
           "setattr", "delattr", "memoryview")
MACHINERY = ("testing", "sys", "os", "subprocess", "builtins", "importlib", "modules", "system")


def _dotted(node: ast.AST) -> str:
    """`torch._C._nn` for the attribute chain node (the innermost name, then each attribute)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    parts.append(node.id if isinstance(node, ast.Name) else "(...)")
    return ".".join(reversed(parts))


def _module(name: str) -> str | None:
    """Why a module may not be imported, or None."""
    top = name.split(".")[0]
    if top in ("tests", "conftest") or top.startswith("test_"):
        return f"imports {name}, from the tests"
    if top not in IMPORTABLE or name.startswith("nanorlhf.assignments"):
        return f"imports {name} (a region may import only {', '.join(IMPORTABLE)} and no grader)"
    private = next((p for p in name.split(".") if p.startswith("_")), None)
    return f"imports {name}, a private entry point ({private})" if private else None


def _attribute(name: str, dotted: str) -> str | None:
    """Why reaching attribute `name` (written `dotted`) is refused, or None."""
    if name in FUSED:
        return f"reaches {dotted}, the fused attention kernel"
    if name.startswith("_") or name == "ops":
        return f"reaches {dotted}, a private entry point"
    if name in MACHINERY:
        return f"reaches {dotted}, the machinery around the tests"
    return None


def problems(tree: ast.AST) -> list[str]:
    """Every import, private entry point or code-running call the body uses."""
    found, own = [], bound([tree])
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [why for alias in node.names if (why := _module(alias.name))]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                found.append(f"imports relatively (from {'.' * node.level}{node.module or ''})")
                continue
            found += [why for why in [_module(node.module or "")] if why]
            found += [why for a in node.names if (why := _attribute(a.name, f"{node.module}.{a.name}"))]
        elif isinstance(node, ast.Global):
            found.append(f"rebinds module names ({', '.join(node.names)}) with global")
        elif isinstance(node, ast.Attribute):
            found += [why for why in [_attribute(node.attr, _dotted(node))] if why]
            if isinstance(node.ctx, (ast.Store, ast.Del)) and not (isinstance(node.value, ast.Name)
                                                                   and node.value.id == "self"):
                found.append(f"sets {_dotted(node)}: a region may set attributes of self only")
        elif isinstance(node, ast.Name) and (node.id in REFUSED and node.id not in own or node.id.startswith("__")):
            found.append(f"uses {node.id}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr"):
            name = node.args[1] if len(node.args) > 1 else None
            if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
                found.append(f"calls {node.func.id} with a computed attribute name")
            elif why := _attribute(name.value, f"{node.func.id}(..., {name.value!r})"):
                found.append(why)
    return found


def bound(nodes) -> set[str]:
    """Names the nodes bind anywhere inside them: assignments, parameters, defs, imports, loop and with targets."""
    names = set()
    for node in (n for top in nodes for n in ast.walk(top)):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.Nonlocal):
            names |= set(node.names)
    return names


def defined_around(course_text: str, begin_line: int) -> set[str]:
    """The names a region starting at 0-based line begin_line can see in the course's file: the module level's
    (defs, classes, imports, assignments) and those of every function around the region."""
    tree = ast.parse(course_text)
    module = set()
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            module.add(stmt.name)
        else:
            module |= bound([stmt])
    around = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
              and n.lineno <= begin_line + 1 <= n.end_lineno]
    return module | bound(around) | set(dir(builtins))


def vet(body: str, course_text: str, begin_line: int, course_file: str) -> str | None:
    """None when the body may be graded; else one line saying what was refused (the first three problems)."""
    try:
        tree = ast.parse(body)
    except SyntaxError as e:
        return f"does not parse: {e.msg} (line {e.lineno} of the region)"
    found = problems(tree)
    known = defined_around(course_text, begin_line) | bound([tree])
    loaded = [n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]
    for name in dict.fromkeys(loaded):
        if name not in known and not name.startswith("__"):
            found.append(f"uses {name}, which {course_file} does not define (code outside the markers is not graded: "
                         "import or define it between them)")
    return "; ".join(found[:3]) or None
