#!/usr/bin/env python3
"""Checks the built objects against the layer rule (src/layers.txt): no layer's code calls
or reads a definition of a layer it may not use.

The include rule (scripts/check-layers.py, and the build) covers the internal headers; the
public API headers are one directory every layer sees, so this check covers what reaches
another layer through them: e.g. core calling make_platform() (platforms). The only
definitions a lower layer may reach upward are the hooks core declares for the layers
above to define (namespace attnsel::registry_startup, src/core/registry_startup.hpp).

  scripts/check-layer-symbols.py LAYER=FILE[:FILE...] ...

FILE is an object file or a static library of that layer (tests/layers/CMakeLists.txt
passes every layer's objects).
"""
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOOKS = ("attnsel::registry_startup::",)
STRONG = set("TDBR")  # text, data, bss, read-only data; weak (inline, template) definitions are header code


def read_table():
    table = {}
    for line in (ROOT / "src" / "layers.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            layer, *uses = line.split()
            table[layer] = set(uses)
    return table


def symbols(files):
    """(defined strong symbols, undefined symbols) of the files, demangled."""
    out = subprocess.run(["nm", "-C", "--no-sort", *files], capture_output=True, text=True, check=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        if not line.strip() or line.endswith(":"):
            continue
        if line.lstrip().startswith("U "):
            undefined.add(line.split("U ", 1)[1].strip())
            continue
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[1] in STRONG:
            defined.add(parts[2])
    return defined, undefined


def main(argv):
    if not argv or any("=" not in a for a in argv):
        print(__doc__, file=sys.stderr)
        return 2
    table = read_table()
    layers = {}
    for arg in argv:
        layer, files = arg.split("=", 1)
        if layer not in table:
            print(f"check-layer-symbols: '{layer}' is not a layer of src/layers.txt", file=sys.stderr)
            return 2
        layers[layer] = [f for f in files.split(":") if f]
    defined_in, undefined_in = {}, {}
    owner = {}
    for layer, files in layers.items():
        defined_in[layer], undefined_in[layer] = symbols(files)
        for s in defined_in[layer]:
            owner.setdefault(s, layer)
    problems = defaultdict(list)
    for layer, undefined in undefined_in.items():
        allowed = table[layer] | {layer}
        for s in sorted(undefined):
            used = owner.get(s)
            if used is None or used in allowed or s.startswith(HOOKS):
                continue
            problems[(layer, used)].append(s)
    for (layer, used), names in sorted(problems.items()):
        print(f"{layer} uses {len(names)} definition(s) of {used}, which src/layers.txt does not allow:", file=sys.stderr)
        for s in names[:10]:
            print(f"    {s}", file=sys.stderr)
    if problems:
        return 1
    print(f"check-layer-symbols: no layer uses a definition of a layer above it ({len(layers)} layers)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
