#!/usr/bin/env python3
"""Rewrites the configuration table in README.md from src/config.rs KEYS.

A native test (config::tests::every_key_is_documented_in_the_readme) fails
when the two drift apart; run this to bring the README back in step."""
import pathlib
import re

root = pathlib.Path(__file__).resolve().parent.parent
src = (root / "src/config.rs").read_text()
start = src.index("pub const KEYS")
block = src[start : src.index("\n];", start)]
rows = re.findall(r'\(\s*"([A-Z0-9_]+)",\s*"((?:[^"\\]|\\.)*)",\s*"((?:[^"\\]|\\.)*)",?\s*\)', block)
clean = lambda t: t.replace("\\", "").replace("|", "/")
table = "| key | default | meaning |\n|---|---|---|\n" + "\n".join(
    f"| `{k}` | {clean(d)} | {clean(m)} |" for k, d, m in rows
)
readme_path = root / "README.md"
readme = readme_path.read_text()
begin = readme.index("| key | default | meaning |")
end = readme.index("\n\n", begin)
readme_path.write_text(readme[:begin] + table + readme[end:])
print(f"README.md: {len(rows)} configuration keys")
