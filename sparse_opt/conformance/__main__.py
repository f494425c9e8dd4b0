"""Command line: export the conformance vectors as JSON, or check against them.

::

    python -m sparse_opt.conformance export DIR [--family adam] [--form kernel]
    python -m sparse_opt.conformance check-vectors DIR [--candidate module:Class] [--claims NAME]

``check-vectors`` without ``--candidate`` re-derives every expected trajectory
in ``DIR`` with this package's references (exit status 1 on a disagreement);
with one, it runs that candidate (a class following the candidate protocol)
through the vectors of its family and prints the report (exit status 1 unless
the report is ``ok``). A malformed vector file is named, with its field, on
stderr (exit status 2). ``--form kernel`` exports the catalogue's kernel form
instead: the same scenarios as float32 tables 4 columns wide, the shape an
embedding kernel (FBGEMM's TBE, a CUDA port) takes.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from sparse_opt.conformance.candidate import check_candidate
from sparse_opt.conformance.catalogue import FORMS, scenarios
from sparse_opt.conformance.hyper import FAMILIES
from sparse_opt.conformance.vectors import check_vectors, export_vectors, load_vectors, verify_vectors


def load_candidate(spec: str) -> type:
    """The class named by ``"module:Class"`` (``Class`` may be dotted)."""
    module, sep, qualname = spec.partition(":")
    if not sep or not module or not qualname:
        raise argparse.ArgumentTypeError(f"expected module:Class, got {spec!r}")
    obj: object = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    try:
        return check_candidate(obj)
    except TypeError as exc:
        raise argparse.ArgumentTypeError(f"{spec}: {exc}") from exc


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m sparse_opt.conformance",
        description="Conformance vectors for sparse optimizers: which semantics does an implementation follow?",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    export = sub.add_parser(
        "export", help="write the scenarios and every reference's expected trajectory as JSON",
        description="Write DIR/index.json and one DIR/<scenario>.json per scenario (docs/conformance_schema.md).",
    )
    export.add_argument("directory", metavar="DIR", help="output directory (created if missing)")
    export.add_argument("--family", choices=FAMILIES, help="only this optimizer family's scenarios")
    export.add_argument("--form", choices=[f for f in FORMS if f != "half"], default="catalogue",
                        help="'kernel': the float32, 4-column twins an embedding kernel can run (default: catalogue; "
                             "the half form's float16 is not a vector dtype)")
    vectors = sub.add_parser(
        "check-vectors", help="read exported vectors back: verify them, or check a candidate against them",
        description="Without --candidate, re-derive every expected trajectory in DIR with this package; "
        "with one, run the candidate through the vectors of its family and print the report.",
    )
    vectors.add_argument("directory", metavar="DIR", help="a directory written by 'export'")
    vectors.add_argument("--candidate", type=load_candidate, metavar="module:Class",
                         help="a class following the candidate protocol (sparse_opt.conformance.candidate)")
    vectors.add_argument("--claims", metavar="NAME", help="the reference the candidate claims (default: its 'claims')")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (2 for a malformed vector file, named on stderr)."""
    args = _parser().parse_args(argv)
    try:
        return _run(args)
    except ValueError as exc:
        if args.command != "check-vectors":
            raise
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    if args.command == "export":
        written = export_vectors(args.directory, scenarios(args.family, form=args.form))
        print(f"wrote {len(written)} scenario files and index.json to {args.directory}")
        return 0
    if args.candidate is None:
        loaded = load_vectors(args.directory)
        problems = verify_vectors(loaded)
        for line in problems:
            print(line)
        verdict = f"{len(problems)} disagreements" if problems else "all expected trajectories reproduce"
        print(f"{len(loaded)} scenario files: {verdict}")
        return 1 if problems else 0
    report = check_vectors(args.directory, args.candidate, claims=args.claims)
    print(report)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
