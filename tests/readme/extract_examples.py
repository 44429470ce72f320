#!/usr/bin/env python3
"""Writes every C++ example of the README as a program, and a CMake list of them.

Usage: extract_examples.py README.md OUTPUT_DIR

A ```cpp block is a whole program as printed, or (when the line before it
says so) the body of `main`; the README states which (the marker is an HTML
comment, so it does not show on the rendered page):

  <!-- example: body -->                 the body of main(), after
                                         #include <tagflow/tagflow.h>,
                                         #include <iostream> and
                                         `using namespace tagflow;`
  <!-- example: env TAGFLOW_SIM_GPUS=2 -->  run with that environment
  <!-- example: compile only: WHY -->    built, not run (say why)

Options combine with commas. A block without a marker must be a whole
program, or only #include lines (given an empty main). Writes
OUTPUT_DIR/readme_example_<line>.cc and OUTPUT_DIR/examples.cmake, one
`tagflow_readme_example(<name> <file> <run: ON|OFF> [ENV...])` per block.
"""

import pathlib
import re
import sys

MARKER = re.compile(r"^<!--\s*example:\s*(.*?)\s*-->\s*$")
BODY_PREAMBLE = "#include <tagflow/tagflow.h>\n#include <iostream>\n\nusing namespace tagflow;\n\n"


def fail(readme, line, message):
    sys.exit(f"{readme}:{line}: {message}")


def examples(readme):
    lines = pathlib.Path(readme).read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        if lines[i].strip() != "```cpp":
            i += 1
            continue
        start = i + 1
        end = start
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        if end == len(lines):
            fail(readme, start, "a ```cpp block that is never closed")
        before = start - 2
        while before >= 0 and not lines[before].strip():
            before -= 1
        options = []
        if before >= 0:
            m = MARKER.match(lines[before].strip())
            if m:
                options = [o.strip() for o in m.group(1).split(",") if o.strip()]
        yield start, lines[start:end], options
        i = end + 1


def program(readme, line, code, options):
    text = "\n".join(code) + "\n"
    body = "body" in options
    if body:
        return BODY_PREAMBLE + "int main() {\n" + text + "}\n"
    if "int main(" in text:
        return text
    if all(not l.strip() or l.lstrip().startswith(("#", "//")) for l in code):
        return text + "\nint main() {}\n"
    fail(readme, line, "a C++ example without main(): make it a whole program, or mark it "
         "<!-- example: body --> and say in the text that it is a main body")


def main():
    readme, out = sys.argv[1], pathlib.Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    entries = []
    for line, code, options in examples(readme):
        run = "ON"
        env = []
        for option in options:
            if option == "body":
                continue
            if option.startswith("compile only:") and option[len("compile only:"):].strip():
                run = "OFF"
            elif option.startswith("env ") and "=" in option:
                env.append(option[4:].strip())
            else:
                fail(readme, line - 1, f"unknown example option '{option}'")
        name = f"readme_example_{line}"
        source = out / f"{name}.cc"
        text = program(readme, line, code, options)
        if not source.exists() or source.read_text(encoding="utf-8") != text:
            source.write_text(text, encoding="utf-8")
        entries.append(f"tagflow_readme_example({name} {source} {run} {' '.join(env)})")
    if not entries:
        fail(readme, 1, "no C++ example found")
    (out / "examples.cmake").write_text("\n".join(entries) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
