#!/usr/bin/env python3
"""Writes data/lengths/debian-changelogs.lengths.txt: the cl100k_base token count of every changelog and release
note (changelog, NEWS, HISTORY, CHANGES files) of the packages installed on a Debian system, one document per
source package and file name (the longest where binary packages of one source differ), the Linux kernel's packages
left out.

    python3 scripts/debian-changelog-lengths.py cl100k_base.tiktoken > data/lengths/debian-changelogs.lengths.txt

cl100k_base.tiktoken is the GPT-4 tokenizer's rank file (sha256 223921b7...65b2a7, checked); needs python3-regex.
Counts as tiktoken does: the pre-tokenizer pattern splits the text, and each piece's UTF-8 bytes are merged
pairwise, lowest rank first, until no adjacent pair is a token."""
import base64
import gzip
import hashlib
import os
import subprocess
import sys

import regex

RANKS_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
PATTERN = regex.compile(r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                        r"|\s*[\r\n]+|\s+(?!\S)|\s+")
PREFIXES = ("changelog", "news", "history", "changes")


def load_ranks(path):
    with open(path, "rb") as f:
        data = f.read()
    if hashlib.sha256(data).hexdigest() != RANKS_SHA256:
        sys.exit(f"{path}: not the cl100k_base rank file (sha256 differs)")
    return {base64.b64decode(token): int(rank) for token, rank in (line.split() for line in data.splitlines())}


def piece_tokens(piece, ranks):
    parts = [piece[i:i + 1] for i in range(len(piece))]
    while len(parts) > 1:
        best, where = None, -1
        for i in range(len(parts) - 1):
            rank = ranks.get(parts[i] + parts[i + 1])
            if rank is not None and (best is None or rank < best):
                best, where = rank, i
        if best is None:
            break
        parts[where:where + 2] = [parts[where] + parts[where + 1]]
    return len(parts)


def count_tokens(text, ranks, cache):
    total = 0
    for match in PATTERN.finditer(text):
        piece = match.group().encode("utf-8")
        if piece not in cache:
            cache[piece] = 1 if piece in ranks else piece_tokens(piece, ranks)
        total += cache[piece]
    return total


def source_packages():
    listing = subprocess.run(["dpkg-query", "-W", "-f=${Package} ${source:Package}\n"], capture_output=True,
                             text=True, check=True).stdout
    return {package.split(":")[0]: source for package, source in (line.split() for line in listing.splitlines())}


def documents(root="/usr/share/doc"):
    seen = set()
    for directory, subdirectories, files in os.walk(root):
        subdirectories.sort()
        if os.path.basename(directory).startswith("linux-"):
            continue
        for name in sorted(files):
            path = os.path.join(directory, name)
            if not name.lower().startswith(PREFIXES) or os.path.islink(path):
                continue
            data = gzip.open(path).read() if name.endswith(".gz") else open(path, "rb").read()
            digest = hashlib.sha256(data).digest()
            if digest not in seen:
                seen.add(digest)
                yield path, data


def main():
    ranks = load_ranks(sys.argv[1])
    sources = source_packages()
    cache = {}
    longest = {}  # (source package, file name) -> (tokens, path)
    for path, data in documents():
        package = path.split("/")[4]
        key = (sources.get(package, package), os.path.basename(path).removesuffix(".gz"))
        tokens = count_tokens(data.decode("utf-8", errors="replace"), ranks, cache)
        if key not in longest or longest[key][0] < tokens:
            longest[key] = (tokens, path)
    print("# Token lengths of the changelogs and release notes (changelog, NEWS, HISTORY, CHANGES files, "
          "decompressed) of the\n# packages of a Debian 12 system, one document per line: one per source package "
          "and file name (the longest where\n# binary packages of one source differ), the Linux kernel's packages "
          "left out.\n# Tokenizer: cl100k_base byte-pair encoding (the GPT-4 tokenizer). Lengths are not truncated.")
    for tokens, _ in sorted(longest.values(), key=lambda row: row[1]):
        print(tokens)


if __name__ == "__main__":
    main()
