#!/usr/bin/env python3
"""Rewrites (or, with --check, checks) the generated figures in docs/*.md.

A generated block sits between `<!-- generated: simulate ARGS -->` and
`<!-- end generated -->`; its content is the "### Summary" table that the
simulator prints for ARGS (deterministic for a seed: no timings). Usage:
  python3 scripts/docs-figures.py          # rewrite the blocks
  python3 scripts/docs-figures.py --check  # fail when a block is stale
Builds the simulator in release first (cargo)."""
import pathlib
import re
import shlex
import subprocess
import sys

root = pathlib.Path(__file__).resolve().parent.parent
check = "--check" in sys.argv[1:]
block = re.compile(r"(<!-- generated: simulate (.*?) -->\n)(.*?)(<!-- end generated -->)", re.S)

subprocess.run(
    ["cargo", "build", "--quiet", "--release", "-p", "hedgehog-core", "--example", "simulate"],
    cwd=root,
    check=True,
)
simulate = root / "target" / "release" / "examples" / "simulate"


def summary(args):
    out = subprocess.run(
        [str(simulate), *shlex.split(args), "--out", str(root / "target" / "docs-figures")],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    if "### Summary\n\n" not in out:
        sys.exit(f"docs-figures: `simulate {args}` printed no summary (needs 2+ scenarios)")
    table = out.split("### Summary\n\n", 1)[1]
    return "\n".join(line for line in table.splitlines() if line.startswith("|")) + "\n"


stale = []
for doc in sorted((root / "docs").glob("*.md")):
    text = doc.read_text()

    def replace(m):
        fresh = summary(m.group(2))
        if m.group(3) != fresh:
            stale.append(f"{doc.relative_to(root)}: simulate {m.group(2)}")
        return m.group(1) + fresh + m.group(4)

    new = block.sub(replace, text)
    if not check and new != text:
        doc.write_text(new)

if check and stale:
    print("docs-figures: stale generated figures (run python3 scripts/docs-figures.py):")
    for s in stale:
        print("  " + s)
    sys.exit(1)
print("docs-figures: " + ("all generated figures current" if check else f"rewrote {len(stale)} block(s)"))
