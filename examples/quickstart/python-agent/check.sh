#!/usr/bin/env bash
# The Python agent quick start as written: agent.py (and the server quick start
# it connects to) copied next to a fresh venv with mcp-toolgate installed from
# its wheel; `python agent.py` must show the read run, the write wait with
# CONFIRMATION_REQUIRED, and the write run only after the person confirmed.
set -euo pipefail
source "$(dirname "$0")/../python-server/venv.sh"
qs="$QS_ROOT/examples/quickstart"
mkdir -p "$QS_TMP/quickstart/python-server" "$QS_TMP/quickstart/python-agent"
cp "$qs/python-server/server.py" "$qs/python-server/policy.yaml" "$QS_TMP/quickstart/python-server/"
cp "$qs/python-agent/agent.py" "$qs/python-agent/policy.yaml" "$QS_TMP/quickstart/python-agent/"
cd "$QS_TMP/quickstart/python-agent"
out="$("$QS_PY" agent.py)"
echo "$out"
fail() { echo "quickstart python-agent: FAIL: $*" >&2; exit 1; }
line() { { grep -n -m1 -F -- "$1" <<<"$out" || true; } | cut -d: -f1; }
read_ran="$(line '  ran get_order {"order_id": "A-1"} -> {"order_id": "A-1", "status": "DELIVERED"')"
waiting="$(line '  waiting: refund_order {"order_id": "A-1"}')"
code="$(line '    CONFIRMATION_REQUIRED: ')"
confirm="$(line 'person: "Yes, refund it."')"
write_ran="$(line '  ran refund_order {"confirmed": true, "order_id": "A-1"} -> {"order_id": "A-1", "status": "REFUNDED"}')"
[[ -n "$read_ran" ]] || fail "the read did not run"
[[ -n "$waiting" && -n "$code" ]] || fail "the write did not wait with CONFIRMATION_REQUIRED"
[[ -n "$confirm" && -n "$write_ran" ]] || fail "the write did not run after the confirmation"
((read_ran < waiting && waiting < code && code < confirm && confirm < write_ran)) || fail "out of order"
[[ "$(grep -c -F '  ran refund_order' <<<"$out")" == 1 ]] || fail "the write ran more than once"
[[ "$(cat refunds.log)" == "refunded A-1" ]] || fail "the refund handler did not run exactly once"
echo "quickstart python-agent: ok"
