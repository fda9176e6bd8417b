#!/bin/sh
# Shifts the canary's weight as a canary controller would (0 → 10 → 50 →
# 100 → 0, the rollback) and prints, after each step, the apex's
# frontend as `lbctl simulate` computes it: each backend's slots and
# share of new flows. Run from the repository root:
#
#   sh examples/canary/shift.sh
set -eu
here=$(dirname "$0")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$here/manifests/services.yaml" "$work/"
lbctl() { go run ./cmd/lbctl "$@"; }
for canary in 0 10 50 100 0; do
	primary=$((100 - canary))
	sed -e "s/name: web-primary, port: 80, weight: 100/name: web-primary, port: 80, weight: $primary/" \
		-e "s/name: web-canary, port: 80, weight: 0/name: web-canary, port: 80, weight: $canary/" \
		"$here/manifests/route.yaml" >"$work/route.yaml"
	echo "== web-primary $primary, web-canary $canary"
	lbctl simulate -f "$work" --lb-algorithm=maglev | awk 'NR == 1 || /^10\.96\.10\.1:/ { on = 1 } /^10\.96\.10\.[23]:/ { on = 0 } on'
done
