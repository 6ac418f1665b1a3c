"""Table 6 protocol: the mean test accuracy of the Set A -> B and Set B -> A ordering runs.

    python -m vnr.benchmarks.symon.order_mean DIR_A_TO_B DIR_B_TO_A

Each DIR is a finished `configs/symon/order.py:a_to_b` / `:b_to_a` run (its
`results.json`: test split -> metrics).
"""

from __future__ import annotations

import json
import pathlib
import sys

from vnr import cli


def mean_accuracy(a_to_b: str | pathlib.Path, b_to_a: str | pathlib.Path) -> dict[str, float]:
    """{"setB": acc, "setA": acc, "mean": their mean} from the two runs' results.json."""
    out = {}
    for workdir, split in ((a_to_b, "setB"), (b_to_a, "setA")):
        path = pathlib.Path(workdir) / "results.json"
        if not path.is_file():
            raise FileNotFoundError(f"{path} missing: run configs/symon/order.py with "
                                    f"{'a_to_b' if split == 'setB' else 'b_to_a'} first")
        results = json.loads(path.read_text())
        if split not in results:
            raise ValueError(f"{path} has no {split!r} test split (has {sorted(results)})")
        out[split] = float(results[split]["accuracy"])
    out["mean"] = (out["setA"] + out["setB"]) / 2
    return out


def main(argv: list[str] | None = None) -> int:
    args = cli.parse(argv, "python -m vnr.benchmarks.symon.order_mean", __doc__,
                     lambda fv: None, operands="DIR_A_TO_B DIR_B_TO_A")
    if len(args.operands) != 2:
        cli.fail(f"give the two run directories DIR_A_TO_B DIR_B_TO_A, got {args.operands}")
    try:
        print(json.dumps(mean_accuracy(*args.operands), indent=1))
    except (FileNotFoundError, ValueError) as e:
        cli.fail(str(e))
    return 0


if __name__ == "__main__":
    sys.exit(main())
