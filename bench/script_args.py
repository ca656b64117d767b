"""What the benchmark scripts' command lines share (each parses its own with argparse, so that a
misspelt flag stops it instead of being ignored): lists of known names (`--only a,b`), and the
processes a workload script compares with the `--mode` option that adds to them: `default` (cmt run
with CMT_DISABLE=1: CUDA's own path under the same launcher), `cmt` (the built-in defaults), and
each `--mode NAME:VAR=VAL,...` (cmt with those environment variables set)."""
import argparse


def name_list(known, what):
    """An argparse type: a comma-separated list of names, each one of `known` (e.g. the scenarios
    for --only); an unknown one is refused, naming it and the known ones."""
    def parse(text):
        names = text.split(",")
        unknown = [n for n in names if n not in known]
        if unknown:
            raise argparse.ArgumentTypeError(
                f"unknown {what} {', '.join(unknown)} (known: {', '.join(known)})")
        return names
    return parse


def add_mode_option(parser):
    parser.add_argument("--mode", action="append", default=[], type=mode_value,
                        metavar="NAME:VAR=VAL,...",
                        help="one more process kind: cmt with these variables (repeatable)")


def mode_value(text):
    """One --mode value as (name, {var: value}); argparse reports a bad one with this message."""
    name, colon, assigns = text.partition(":")
    pairs = [kv for kv in assigns.split(",") if kv]
    if not name or not colon or any("=" not in kv or kv.startswith("=") for kv in pairs):
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected NAME:VAR=VAL,... (e.g. lanes1:CMT_LANES=1)")
    return name, dict(kv.split("=", 1) for kv in pairs)


def modes_from(mode_args):
    """default and cmt, then the --mode ones in order (a later NAME replaces an earlier one)."""
    modes = {"default": {"CMT_DISABLE": "1"}, "cmt": {}}
    for name, env in mode_args:
        modes[name] = env
    return modes
