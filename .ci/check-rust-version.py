#!/usr/bin/env python3
"""Checks each workspace package's `rust-version` against its dependency graph.

Only one toolchain exists on the machines bee is built on, so the declared minimum is
proven the other way round: every crate in a package's normal+build dependency closure
(as resolved in Cargo.lock for the default features) must declare a rust-version no newer
than the package's, and the package's must be exactly the newest of those (or 1.85, the
first release with edition 2024) -- the lowest version its dependencies allow.

The application package (bee) is checked with every feature selected: its optional review
tools (ast-grep, gix, ...) are part of what a user can build, so its rust-version follows
them. The embeddable crates are checked with their default features, as they are published.
"""
import json
import subprocess
import sys

EDITION_2024 = (1, 85)


def version(text):
    parts = [int(p) for p in text.split(".")]
    return tuple((parts + [0, 0])[:2])


APPLICATION = "bee"


def metadata(*extra):
    meta = json.loads(
        subprocess.check_output(
            ["cargo", "metadata", "--format-version", "1", "--locked", *extra], text=True
        )
    )
    return meta, {p["id"]: p for p in meta["packages"]}, {
        n["id"]: n for n in meta["resolve"]["nodes"]
    }


def main():
    default = metadata()
    every = metadata("--all-features")
    meta = default[0]
    failed = False
    for member in meta["workspace_members"]:
        application = default[1][member]["name"] == APPLICATION
        _, packages, nodes = every if application else default
        pkg = packages[member]
        if pkg["name"] == "xtask":
            continue
        declared = pkg.get("rust_version")
        if not declared:
            print(f"{pkg['name']}: no rust-version declared")
            failed = True
            continue
        # Optional dependencies of the package itself count only when a default feature
        # turns them on; further down, the unified resolve is used as it is.
        # (The application's are all selected.)
        default_features = set(pkg["features"].get("default", []))
        optional = set() if application else {
            d["rename"] or d["name"]
            for d in pkg["dependencies"]
            if d["optional"] and f"dep:{d['rename'] or d['name']}" not in default_features
        }
        seen, stack, floor, culprit = set(), [member], EDITION_2024, "edition 2024"
        while stack:
            current = stack.pop()
            node = nodes[current]
            for dep in node["deps"]:
                kinds = {k["kind"] for k in dep["dep_kinds"]}
                if kinds <= {"dev"} or dep["pkg"] in seen:
                    continue
                if current == member and packages[dep["pkg"]]["name"] in optional:
                    continue
                seen.add(dep["pkg"])
                stack.append(dep["pkg"])
                rv = packages[dep["pkg"]].get("rust_version")
                if rv and version(rv) > floor:
                    floor, culprit = version(rv), packages[dep["pkg"]]["name"]
        if version(declared) != floor:
            print(
                f"{pkg['name']}: declares rust-version {declared}, but its dependencies "
                f"need {floor[0]}.{floor[1]} ({culprit})"
            )
            failed = True
        else:
            print(f"{pkg['name']}: rust-version {declared} (set by {culprit})")
    sys.exit(1 if failed else 0)


main()
