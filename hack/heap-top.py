#!/usr/bin/env python3
"""The top allocation sites of a dhat heap profile (`make soak PROFILE=1` writes one).

usage: hack/heap-top.py [PROFILE] [--by eb|gb|tb] [--top N]

  eb  bytes still allocated when the broker stopped (what it kept), the default
  gb  bytes allocated at the heap's peak
  tb  bytes allocated over the whole run

Each site is shown by its first frames inside poolboy (or, when it has none, the first frames
outside the allocator and the standard library).
"""

import argparse
import json
import re

SKIP = re.compile(
    r"^(alloc::|core::|std::|dhat::|hashbrown::|<alloc::|<core::|<std::|<hashbrown::|"
    r"__rust|\[root\]|<dhat::|<T as alloc|<\[T\]|<&)"
)


def name_of(frame: str) -> str:
    # "0x55d...: poolboy::store::x::y (src/store/x.rs:12:5)" -> function and place
    frame = re.sub(r"^0x[0-9a-f]+: ", "", frame)
    frame = re.sub(r"::h[0-9a-f]{16}", "", frame)
    return frame


def describe(frames: list[str], depth: int) -> list[str]:
    names = [name_of(f) for f in frames]
    ours = [n for n in names if "poolboy::" in n and not n.startswith("poolboy::main")]
    if ours:
        return ours[:depth]
    return [n for n in names if not SKIP.match(n)][:depth]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("profile", nargs="?", default="target/soak/dhat-heap.json")
    parser.add_argument("--by", choices=["eb", "gb", "tb"], default="eb")
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--depth", type=int, default=3)
    args = parser.parse_args()
    with open(args.profile) as f:
        profile = json.load(f)
    table = profile["ftbl"]
    sites = sorted(profile["pps"], key=lambda pp: pp[args.by], reverse=True)
    total = sum(pp[args.by] for pp in profile["pps"])
    blocks = {"eb": "ebk", "gb": "gbk", "tb": "tbk"}[args.by]
    print(f"{args.profile}: {total / 1048576:.2f} MiB in all ({args.by}), top {args.top} sites")
    for pp in sites[: args.top]:
        frames = [table[i] for i in pp["fs"]]
        print(f"{pp[args.by] / 1048576:9.2f} MiB {pp[blocks]:>9} blocks  " + " <- ".join(describe(frames, args.depth)))


if __name__ == "__main__":
    main()
