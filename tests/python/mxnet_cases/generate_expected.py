"""Runs the cases (cases.py) on MXNet 1.9.1 and writes what they computed to
mxnet_1_9_1.json, the values test_mxnet_cases.py expects of tagflow. Never in
CI: MXNet is not a Debian package. In a virtual environment:

    python3 -m venv DIR && DIR/bin/pip install mxnet==1.9.1 'numpy<1.24'
    DIR/bin/python tests/python/mxnet_cases/generate_expected.py
"""

import json
import pathlib
import sys

import mxnet as mx

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from cases import CASES  # noqa: E402


def main():
    results = {"mxnet": mx.__version__}
    for name, function in CASES.items():
        results[name] = function(mx)
    out = pathlib.Path(__file__).resolve().parent / "mxnet_1_9_1.json"
    out.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    print(f"wrote {out}: {len(CASES)} cases")


if __name__ == "__main__":
    main()
