#!/usr/bin/env python3
"""Rewrites the configuration table in README.md from core/src/config/keys.rs
KEYS, and the table of docs/tuning.md from TUNING (the HEDGE_TUNING fields).

Each key is declared once there (name, default, range, meaning); the parser
reads its default and range from the same declaration. A native test
(config::tests::every_key_is_documented_in_the_readme) fails when the docs
and the declarations drift apart; run this to bring them back in step."""
import pathlib
import re

root = pathlib.Path(__file__).resolve().parent.parent
src = (root / "core/src/config/keys.rs").read_text()
string = r'"((?:[^"\\]|\\.)*)"'


def rows_of(table):
    start = src.index(f"pub const {table}")
    block = src[start : src.index("\n];", start)]
    return re.findall(
        r"Key\s*\{\s*name:\s*" + string + r",\s*default:\s*" + string + r",\s*range:\s*(Range::\w+(?:\s*\{[^}]*\})?),\s*meaning:\s*" + string + r",?\s*\}",
        block,
    )


def number(expr):
    """A range bound as written in Rust (1_000, 100 << 20, 86_400.0 * 30.0), as a plain number."""
    value = eval(expr.replace("_", ""), {"__builtins__": {}})  # constants only
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def describe(range_):
    bounds = re.findall(r"(?:min|max):\s*([^,}]+)", range_)
    if range_.startswith("Range::Number"):
        return f"{number(bounds[0].strip())} to {number(bounds[1].strip())}"
    if range_.startswith("Range::Whole"):
        return f"{number(bounds[0].strip())} to {number(bounds[1].strip())}, whole"
    if range_.startswith("Range::Flag"):
        return "true / false"
    return ""


clean = lambda t: t.replace("\\", "").replace("|", "/")


def table(rows, strip=""):
    return "| key | default | range | meaning |\n|---|---|---|---|\n" + "\n".join(
        f"| `{k[len(strip):]}` | {clean(d)} | {describe(r)} | {clean(m)} |" for k, d, r, m in rows
    )


def rewrite(path, rows, strip=""):
    text = path.read_text()
    begin = text.index("| key | default |")
    end = text.index("\n\n", begin)
    path.write_text(text[:begin] + table(rows, strip) + text[end:])
    print(f"{path.relative_to(root)}: {len(rows)} keys")


rewrite(root / "README.md", rows_of("KEYS"))
rewrite(root / "docs/tuning.md", rows_of("TUNING"), "HEDGE_TUNING.")
