#!/usr/bin/env python3
"""Moves the function names out of a wasm module into a symbol map.

The `name` section (about 110 KB raw, 30 KB gzipped here) would otherwise be
shipped and compiled on every cold start. V8 then reports a panic's frames as
`wasm-function[N]`; look N up in the map (`N name` per line) written beside
the module as `<module>.names`. Usage: wasm-names.py build/index_bg.wasm
"""
import sys
from pathlib import Path


def leb(data, i):
    result = shift = 0
    while True:
        byte = data[i]
        i += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return result, i


def function_names(section):
    """(index, name) pairs of the name section's function-names subsection."""
    _, i = leb(section, 0)
    i += 4  # the section's own name, "name"
    while i < len(section):
        kind = section[i]
        size, i = leb(section, i + 1)
        if kind == 1:
            count, j = leb(section, i)
            for _ in range(count):
                index, j = leb(section, j)
                length, j = leb(section, j)
                yield index, section[j : j + length].decode("utf-8", "replace")
                j += length
        i += size


def main():
    path = Path(sys.argv[1])
    data = path.read_bytes()
    if data[:4] != b"\0asm":
        sys.exit(f"{path}: not a wasm module")
    out, names = bytearray(data[:8]), []
    i = 8
    while i < len(data):
        start = i
        kind = data[i]
        size, i = leb(data, i + 1)
        body = data[i : i + size]
        i += size
        if kind == 0:
            name_len, j = leb(body, 0)
            if body[j : j + name_len] == b"name":
                names = list(function_names(body))
                continue
        out += data[start:i]
    if not names:
        print(f"{path}: no name section (already moved?)")
        return
    Path(f"{path}.names").write_text("".join(f"{n} {name}\n" for n, name in names))
    path.write_bytes(bytes(out))
    print(f"{path}: {len(names)} function names moved to {path}.names ({len(data) - len(out)} bytes)")


if __name__ == "__main__":
    main()
