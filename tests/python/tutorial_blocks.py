"""The Python code blocks of the MXNet GPU tutorials, as they run on tagflow.

Each tutorial is read as it is written: Markdown blocks fenced as
```{.python .input}``` (with the outputs a notebook recorded, fenced as
```{.json .output}```), or reStructuredText ``.. code:: python`` blocks of
D2L's MXNet tabs and of no tab. The only change made to the code is the import
line: ``mxnet`` becomes ``tagflow``. The lines that cannot run anywhere but
in MXNet's own world are left out, each with its reason (SKIPPED_LINES,
SKIPPED_BLOCKS).
"""

import json
import re
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Block:
    tutorial: str
    number: int  # position among the tutorial's Python blocks
    code: str
    # What the notebook showed: the value of the last expression
    # ("text/plain") and what was printed to stdout.
    result: str = None
    stdout: str = None
    skipped: list = field(default_factory=list)


# Lines that are not Python, or that need what is not tagflow's to give.
SKIPPED_LINES = {
    "!nvidia-smi": "a shell command for IPython, not Python (it asks the NVIDIA driver)",
    "from d2l import mxnet as d2l":
        "D2L's helper package is not a tagflow module; the blocks of this tutorial that "
        "use it (d2l.add_to_class) are skipped",
}

# Whole blocks, by a line they contain.
SKIPPED_BLOCKS = {
    "pip.main(['show', pkg])":
        "it asks pip which MXNet wheel is installed (and pip.main was removed in pip 10)",
    "@d2l.add_to_class(d2l.Trainer)":
        "it extends D2L's Trainer class, which comes from the d2l package (see above)",
}


def to_tagflow(code):
    """The code with its mxnet imports turned into tagflow imports."""
    code = re.sub(r"^(\s*)import mxnet as mx\b", r"\1import tagflow as mx", code, flags=re.M)
    code = re.sub(r"^(\s*)import mxnet\b", r"\1import tagflow as mxnet", code, flags=re.M)
    code = re.sub(r"^(\s*)from mxnet(\.[\w.]+)? import", r"\1from tagflow\2 import", code, flags=re.M)
    return code


def _apply_skips(block):
    for marker, reason in SKIPPED_BLOCKS.items():
        if marker in block.code:
            block.skipped.append(("the whole block", reason))
            block.code = ""
            return block
    kept = []
    for line in block.code.splitlines():
        if line.strip() in SKIPPED_LINES:
            block.skipped.append((line.strip(), SKIPPED_LINES[line.strip()]))
        else:
            kept.append(line)
    block.code = to_tagflow("\n".join(kept))
    return block


def _markdown_blocks(name, text):
    blocks = []
    fence = re.compile(r"^```\{\.(python|json) \.(input|output)[^}]*\}\n(.*?)^```", re.S | re.M)
    for match in fence.finditer(text):
        kind, role, body = match.groups()
        if kind == "python" and role == "input":
            blocks.append(Block(name, len(blocks), body))
        elif kind == "json" and role == "output" and blocks:
            for entry in json.loads(body):
                if entry.get("output_type") == "execute_result":
                    blocks[-1].result = entry["data"]["text/plain"]
                elif entry.get("output_type") == "stream" and entry.get("name") == "stdout":
                    blocks[-1].stdout = (blocks[-1].stdout or "") + entry["text"]
    return blocks


def _rst_blocks(name, text):
    """The ``.. code:: python`` blocks of the MXNet tab panels and of none."""
    blocks = []
    panel = None  # the framework of the tab panel we are in, if any
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        opened = re.search(r'<div class="mdl-tabs__panel[^"]*" id="(\w+)-\d+-\d+">', line)
        if opened:
            panel = opened.group(1)
        elif line.strip() == "</div>" and panel is not None:
            panel = None
        if line.strip() == ".. code:: python":
            i += 1
            body = []
            while i < len(lines) and (not lines[i].strip() or lines[i].startswith("    ")):
                body.append(lines[i][4:])
                i += 1
            if panel in (None, "mxnet"):
                blocks.append(Block(name, len(blocks), "\n".join(body).strip("\n") + "\n"))
            continue
        i += 1
    return blocks


def tutorial_blocks(path):
    """The runnable blocks of one tutorial file, skips applied."""
    text = Path(path).read_text(encoding="utf-8")
    name = Path(path).name
    blocks = _rst_blocks(name, text) if ".. code:: python" in text else _markdown_blocks(name, text)
    return [_apply_skips(b) for b in blocks]
