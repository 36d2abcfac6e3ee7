#!/usr/bin/env bash
# The Rust quick start as written: the binary the workspace build made
# (target/release/quickstart-rust-host) decides what the README says.
set -euo pipefail
cd "$(dirname "$0")/../../.."
out="$(target/release/quickstart-rust-host)"
echo "$out"
fail() { echo "quickstart rust-host: FAIL: $*" >&2; exit 1; }
grep -q '^tools/list: {"tools":\[{"name":"get_order"' <<<"$out" || fail "get_order is not listed first"
grep -q '^run   {"name":"get_order","arguments":{"order_id":"A-1"}} with {"order_id":"A-1"}$' <<<"$out" || fail "the read did not run"
grep -q '^block {"name":"refund_order","arguments":{"order_id":"A-1"}}: CONFIRMATION_REQUIRED; after the person.s yes: run with {' <<<"$out" || fail "the unconfirmed refund was not held for the person, or did not run on their yes"
grep -q '^block {"name":"refund_order","arguments":{"order_id":"A-1","confirmed":true}}: CONFIRMATION_REQUIRED;' <<<"$out" || fail "the model's own confirmed: true ran the refund"
grep -q '^block {"name":"delete_everything","arguments":{}}: NOT_FOUND$' <<<"$out" || fail "an unknown tool was not refused"
echo "quickstart rust-host: ok"
