#!/usr/bin/env bash
# `cargo install` of the `toolgate` command from the packaged crates alone:
# the .crate files (scripts/package-crates) are unpacked into a clean
# temporary directory, far from this checkout, and installed offline (every
# third-party dependency comes from cargo's cache, filled by the workspace
# build). The installed binary then decides with the component the `toolgate`
# crate carries: the demo, a decision, a policy check.
# usage: tests/packaging/install-crate.sh [PACKAGE_DIR]   (default target/package)
set -euo pipefail
cd "$(dirname "$0")/../.."
packages="$(cd "${1:-target/package}" && pwd)"
# The third-party crates compile to the same artifacts as the workspace's:
# sharing its target directory reuses them (only toolgate's own crates and
# whatever the CLI alone unifies differently are compiled again).
target_dir="$PWD/target"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

for crate in "$packages"/*.crate; do tar xzf "$crate" -C "$work"; done
# toolgate's crates the CLI depends on, and the CLI.
dependencies=(toolgate-policy-core toolgate-component-build toolgate toolgate-rmcp toolgate-proxy)
overrides=()
for name in "${dependencies[@]}"; do
  [ -d "$work/$name-0.1.0" ] || { echo "install-crate: $name-0.1.0.crate missing from $packages" >&2; exit 1; }
  # The unpublished crates stand in for crates.io: [patch] by path, as a
  # registry would serve them.
  overrides+=(--config "patch.crates-io.$name.path=\"$work/$name-0.1.0\"")
done
for name in "${dependencies[@]}" toolgate-cli; do
  # toolgate's own crates compile again here whatever the profile (new
  # paths, new artifacts); unoptimized, they compile in a third of the time.
  # What this checks is that the packaged files build and work, not speed.
  # Third-party crates keep the release profile; those the CLI alone
  # resolves with the same features as the workspace build are reused. Not
  # all: in the workspace build the bench's cedar-policy switches on
  # features of either and indexmap, and the component builder's
  # wit-component those of semver, wasmparser and wasm-encoder, which the CLI
  # alone leaves off, so wasmtime and their other dependents compile again
  # (`cargo +nightly build -Z unstable-options --unit-graph` of both shows
  # the five).
  overrides+=(--config "profile.release.package.$name.opt-level=0")
done
cd "$work"
CARGO_TARGET_DIR="$target_dir" cargo install --offline --quiet --root "$work/root" "${overrides[@]}" --path "$work/toolgate-cli-0.1.0"
toolgate="$work/root/bin/toolgate"

fail() { echo "install-crate: FAIL: $*" >&2; exit 1; }
"$toolgate" --version
"$toolgate" demo >"$work/demo.txt" || fail "toolgate demo exited $?"
grep -q "CONFIRMATION_REQUIRED" "$work/demo.txt" || fail "the demo shows no confirmation step"
cat >"$work/catalog.json" <<'JSON'
{"tools":[{"name":"lookup","annotations":{"readOnlyHint":true},"inputSchema":{"type":"object"}},
          {"name":"wipe","annotations":{"destructiveHint":true},"inputSchema":{"type":"object"}}]}
JSON
decisions="$(printf '%s\n' '{"name":"lookup","arguments":{}}' '{"name":"wipe","arguments":{}}' | "$toolgate" eval --catalog "$work/catalog.json")"
echo "$decisions"
[ "$(echo "$decisions" | sed -n 1p | grep -c '"ok":true')" = 1 ] || fail "the read was not allowed"
echo "$decisions" | sed -n 2p | grep -q '"code":"CONFIRMATION_REQUIRED"' || fail "the destructive call was not held for confirmation"
printf 'tools:\n  lookup: {expose: true\n' >"$work/broken.yaml"
set +e; "$toolgate" check --policy "$work/broken.yaml" >"$work/check.err" 2>&1; rc=$?; set -e
[ "$rc" = 1 ] || fail "check of a broken policy exited $rc, not 1 (a finding)"
grep -q "broken.yaml:2:11: error: .*POLICY_SYNTAX" "$work/check.err" || fail "the error does not name the file: $(cat "$work/check.err")"
echo "install-crate: cargo install from the packaged crates works (demo, eval, check)"
