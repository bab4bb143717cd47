#!/usr/bin/env python3
"""Checks every #include of src/ and tools/ against the layer rule (src/layers.txt).

A layer includes the internal headers (src/LAYER/...) of itself and of the layers its line
names (and inside a layer split into folders, such as kernels, a folder includes only the
folders its line names), and the public API headers (include/attnsel/) that belong to those layers: most
belong to core (the value types, the backend, registry, platform, selector and kernel
interfaces); PUBLIC_HEADER_LAYER names the others. The build enforces the internal part
(cmake/AttnselLayers.cmake); this script explains every violation, covers the public
headers too, checks that the table is acyclic and closed, and that docs/ARCHITECTURE.md
shows the same table.

  scripts/check-layers.py           check; exit status 1 with one line per violation
  scripts/check-layers.py --graph   print which layer includes which (the actual graph)
"""
import argparse
import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
SOURCE_SUFFIXES = {".c", ".cc", ".cpp", ".h", ".hpp", ".cu", ".cuh"}

# Each public header names the layer it belongs to on its first line ("// Layer: model"),
# so the ownership is read where the header is. "none" marks plugin_helper.hpp: it is for
# plugin authors (a plugin is built from the public headers alone), so no layer includes it.
OWNER_LINE = re.compile(r"^// Layer: (\w+)")


def public_header_layers():
    """{header name: its layer, or None for "none"}; exits naming a header without the line."""
    owners = {}
    for header in sorted((ROOT / "include" / "attnsel").iterdir()):
        first = header.read_text().split("\n", 1)[0]
        m = OWNER_LINE.match(first)
        if not m:
            raise SystemExit(f"include/attnsel/{header.name}: the first line must name the header's layer, "
                             f"e.g. '// Layer: core (src/layers.txt)'")
        owners[header.name] = None if m.group(1) == "none" else m.group(1)
    return owners


PUBLIC_HEADER_LAYER = public_header_layers()


def read_tables(path):
    """src/layers.txt: ({layer: [layers it may use]}, {folder: [folders it may use]}), in the
    file's order. The second table holds the rows naming a folder inside a layer
    ("kernels/mla"); the layer's top folder is named by the layer alone ("kernels")."""
    table, folders = {}, {}
    for line in path.read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        name, *uses = line.split()
        into = folders if "/" in name else table
        if name in into:
            raise SystemExit(f"{path}: '{name}' is listed twice")
        into[name] = uses
    return table, folders


def folder_of(rel_parts, folders):
    """The most specific folder of the folder table that holds a path (parts under src/), or None."""
    best = None
    for folder in folders:
        fparts = folder.split("/")
        if list(rel_parts[:len(fparts)]) == fparts:
            best = folder
    if best is None and folders:
        owner = next(iter(folders)).split("/")[0]
        if rel_parts and rel_parts[0] == owner:
            return owner
    return best


def folder_problems(folders):
    """The folder table is closed and acyclic like the layer table, and names real folders."""
    problems = []
    for folder, uses in folders.items():
        if not (ROOT / "src" / folder).is_dir():
            problems.append(f"src/layers.txt: the folder {folder} does not exist under src/")
        for used in uses:
            if used in folders:
                missing = [u for u in folders[used] if u not in uses and u != folder]
                if missing:
                    problems.append(f"src/layers.txt: {folder} uses {used}, which uses {', '.join(missing)}: "
                                    f"name them on {folder}'s line too")
                if folder in folders[used]:
                    problems.append(f"src/layers.txt: {folder} and {used} use each other (a cycle)")
    return problems


def check_folder_includes(folders):
    """Includes between the folders of one layer, against the folder table."""
    problems = []
    for path in sources():
        rel = path.relative_to(ROOT)
        if rel.parts[0] != "src":
            continue
        here = folder_of(rel.parts[1:-1], folders)
        if here is None:
            continue
        allowed = set(folders.get(here, [])) | {here}
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            m = INCLUDE.match(line)
            if not m or m.group(1).startswith("attnsel/"):
                continue
            parts = Path(m.group(1)).parts
            if not (ROOT / "src" / m.group(1)).exists():
                continue
            there = folder_of(parts[:-1], folders)
            if there is None or there in allowed:
                continue
            uses = ", ".join(folders.get(here, [])) or "nothing"
            problems.append(f"{rel}:{number}: #include \"{m.group(1)}\": {here} may use {uses} "
                            f"(src/layers.txt), not {there}")
    return problems


def table_problems(table):
    problems = []
    for layer, uses in table.items():
        for used in uses:
            if used not in table:
                problems.append(f"src/layers.txt: {layer} uses '{used}', which is not a layer")
            elif used == layer:
                problems.append(f"src/layers.txt: {layer} names itself")
            else:
                missing = [u for u in table[used] if u not in uses and u != layer]
                if missing:
                    problems.append(f"src/layers.txt: {layer} uses {used}, which uses {', '.join(missing)}: "
                                    f"name them on {layer}'s line too (the table is closed)")
                if layer in table[used]:
                    problems.append(f"src/layers.txt: {layer} and {used} use each other (a cycle)")
    for d in sorted(p.name for p in (ROOT / "src").iterdir() if p.is_dir()):
        if d not in table:
            problems.append(f"src/{d}/ is in no layer: add it to src/layers.txt")
    return problems


def layer_of(path):
    rel = path.relative_to(ROOT)
    return "tools" if rel.parts[0] == "tools" else rel.parts[1]


def public_owner(header):
    return PUBLIC_HEADER_LAYER.get(header, "core")  # headers generated into the build tree are core


def sources():
    for top in ("src", "tools"):
        for p in sorted((ROOT / top).rglob("*")):
            if p.suffix in SOURCE_SUFFIXES and p.is_file():
                yield p


def include_target(path, text, layers):
    """('public', header) | ('layer', layer) | ('local', None) | ('escape', None) | None (external)."""
    if text.startswith("attnsel/"):
        return "public", text[len("attnsel/"):]
    if ".." in Path(text).parts:
        return "escape", None
    first = Path(text).parts[0]
    if first in layers and first != "tools" and (ROOT / "src" / text).exists():
        return "layer", first
    if (path.parent / text).exists():
        return "local", None
    return None  # a third-party header written with quotes (Highway's "hwy/highway.h")


def check_includes(table):
    problems = []
    graph = defaultdict(lambda: defaultdict(int))
    for path in sources():
        layer = layer_of(path)
        allowed = set(table.get(layer, [])) | {layer}
        rel = path.relative_to(ROOT)
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            target = include_target(path, m.group(1), table)
            if target is None:
                continue
            kind, what = target
            where = f"{rel}:{number}: #include \"{m.group(1)}\""
            if kind == "escape":
                problems.append(f"{where}: a path with '..' leaves the layer's directory; name the header "
                                f"by its path under src/")
                continue
            if kind == "local":
                continue
            used = what if kind == "layer" else public_owner(what)
            if kind == "public" and used is None:
                problems.append(f"{where}: {what} is for plugin authors; the library uses src/plugin/ instead")
                continue
            if used != layer:
                graph[layer][used] += 1
            if used not in allowed:
                problems.append(f"{where}: {layer} may use only {', '.join(table.get(layer)) or 'itself'} "
                                f"(src/layers.txt), not {used}. Move the code to a layer that may use {used}, or "
                                f"let {used} supply it through an interface {layer} declares "
                                f"(docs/ARCHITECTURE.md, 'The layers and the dependency rule')")
    # The public headers themselves.
    for header in sorted((ROOT / "include" / "attnsel").iterdir()):
        owner = public_owner(header.name)
        if owner is None:
            continue
        allowed = set(table[owner]) | {owner}
        for number, line in enumerate(header.read_text().splitlines(), 1):
            m = INCLUDE.match(line)
            if m and m.group(1).startswith("attnsel/"):
                used = public_owner(m.group(1)[len("attnsel/"):])
                if used is not None and used not in allowed:
                    problems.append(f"include/attnsel/{header.name}:{number}: a {owner} header includes "
                                    f"{m.group(1)}, which belongs to {used}")
    return problems, graph


def docs_problems(table):
    """docs/ARCHITECTURE.md's table between the layers markers must say what src/layers.txt says."""
    doc = ROOT / "docs" / "ARCHITECTURE.md"
    text = doc.read_text()
    m = re.search(r"<!-- layers:begin -->(.*?)<!-- layers:end -->", text, re.S)
    if not m:
        return [f"{doc.relative_to(ROOT)}: no table between <!-- layers:begin --> and <!-- layers:end -->"]
    shown = {}
    for row in m.group(1).splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) < 2 or not cells[0].startswith("`"):
            continue
        layer = cells[0].strip("`").rstrip("/").split("/")[-1]
        uses = [] if cells[1] in ("", "—", "-") else [u.strip().strip("`").rstrip("/").split("/")[-1]
                                                       for u in cells[1].split(",")]
        shown[layer] = uses
    problems = []
    for layer, uses in table.items():
        if layer not in shown:
            problems.append(f"docs/ARCHITECTURE.md: the layer table lacks {layer}")
        elif sorted(shown[layer]) != sorted(uses):
            problems.append(f"docs/ARCHITECTURE.md: the table says {layer} uses {', '.join(shown[layer]) or 'nothing'}; "
                            f"src/layers.txt says {', '.join(uses) or 'nothing'}")
    for layer in shown:
        if layer not in table:
            problems.append(f"docs/ARCHITECTURE.md: the layer table shows {layer}, which src/layers.txt lacks")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--graph", action="store_true", help="print the include graph between layers")
    args = parser.parse_args()
    table, folders = read_tables(ROOT / "src" / "layers.txt")
    include_problems, graph = check_includes(table)
    include_problems += folder_problems(folders) + check_folder_includes(folders)
    if args.graph:
        for layer in table:
            edges = ", ".join(f"{u} ({graph[layer][u]})" for u in table if u in graph[layer])
            print(f"{layer:12} -> {edges or '-'}")
    problems = table_problems(table) + include_problems + docs_problems(table)
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f"check-layers: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    if not args.graph:
        print(f"check-layers: every #include of src/ and tools/ follows src/layers.txt ({len(table)} layers)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
