#!/usr/bin/env python3
"""Writes every C++ example and shell block of the README and of docs/ as a program, and a CMake
list of them.

Usage: extract_examples.py OUTPUT_DIR PAGE.md...

A ```cpp block is a whole program as printed, or (when the line before it
says so) the body of `main`; the page states which (the marker is an HTML
comment, so it does not show on the rendered page):

  <!-- example: body -->                 the body of main(), after
                                         #include <tagflow/tagflow.h>,
                                         #include <iostream> and
                                         `using namespace tagflow;`
  <!-- example: env TAGFLOW_SIM_GPUS=2 -->  run with that environment
  <!-- example: compile only: WHY -->    built, not run (say why)

Options combine with commas. A block without a marker must be a whole
program, or only #include lines (given an empty main). Writes
OUTPUT_DIR/<page>_example_<line>.cc and OUTPUT_DIR/examples.cmake, one
`tagflow_readme_example(<name> <file> <run: ON|OFF> [ENV...])` per block,
where <page> is `readme` for README.md and `docs_<name>` for docs/<name>.md.

A ```sh block runs as a bash script in a scratch directory where `build`
names the build tree, so that its `build/tools/tagflow ...` lines run as
printed. Every such block has a marker, whose directives combine with
semicolons:

  <!-- shell: not run: WHY -->              the whole block is not run
  <!-- shell: run -->                       run as printed
  <!-- shell: run; sub OLD => NEW -->       OLD replaced by NEW on every line
                                            (a reduced size: the text says so)
  <!-- shell: run; skip PREFIX: WHY -->     lines starting with PREFIX not run
  <!-- shell: run; env NAME=VALUE -->       run with that environment
  <!-- shell: run; needs mpi -->            only in a build with MPI

Writes OUTPUT_DIR/<page>_shell_<line>.sh and, in examples.cmake, one
`tagflow_readme_shell(<name> <file> <needs> [ENV...])` per block run.
"""

import pathlib
import re
import sys

MARKER = re.compile(r"^<!--\s*example:\s*(.*?)\s*-->\s*$")
SHELL_MARKER = re.compile(r"^<!--\s*shell:\s*(.*?)\s*-->\s*$")
SHELL_PREAMBLE = """#!/usr/bin/env bash
# {page} line {line}, written by tests/readme/extract_examples.py.
# Usage: bash {name}.sh BUILD_DIR
set -euo pipefail
build_dir=$(cd "$1" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
ln -s "$build_dir" build  # the README's commands say build/tools/tagflow
"""
BODY_PREAMBLE = "#include <tagflow/tagflow.h>\n#include <iostream>\n\nusing namespace tagflow;\n\n"


def fail(readme, line, message):
    sys.exit(f"{readme}:{line}: {message}")


def fenced_blocks(readme, fences, marker):
    """Yields (index of the first line, lines, marker text or None) per block opened by one of
    `fences`; the marker is the `marker` comment on the nearest non-blank line above it."""
    lines = pathlib.Path(readme).read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        if lines[i].strip() not in fences:
            i += 1
            continue
        start = i + 1
        end = start
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        if end == len(lines):
            fail(readme, start, f"a {lines[i].strip()} block that is never closed")
        before = start - 2
        while before >= 0 and not lines[before].strip():
            before -= 1
        m = marker.match(lines[before].strip()) if before >= 0 else None
        yield start, lines[start:end], m.group(1) if m else None
        i = end + 1


def examples(readme):
    """Yields (line, lines, options) per ```cpp block."""
    for start, code, marker in fenced_blocks(readme, ("```cpp",), MARKER):
        yield start, code, [o.strip() for o in (marker or "").split(",") if o.strip()]


def shell_blocks(readme):
    """Yields (line of the first command, lines, marker text or None) per ```sh block."""
    for start, code, marker in fenced_blocks(readme, ("```sh", "```bash"), SHELL_MARKER):
        yield start + 1, code, marker


def shell_script(readme, line, code, marker, name):
    """The script of a marked block, its needs and environment; None if not run."""
    if marker is None:
        fail(readme, line - 1, "a ```sh block without a marker: say <!-- shell: run --> (with "
             "sub/skip/env/needs as needed) or <!-- shell: not run: WHY -->")
    directives = [d.strip() for d in marker.split(";") if d.strip()]
    if directives and directives[0].startswith("not run:"):
        if not directives[0][len("not run:"):].strip():
            fail(readme, line - 1, "<!-- shell: not run: WHY --> needs its reason")
        return None
    if not directives or directives[0] != "run":
        fail(readme, line - 1, f"expected 'run' or 'not run: WHY' first, got '{marker}'")
    subs, skips, env, needs = [], [], [], "none"
    for d in directives[1:]:
        if d.startswith("sub ") and " => " in d:
            old, new = d[4:].split(" => ", 1)
            subs.append((old.strip(), new.strip()))
        elif d.startswith("skip ") and ":" in d and d.split(":", 1)[1].strip():
            skips.append(d[5:].split(":", 1)[0].strip())
        elif d.startswith("env ") and "=" in d:
            env.append(d[4:].strip())
        elif d == "needs mpi":
            needs = "mpi"
        else:
            fail(readme, line - 1, f"unknown shell directive '{d}'")
    body = []
    for text in code:
        if any(text.lstrip().startswith(p) for p in skips):
            body.append(f"# not run: {text}")
            continue
        for old, new in subs:
            text = text.replace(old, new)
        body.append(text)
    for old, _ in subs:
        if not any(old in t for t in code):
            fail(readme, line - 1, f"sub '{old}' matches no line of the block")
    preamble = SHELL_PREAMBLE.format(page=pathlib.Path(readme).name, line=line, name=name)
    return preamble + "\n".join(body) + "\n", needs, env


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


def page_name(page):
    """The prefix of a page's programs: readme, or docs_<name> for docs/<name>.md."""
    path = pathlib.Path(page)
    if path.name == "README.md":
        return "readme"
    return "docs_" + path.stem.replace("-", "_")


def page_entries(page, out):
    """Writes a page's programs and scripts into `out`; returns its lines of examples.cmake."""
    prefix = page_name(page)
    entries = []
    for line, code, options in examples(page):
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
                fail(page, line - 1, f"unknown example option '{option}'")
        name = f"{prefix}_example_{line}"
        source = out / f"{name}.cc"
        text = program(page, line, code, options)
        if not source.exists() or source.read_text(encoding="utf-8") != text:
            source.write_text(text, encoding="utf-8")
        entries.append(f"tagflow_readme_example({name} {source} {run} {' '.join(env)})")
    for line, code, marker in shell_blocks(page):
        name = f"{prefix}_shell_{line}"
        made = shell_script(page, line, code, marker, name)
        if made is None:
            continue
        text, needs, env = made
        script = out / f"{name}.sh"
        if not script.exists() or script.read_text(encoding="utf-8") != text:
            script.write_text(text, encoding="utf-8")
        entries.append(f"tagflow_readme_shell({name} {script} {needs} {' '.join(env)})")
    return entries


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: extract_examples.py OUTPUT_DIR PAGE.md...")
    out = pathlib.Path(sys.argv[1])
    pages = sys.argv[2:]
    out.mkdir(parents=True, exist_ok=True)
    entries = []
    for page in pages:
        entries += page_entries(page, out)
    # A block that moved or went leaves no program behind; the others keep their times.
    written = {e.split()[1] for e in entries}
    for stale in list(out.glob("*.cc")) + list(out.glob("*.sh")):
        if str(stale) not in written:
            stale.unlink()
    if not any(e.startswith("tagflow_readme_example(") for e in entries):
        fail(pages[0], 1, "no C++ example found")
    (out / "examples.cmake").write_text("\n".join(entries) + "\n", encoding="utf-8")

if __name__ == "__main__":
    main()
