"""The package's structure stays as DESIGN.md draws it: lower layers never import
upper ones (imports inside functions count too: a lazy import is still a
dependency), no import cycle between packages, and modules stay small."""

import ast
from pathlib import Path

import tilewright

ROOT = Path(tilewright.__file__).parent

# Rank of each top-level package or module: an import must go to an equal or lower rank.
# errors, config and targets are importable by anyone (targets imports only errors and config).
LAYERS = {
    "errors": 0, "config": 0, "stats": 0, "targets": 1,
    "ir": 2, "te": 3, "reference": 4, "ops": 4, "schedule": 4, "lower": 5, "codegen": 6, "build": 7,
    "runtime": 8, "analysis": 9, "space": 10, "records": 10, "search": 11, "workloads": 12,
    "backends": 13, "api": 14, "graph": 15, "intrin": 9, "kernels": 12, "cli": 16, "bench": 16, "models": 1,
    "__init__": 17,
}
# Documented exceptions: a module that may import above its package's rank, and why.
ALLOWED: dict[tuple[str, str], str] = {}
SIZE_CAP = 460  # lines; DESIGN's soft cap is ~400


def _part(path: Path) -> str:
    rel = path.relative_to(ROOT)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _imports(path: Path) -> set[str]:
    """Top-level tilewright parts this module imports (relative or absolute), TYPE_CHECKING blocks aside."""
    tree = ast.parse(path.read_text())
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for n in ast.walk(node))
    here = path.relative_to(ROOT).parts[:-1]
    out = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(here[:len(here) - node.level + 1])
                mod = base + (node.module.split(".") if node.module else [])
                names = [mod[0]] if mod else [a.name for a in node.names]
            elif node.module and node.module.startswith("tilewright."):
                names = [node.module.split(".")[1]]
            elif node.module == "tilewright":
                names = [a.name for a in node.names]
            else:
                continue
            out.update(n for n in names if n in LAYERS)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("tilewright."):
                    out.add(a.name.split(".")[1])
    return out


def test_layers_are_respected():
    bad = []
    for path in sorted(ROOT.rglob("*.py")):
        part = _part(path)
        for dep in _imports(path):
            if dep != part and LAYERS[dep] > LAYERS[part] and (part, dep) not in ALLOWED:
                bad.append(f"{path.relative_to(ROOT)} ({part}) imports {dep}")
    assert not bad, "imports from a higher layer:\n" + "\n".join(bad)


def test_no_cycles_between_packages():
    graph: dict[str, set[str]] = {}
    for path in ROOT.rglob("*.py"):
        graph.setdefault(_part(path), set()).update(d for d in _imports(path) if d != _part(path))
    seen, stack = set(), []

    def visit(n):
        if n in stack:
            raise AssertionError("import cycle: " + " -> ".join(stack[stack.index(n):] + [n]))
        if n in seen:
            return
        stack.append(n)
        for d in graph.get(n, ()):
            visit(d)
        stack.pop()
        seen.add(n)

    for n in graph:
        visit(n)


def test_modules_stay_small():
    big = [f"{p.relative_to(ROOT)}: {n} lines" for p in ROOT.rglob("*.py")
           if (n := len(p.read_text().splitlines())) > SIZE_CAP]
    assert not big, "modules over the size cap (split them by idea):\n" + "\n".join(big)


def test_every_package_says_what_it_may_import():
    for init in ROOT.glob("*/__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert "Imports" in doc or "imports" in doc, f"{init.relative_to(ROOT)}: docstring must say what it imports"


# Documented exceptions to target neutrality: a module of a target-neutral package that is one target's own part.
TARGET_SPECIFIC: dict[str, str] = {
    "search/vta_host_transforms.py": "the VTA target's host side: an embedding's layout transforms run on the "
                                     "accelerator's host CPU by definition, compiled by the C backend",
}


def test_target_neutral_modules_import_no_target_specific_module():
    """The tuner, the measurer and tw.build reach a target's pieces only through backends.py."""
    specific = ("cpu", "cuda", "opencl", "codegen.c", "build.cc", "nvcc", "runtime.kernel")
    neutral = [ROOT / "api.py", ROOT / "runtime" / "measure.py", *sorted((ROOT / "search").glob("*.py"))]
    neutral = [p for p in neutral if str(p.relative_to(ROOT)) not in TARGET_SPECIFIC]
    for path in neutral:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                mod = node.module or ""
                names = [mod] + [f"{mod}.{a.name}" for a in node.names]
                hits = [n for n in names if any(w in n.split(".") or n.endswith(w) for w in specific)]
                assert not hits, f"{path.relative_to(ROOT)} imports target-specific {hits}"
