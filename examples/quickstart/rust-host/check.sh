#!/usr/bin/env bash
# The Rust quick start as written: the binary the workspace build made
# (target/release/quickstart-rust-host) decides what the README says.
set -euo pipefail
cd "$(dirname "$0")/../../.."
out="$(target/release/quickstart-rust-host)"
echo "$out"
fail() { echo "quickstart rust-host: FAIL: $*" >&2; exit 1; }
grep -q '^tools/list: {"tools":\[{"name":"get_order"' <<<"$out" || fail "get_order is not listed first"
grep -q '^run   {"name":"get_order"' <<<"$out" || fail "the read did not run"
grep -q '^block {"name":"refund_order","arguments":{"order_id":"A-1"}}: CONFIRMATION_REQUIRED$' <<<"$out" || fail "the unconfirmed refund was not held"
grep -q '^run   {"name":"refund_order","arguments":{"order_id":"A-1","confirmed":true}}$' <<<"$out" || fail "the confirmed refund did not run"
grep -q '^block {"name":"delete_everything","arguments":{}}: NOT_FOUND$' <<<"$out" || fail "an unknown tool was not refused"
echo "quickstart rust-host: ok"
