#!/usr/bin/env python3
"""Checks each workspace package's `rust-version` against its dependency graph.

Only one toolchain exists on the machines bee is built on, so the declared minimum is
proven the other way round: every crate in a package's normal+build dependency closure
(as resolved in Cargo.lock for the default features) must declare a rust-version no newer
than the package's, and the package's must be exactly the newest of those (or 1.85, the
first release with edition 2024) -- the lowest version its dependencies allow.

The application package (bee) is checked with every feature selected: its optional review
tools (ast-grep, gix, ...) are part of what a user can build, so its rust-version follows
them. The embeddable crates are checked with their default features, as they are published,
and with features resolved for them alone (`cargo tree -p`): `cargo metadata` unifies the
workspace's features, so a feature one member turns on in a shared crate (bee-userspace's
`bee-common/user`, which brings aya) would otherwise count against every member using it.
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


def closure_alone(name, packages):
    """The ids of the packages in `name`'s normal+build closure, features resolved for it
    alone, with its default features (what `cargo build -p NAME` builds)."""
    out = subprocess.check_output(
        ["cargo", "tree", "-p", name, "-e", "normal,build", "--prefix", "none", "--locked"],
        text=True,
    )
    by_name = {(p["name"], p["version"]): pid for pid, p in packages.items()}
    ids = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[1].startswith("v"):
            pid = by_name.get((parts[0], parts[1][1:]))
            if pid:
                ids.add(pid)
    return ids


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
        # The application with every feature, through the resolve of `--all-features`; an
        # embeddable crate with its default features, resolved for it alone.
        floor, culprit = EDITION_2024, "edition 2024"
        if not application:
            for dep in closure_alone(pkg["name"], packages) - {member}:
                rv = packages[dep].get("rust_version")
                if rv and version(rv) > floor:
                    floor, culprit = version(rv), packages[dep]["name"]
        seen, stack = set(), [member] if application else []
        while stack:
            current = stack.pop()
            node = nodes[current]
            for dep in node["deps"]:
                kinds = {k["kind"] for k in dep["dep_kinds"]}
                if kinds <= {"dev"} or dep["pkg"] in seen:
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
