#!/usr/bin/env bash
# Quick start, step 1: install, build, and run the default simulation
# (Llama-3-8B, DDP, 8x H100; configs/examples/llama3-8b-ddp-8xh100.json).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh build
exec build/tools/stepsim simulate configs/examples/llama3-8b-ddp-8xh100.json "$@"
