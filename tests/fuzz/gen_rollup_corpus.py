#!/usr/bin/env python3
"""gen_rollup_corpus.py - writes the seed corpus of fuzz_rollup (formats/rollup.h's block
layout, little-endian host order, FNV-1a over 8-byte words as formats/ckbuf.h's tlc_ck_fnv).
Usage: tests/fuzz/gen_rollup_corpus.py tests/fuzz/corpus/rollup"""
import os
import struct
import sys

M = (1 << 64) - 1


def fnv(b):
    h = 0xcbf29ce484222325
    i = 0
    while i + 8 <= len(b):
        h = ((h ^ struct.unpack_from('<Q', b, i)[0]) * 0x100000001b3) & M
        i += 8
    for c in b[i:]:
        h = ((h ^ c) * 0x100000001b3) & M
    return h


def cell(handle, ctx, state, kind, row_kind, samples_bins, mn, mx, viol=None):
    """viol: None for a version-1 cell, else the version-2 violations count."""
    n = sum(c for _, c in samples_bins)
    s = sum(b * c for b, c in samples_bins)
    sq = sum(b * b * c for b, c in samples_bins)
    out = struct.pack('<IIQBBHIQqqqqqQQ', handle, ctx, state, kind, row_kind, 0,
                      len(samples_bins), n, s, mn, mx, 10, 20, sq >> 64, sq & M)
    if viol is not None:
        out += struct.pack('<Q', viol)
    for b, c in samples_bins:
        out += struct.pack('<HQ', b, c)
    return out


def block(epoch, minute, span, cells, version=1):
    b = struct.pack('<IHHQqIIqq', 0x55524c54, version, 0, epoch, minute, span, len(cells),
                    1764000000000000000, 1764000059000000000)
    b += b''.join(cells)
    return b + struct.pack('<Q', fnv(b))


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    seeds = {
        'empty': block(0, 0, 1, []),
        'one': block(1, 29400000, 1, [cell(1, 0, 0, 0, 0, [(100, 3)], 100, 100)]),
        'two': block(1, -5, 1, [cell(1, 0, 0, 0, 0, [(5, 1), (200, 2)], 5, 200),
                                cell(2, 0xFFFFFFFF, 7, 0, 2, [(255, 4), (300, 1)], 255, 300)]),
        'hour': block(3, 120, 60, [cell(4, 1, 0, 3, 0, [(0, 1), (2345, 1)], 0, 2**62)]),
        'nobins': block(1, 0, 1, [cell(9, 0, 0, 1, 0, [], 7, 7)]),
    }
    # version 2: violations per cell, and a cell holding violations only
    seeds['violations'] = block(1, 7, 1, [cell(1, 0, 0, 0, 0, [(100, 3)], 100, 100, viol=2),
                                          cell(1, 0, 0, 3, 0, [], 0, 0, viol=1)], version=2)
    # 'nobins' claims samples without a histogram: give it a count
    b = bytearray(seeds['nobins'][:-8])
    struct.pack_into('<Q', b, 48 + 24, 2)
    seeds['nobins'] = bytes(b) + struct.pack('<Q', fnv(bytes(b)))
    seeds['truncated'] = seeds['two'][:70]
    for name, data in seeds.items():
        with open(os.path.join(out, name), 'wb') as f:
            f.write(data)


if __name__ == '__main__':
    main()
