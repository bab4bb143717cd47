#!/usr/bin/env python3
"""Marks the public API in include/attnsel/*.hpp with ATTNSEL_API (include/attnsel/export.hpp).

libattnsel.so is built with hidden visibility, so a class or function of a public header
that is not marked is missing from the shared library (a link error for its users only;
the tests, which link the static library, would not notice). This script applies the
one rule mechanically, so nobody has to remember it:

  * every class or struct *definition* at namespace scope (column 0),
  * every non-template function declaration at namespace scope (column 0),
  * every `extern` variable
get ATTNSEL_API, and every header that then uses it includes attnsel/export.hpp.

  scripts/annotate-exports.py           rewrite the headers in place
  scripts/annotate-exports.py --check   exit 1 and list what is not marked (CI)
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
HEADERS = sorted((ROOT / "include" / "attnsel").glob("*.hpp"))
# The C API: every function declaration is marked ATTNSEL_C_API (defined in the header itself).
C_HEADERS = [ROOT / "include" / "attnsel" / "attnsel.h"]
C_FUNCTION = re.compile(r"^(?!ATTNSEL_C_API|typedef|#|/\*|\*| |\}|extern)[A-Za-z_][\w\s\*]*\b(attnsel_\w+)\(")
SKIP = {"export.hpp", "plugin_helper.hpp"}  # the macro itself; the header-only plugin SDK
NOT_A_FUNCTION = ("class ", "struct ", "enum ", "namespace", "using ", "template", "inline ", "typedef ",
                  "extern ", "static_assert", "constexpr ", "#", "}", "//", "/*", "friend ")
TYPE_DEFINITION = re.compile(r"^(class|struct) (?!ATTNSEL_API)(\w+)([^;]*)\{")
INCLUDE = '#include "attnsel/export.hpp"'


def annotate(text):
    lines = text.split("\n")
    out, missing = [], []
    previous = ""
    continuing = False  # inside a multi-line declaration that was just marked
    for number, line in enumerate(lines, 1):
        new = line
        if continuing:
            out.append(" " * len("ATTNSEL_API ") + line if line.strip() else line)
            continuing = not line.rstrip().endswith(";")
            previous = line
            continue
        if TYPE_DEFINITION.match(line):
            new = TYPE_DEFINITION.sub(r"\1 ATTNSEL_API \2\3{", line, count=1)
        elif line.startswith("extern ") and "ATTNSEL_API" not in line and not line.startswith('extern "C"'):
            new = "extern ATTNSEL_API " + line[len("extern "):]
        elif (line and not line[0].isspace() and "(" in line and not line.startswith(NOT_A_FUNCTION)
              and "ATTNSEL_API" not in line and not previous.startswith("template")
              and not line.rstrip().endswith(("{", "}"))):
            new = "ATTNSEL_API " + line
            continuing = not line.rstrip().endswith(";") and not line.split("//")[0].rstrip().endswith(";")
        if new != line:
            missing.append((number, line))
        out.append(new)
        if line.strip():
            previous = line
    result = "\n".join(out)
    if "ATTNSEL_API" in result and INCLUDE not in result:
        result = add_include(result)
        missing.append((0, "missing " + INCLUDE))
    return result, missing


def add_include(text):
    """Before the first attnsel include, else after the last system include."""
    lines = text.split("\n")
    own = [i for i, l in enumerate(lines) if l.startswith('#include "attnsel/')]
    if own:
        lines.insert(own[0], INCLUDE)
    else:
        system = [i for i, l in enumerate(lines) if l.startswith("#include <")]
        at = system[-1] + 1 if system else lines.index("#pragma once") + 1
        lines[at:at] = ["", INCLUDE]
    return "\n".join(lines)


def annotate_c(text):
    """Marks the C header's function declarations (column 0, `type attnsel_name(`)."""
    out, missing = [], []
    for number, line in enumerate(text.split("\n"), 1):
        if C_FUNCTION.match(line):
            missing.append((number, line))
            line = "ATTNSEL_C_API " + line
        out.append(line)
    return "\n".join(out), missing


def main():
    check = "--check" in sys.argv[1:]
    failed = False
    for path in C_HEADERS:
        result, missing = annotate_c(path.read_text())
        if not missing:
            continue
        if check:
            failed = True
            for number, line in missing:
                print(f"{path.relative_to(ROOT)}:{number}: not marked ATTNSEL_C_API: {line.strip()}")
        else:
            path.write_text(result)
            print(f"annotated {path.relative_to(ROOT)} ({len(missing)} declarations)")
    for path in HEADERS:
        if path.name in SKIP:
            continue
        text = path.read_text()
        result, missing = annotate(text)
        if not missing:
            continue
        if check:
            failed = True
            for number, line in missing:
                print(f"{path.relative_to(ROOT)}:{number}: not marked ATTNSEL_API: {line.strip()}")
        else:
            path.write_text(result)
            print(f"annotated {path.relative_to(ROOT)} ({len(missing)} declarations)")
    if failed:
        print("Run scripts/annotate-exports.py to mark them (the shared library exports only marked declarations).")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
